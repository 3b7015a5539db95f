package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/fenecdb/fenec/server/engine"
	"github.com/fenecdb/fenec/server/fenecql"
	"github.com/fenecdb/fenec/server/httpapi/gen"
	"github.com/fenecdb/fenec/server/wait"
)

// request is a /query or /batch, parsed and ready to run.
type request struct {
	batch bool
	stmts []engine.Parsed
	write bool     // some statement writes: the run takes the write lock
	text  []string // each statement's text, for the slow log
	key   string   // Idempotency-Key; "" when none
	fp    fingerprint
	wait  *time.Duration // Fenec-Wait; nil when not sent
	scope string         // who asks, as far as access rules narrow the rows
}

// Query is POST /query. Fenec-Wait has been validated against the spec;
// a held claim is the wait package's, which runs it on the engine each
// turn.
func (s *Server) Query(w http.ResponseWriter, r *http.Request, params gen.QueryParams) {
	s.statements(w, r, false, params.IdempotencyKey, params.FenecWait)
}

// Batch is POST /batch.
func (s *Server) Batch(w http.ResponseWriter, r *http.Request, params gen.BatchParams) {
	s.statements(w, r, true, params.IdempotencyKey, params.FenecWait)
}

// statements reads and parses the body of a /query or a /batch, then
// serves it.
func (s *Server) statements(w http.ResponseWriter, r *http.Request, batch bool, key *gen.IdempotencyKey, held *gen.FenecWait) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		writeError(w, badRequest("reading the body: %v", err))
		return
	}
	var qrs []gen.QueryRequest
	if batch {
		var bb gen.BatchRequest
		if err := decodeStrict(body, &bb); err != nil {
			writeError(w, badRequest("the body is not a batch: %v", err))
			return
		}
		qrs = bb.Statements
	} else {
		var qr gen.QueryRequest
		if err := decodeStrict(body, &qr); err != nil {
			writeError(w, badRequest("the body is not a query: %v", err))
			return
		}
		qrs = []gen.QueryRequest{qr}
	}
	req, e := s.parse(r, body, batch, qrs)
	if e != nil {
		writeError(w, e)
		return
	}
	req.key = deref(key)
	req.wait = waitOf(held)
	if e := s.after(r); e != nil {
		writeError(w, e)
		return
	}
	s.serve(w, r, req)
}

func waitOf(ms *gen.FenecWait) *time.Duration {
	if ms == nil {
		return nil
	}
	d := time.Duration(*ms) * time.Millisecond
	return &d
}

// decodeStrict decodes one JSON value, keeping numbers exact (UseNumber:
// an int64 parameter must not pass through a float64).
func decodeStrict(body []byte, v any) error {
	d := json.NewDecoder(bytes.NewReader(body))
	d.UseNumber()
	if err := d.Decode(v); err != nil {
		return err
	}
	if _, err := d.Token(); err != io.EOF {
		return errors.New("data after the JSON value")
	}
	return nil
}

// parse converts the parameters and parses the statements. Nothing has run
// yet, so any error here writes nothing.
func (s *Server) parse(r *http.Request, body []byte, batch bool, qrs []gen.QueryRequest) (*request, *apiError) {
	a := access(r)
	req := &request{batch: batch, stmts: make([]engine.Parsed, len(qrs)), text: make([]string, len(qrs)), scope: a.Key}
	for i, qr := range qrs {
		params := deref(qr.Params)
		vals := make([]fenecql.Value, len(params))
		for j, p := range params {
			v, err := fenecql.FromGo(deref(p))
			if err != nil {
				name := fmt.Sprintf("params[%d]", j)
				if batch {
					name = fmt.Sprintf("statements[%d].params[%d]", i, j)
				}
				e := badRequest("%s: %v", name, err)
				if batch {
					e.at = &i
				}
				return nil, e
			}
			vals[j] = v
		}
		st, err := engine.ParseStatement(qr.Query)
		if err != nil {
			s.metrics.statement("unparsed", string(errorCode(err)))
			return nil, engineError(&engine.BatchError{At: i, Err: err}, batch)
		}
		req.stmts[i], req.text[i] = engine.Parsed{Stmt: st, Params: vals, Scope: a.Scope}, qr.Query
		req.write = req.write || engine.IsWrite(st)
	}
	req.fp = fingerprintOf(r, body)
	return req, nil
}

// serve answers a parsed request: the first answer again for an
// Idempotency-Key already used, else the answer of running it.
func (s *Server) serve(w http.ResponseWriter, r *http.Request, req *request) {
	if req.wait != nil {
		if err := engine.Holdable(req.stmts); err != nil {
			e := engineError(err, req.batch)
			e.msg = "Fenec-Wait: " + e.msg
			writeError(w, e)
			return
		}
	}
	// Reads write nothing, so a key on them only has them run again.
	if req.key == "" || !req.write {
		rs, err := s.execute(r.Context(), req, nil)
		if r.Context().Err() != nil {
			return // the client went away: nobody to answer
		}
		if err != nil {
			writeError(w, engineError(err, req.batch))
			return
		}
		writeAnswer(w, answerJSON(rs, req.batch), req.write, rs[0].Seq, false)
		return
	}
	// The check and the write that records the key happen under the key's
	// lock, so two tries of one key cannot both run.
	unlock := s.keys.lock(req.key)
	defer unlock()
	rec, ok, err := s.lookupKey(req.key)
	if err != nil {
		s.log.Error("idempotency", "err", err)
		writeError(w, &apiError{code: gen.ErrorCodeInternal, msg: err.Error()})
		return
	}
	if ok {
		if rec.FP != req.fp.String() {
			writeError(w, &apiError{code: gen.ErrorCodeKeyReused,
				msg: fmt.Sprintf("Idempotency-Key %q was used for another request", req.key)})
			return
		}
		writeAnswer(w, rec.Answer, true, rec.Seq, true)
		return
	}
	if e := s.keyLimit(req.key); e != nil {
		writeError(w, e)
		return
	}
	var answer []byte
	rs, err := s.execute(r.Context(), req, func(rs []*engine.Result) map[string]engine.Meta {
		answer = answerJSON(rs, req.batch)
		return s.keyRecord(req, answer, rs[0].Seq)
	})
	if r.Context().Err() != nil {
		return
	}
	if err != nil {
		writeError(w, engineError(err, req.batch))
		return
	}
	writeAnswer(w, answer, true, rs[0].Seq, false)
}

// execute runs the request — held by the wait package, with Fenec-Wait,
// while it would take nothing — and answers what it answered.
func (s *Server) execute(ctx context.Context, req *request, meta func([]*engine.Result) map[string]engine.Meta) ([]*engine.Result, error) {
	var rs []*engine.Result
	var took time.Duration
	var err error
	if req.wait == nil {
		start := time.Now()
		rs, err = s.db.RunWith(ctx, req.stmts, engine.RunOptions{Meta: meta, Timeout: s.cfg.StatementTimeout})
		took = time.Since(start)
	} else {
		rs, took, err = s.heldInTerm(ctx, func(ctx context.Context) ([]*engine.Result, time.Duration, error) {
			return s.hub.Hold(ctx, &wait.Request{Parsed: req.stmts, Scope: req.scope, Wait: *req.wait, Meta: meta, Timeout: s.cfg.StatementTimeout})
		})
		if took == 0 {
			return rs, err // the client went away while it was held: nothing ran
		}
	}
	s.observe(req, rs, took, err)
	return rs, err
}

// observe counts and times a run of the request's statements, and logs it
// when it was slow.
func (s *Server) observe(req *request, rs []*engine.Result, took time.Duration, err error) {
	kind := "batch"
	if len(req.stmts) == 1 {
		kind = engine.Kind(req.stmts[0].Stmt)
	}
	s.metrics.latency.WithLabelValues(kind).Observe(took.Seconds())
	var be *engine.BatchError
	failedAt := -1
	if errors.As(err, &be) {
		failedAt = be.At
	}
	if err == nil {
		s.queueWrites(req.stmts, rs)
	}
	for i, p := range req.stmts {
		switch {
		case err == nil:
			s.metrics.statement(engine.Kind(p.Stmt), "ok")
		case i == failedAt || failedAt < 0:
			s.metrics.statement(engine.Kind(p.Stmt), string(errorCode(err)))
		default:
			s.metrics.statement(engine.Kind(p.Stmt), "undone")
		}
	}
	if s.cfg.Slow > 0 && took >= s.cfg.Slow {
		s.log.Warn("slow request", "ms", took.Milliseconds(), "statements", len(req.stmts),
			"query", brief(req.text[0]), "err", err)
	}
}

// answerJSON is the body of a successful request: the one answer of a
// /query, or {"results": [...]} of a /batch.
func answerJSON(rs []*engine.Result, batch bool) []byte {
	if !batch {
		return rs[0].AppendJSON(nil)
	}
	b := []byte(`{"results":[`)
	for i, r := range rs {
		if i > 0 {
			b = append(b, ',')
		}
		b = r.AppendJSON(b)
	}
	return append(b, "]}"...)
}

func writeAnswer(w http.ResponseWriter, body []byte, write bool, seq uint64, replayed bool) {
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", strconv.Itoa(len(body)+1))
	if write {
		h.Set("Fenec-Seq", strconv.FormatUint(seq, 10))
	}
	if replayed {
		h.Set("Idempotent-Replayed", "true")
	}
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(append(body, '\n'))
}

// brief shortens a statement for a log line.
func brief(q string) string {
	const max = 200
	if len(q) > max {
		return q[:max] + "…"
	}
	return q
}

func deref[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}
