package httpapi

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/fenecdb/fenec/server/engine"
	"github.com/fenecdb/fenec/server/fenecql"
	"github.com/fenecdb/fenec/server/httpapi/gen"
	"github.com/fenecdb/fenec/server/httpapi/internal/h1"
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
	// tenant is the token subject whose requests --token-concurrency
	// bounds (limit.go); "" for full access.
	tenant string
}

// scratch is the room a request served by the fast path (body.go) takes,
// kept for the next such request once the request has ended without
// anything left holding it: its body, statements and parameters, parsed
// request and status writer then cost no allocation: a worker loop's
// claims and acks are this path's most common requests
// (BenchmarkHTTPQueue's allocs/op shows it).
type scratch struct {
	sw    statusWriter
	body  []byte
	stmts []stmtIn
	slab  []fenecql.Value
	req   request
}

var scratches = sync.Pool{New: func() any { return new(scratch) }}

// The largest body, statement count and parameter count whose room is
// kept: a rare large request must not stay in memory as a buffer.
const (
	maxScratchBody   = 64 << 10
	maxScratchStmts  = 256
	maxScratchParams = 1024
)

// recycle puts sc back in the pool, its references dropped so that what
// the request read is not kept alive by the pool.
func (sc *scratch) recycle() {
	sc.sw = statusWriter{}
	if cap(sc.body) > maxScratchBody {
		sc.body = nil
	}
	sc.body = sc.body[:0]
	if cap(sc.stmts) > maxScratchStmts {
		sc.stmts = nil
	}
	clear(sc.stmts)
	sc.stmts = sc.stmts[:0]
	if cap(sc.slab) > maxScratchParams {
		sc.slab = nil
	}
	clear(sc.slab)
	sc.slab = sc.slab[:0]
	stmts, text := sc.req.stmts, sc.req.text
	if cap(stmts) > maxScratchStmts {
		stmts, text = nil, nil
	}
	clear(stmts)
	clear(text)
	sc.req = request{stmts: stmts[:0], text: text[:0]}
	scratches.Put(sc)
}

// Query is POST /query, as the full check and the generated wrapper
// hand it over: a body the fast path (ServeHTTP) left to them, read here
// by the same reader (body.go). Fenec-Wait has been validated against the
// spec; a held claim is the wait package's, which runs it on the engine
// each turn.
func (s *Server) Query(w http.ResponseWriter, r *http.Request, params gen.QueryParams) {
	s.statements(w, r, false, params.IdempotencyKey, params.FenecWait)
}

// Batch is POST /batch, as Query.
func (s *Server) Batch(w http.ResponseWriter, r *http.Request, params gen.BatchParams) {
	s.statements(w, r, true, params.IdempotencyKey, params.FenecWait)
}

// statements reads the body of a /query or a /batch, then serves it.
func (s *Server) statements(w http.ResponseWriter, r *http.Request, batch bool, key *gen.IdempotencyKey, held *gen.FenecWait) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		writeError(w, badRequest("reading the body: %v", err))
		return
	}
	var slab []fenecql.Value
	stmts, e := readStatements(body, batch, nil, &slab)
	if e != nil {
		writeError(w, e)
		return
	}
	req, e := s.parse(&request{}, r, batch, stmts)
	if e != nil {
		writeError(w, e)
		return
	}
	s.run(w, r, body, req, key, held)
}

// run serves a parsed request with its headers.
func (s *Server) run(w http.ResponseWriter, r *http.Request, body []byte, req *request, key *gen.IdempotencyKey, held *gen.FenecWait) {
	req.key = deref(key)
	if req.key != "" {
		req.fp = fingerprintOf(r, body)
	}
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

// parse parses the statements into req, reusing the room of req's
// statements and texts. Nothing has run yet, so any error here writes
// nothing.
func (s *Server) parse(req *request, r *http.Request, batch bool, in []stmtIn) (*request, *apiError) {
	n := len(in)
	a := access(r)
	req.batch, req.scope, req.tenant = batch, a.Key, subject(a)
	if cap(req.stmts) >= n {
		req.stmts, req.text = req.stmts[:n], req.text[:n]
	} else {
		req.stmts, req.text = make([]engine.Parsed, n), make([]string, n)
	}
	for i, in := range in {
		st, text, err := engine.ParseStatementText(in.raw)
		if err != nil {
			s.metrics.statement("unparsed", string(errorCode(err)))
			return nil, engineError(&engine.BatchError{At: i, Err: err}, batch)
		}
		req.stmts[i], req.text[i] = engine.Parsed{Stmt: st, Params: in.params, Scope: a.Scope}, text
		req.write = req.write || engine.IsWrite(st)
	}
	return req, nil
}

// serve answers a parsed request: the first answer again for an
// Idempotency-Key already used, else the answer of running it.
func (s *Server) serve(w http.ResponseWriter, r *http.Request, req *request) {
	if req.wait == nil {
		// A held claim is not counted while it waits: it takes no core
		// then, and a worker's claim must not be refused for its acks.
		leave, e := s.tenants.enter(r.Context(), req.tenant)
		if leave == nil {
			if e != nil {
				writeError(w, e)
			}
			return
		}
		defer leave()
	}
	if req.wait != nil {
		if err := engine.Holdable(req.stmts); err != nil {
			e := engineError(err, req.batch)
			e.msg = "Fenec-Wait: " + e.msg
			writeError(w, e)
			return
		}
	}
	conn := connOf(r)
	if req.wait != nil && conn != nil {
		// A held claim may wait long before it writes: it is no longer
		// on its way to a commit a sync should wait for.
		conn.Arrived(false)
		// A held claim must stop holding when its client goes away, not
		// take a job nobody will work on: on a connection served by
		// internal/h1 the request's context is only watched when asked;
		// under net/http it always is.
		conn.Watch()
	}
	// Reads write nothing, so a key on them only has them run again.
	if req.key == "" || !req.write {
		rs, err := s.execute(r.Context(), req, nil, conn)
		if r.Context().Err() != nil {
			return // the client went away: nobody to answer
		}
		if err != nil {
			writeError(w, engineError(err, req.batch))
			return
		}
		buf := answers.Get().(*[]byte)
		*buf = append(appendAnswer((*buf)[:0], rs, req.batch), '\n')
		writeLine(w, *buf, req.write, rs[0].Seq)
		if cap(*buf) <= maxPooledAnswer {
			answers.Put(buf)
		}
		return
	}
	// The check and the write that records the key happen under the key's
	// lock, so two tries of one key cannot both run.
	unlock := s.keys.lock(req.key)
	defer unlock()
	rec, ok, err := s.lookupKey(req.key)
	if errors.Is(err, engine.ErrReplication) {
		writeError(w, engineError(err, req.batch))
		return
	}
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
	}, conn)
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
// while it would take nothing — and returns what it answered. conn, if
// set, is told once the write is queued to the store, before its wait.
func (s *Server) execute(ctx context.Context, req *request, meta func([]*engine.Result) map[string]engine.Meta, conn h1.Conn) ([]*engine.Result, error) {
	var rs []*engine.Result
	var took time.Duration
	var err error
	if req.wait == nil {
		start := time.Now()
		var durable engine.Durable
		limit := s.cfg.StatementTimeout
		if !req.write {
			limit = s.cfg.ReadTimeout
		}
		rs, err = s.db.Run(ctx, req.stmts, engine.RunOptions{Meta: meta, Timeout: limit, Unwaited: &durable})
		if !req.write && errors.Is(err, engine.ErrStatementTimeout) {
			err = readTimedOut{err}
		}
		if conn != nil {
			conn.Arrived(err == nil && req.write)
		}
		if err == nil {
			if err = durable.Wait(); err != nil {
				rs = nil
			}
		}
		took = time.Since(start)
	} else {
		var gone func() bool
		if conn != nil {
			gone = conn.Gone
		}
		rs, took, err = s.heldInTerm(ctx, func(ctx context.Context) ([]*engine.Result, time.Duration, error) {
			return s.hub.Hold(ctx, &wait.Request{Parsed: req.stmts, Scope: req.scope, Wait: *req.wait, Meta: meta, Timeout: s.cfg.StatementTimeout, Gone: gone})
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
	s.metrics.observe(kind, took)
	failedAt := -1
	if err != nil {
		// Only here: the target of errors.As is moved to the heap.
		var be *engine.BatchError
		if errors.As(err, &be) {
			failedAt = be.At
		}
	}
	if err == nil {
		s.queueWrites(req.stmts, rs)
	}
	// Statements are counted by runs of one kind and outcome: a /batch of
	// ten acks counts ten at once.
	var kind0, outcome0 string
	n := 0
	for i, p := range req.stmts {
		outcome := "ok"
		switch {
		case err == nil:
		case i == failedAt || failedAt < 0:
			outcome = string(errorCode(err))
		default:
			outcome = "undone"
		}
		if k := engine.Kind(p.Stmt); n == 0 || k != kind0 || outcome != outcome0 {
			if n > 0 {
				s.metrics.statementsRun(kind0, outcome0, n)
			}
			kind0, outcome0, n = k, outcome, 0
		}
		n++
	}
	if n > 0 {
		s.metrics.statementsRun(kind0, outcome0, n)
	}
	if s.cfg.Slow > 0 && took >= s.cfg.Slow {
		s.log.Warn("slow request", "ms", took.Milliseconds(), "statements", len(req.stmts),
			"query", brief(req.text[0]), "err", err)
	}
}

// answers holds buffers that answers are written into and that go back
// once written, so that a worker's next answer reuses one; an answer that
// outlives its request (an idempotency key's) gets a buffer of its own.
var answers = sync.Pool{New: func() any { b := make([]byte, 0, 4096); return &b }}

// maxPooledAnswer is the largest buffer kept for reuse: a read of a
// million rows must not stay in memory as a buffer.
const maxPooledAnswer = 1 << 20

// answerJSON is the body of a successful request: the one answer of a
// /query, or {"results": [...]} of a /batch.
func answerJSON(rs []*engine.Result, batch bool) []byte { return appendAnswer(nil, rs, batch) }

// appendAnswer appends answerJSON's body to dst.
func appendAnswer(dst []byte, rs []*engine.Result, batch bool) []byte {
	if !batch {
		return rs[0].AppendJSON(dst)
	}
	dst = append(dst, `{"results":[`...)
	for i, r := range rs {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = r.AppendJSON(dst)
	}
	return append(dst, "]}"...)
}

// jsonType is the answers' Content-Type, one slice for all: net/http only
// reads it.
var jsonType = []string{"application/json"}

var newline = []byte{'\n'}

// writeAnswer writes a body and the newline after it.
func writeAnswer(w http.ResponseWriter, body []byte, write bool, seq uint64, replayed bool) {
	writeHead(w, len(body)+1, write, seq, replayed)
	_, _ = w.Write(body)
	_, _ = w.Write(newline)
}

// writeLine writes a body that ends in its newline already, in one write.
func writeLine(w http.ResponseWriter, line []byte, write bool, seq uint64) {
	writeHead(w, len(line), write, seq, false)
	_, _ = w.Write(line)
}

// writeHead writes an answer's status and headers, for a body of n bytes.
func writeHead(w http.ResponseWriter, n int, write bool, seq uint64, replayed bool) {
	h := w.Header()
	h["Content-Type"] = jsonType
	h["Content-Length"] = lengthHeader(n)
	if write {
		h["Fenec-Seq"] = []string{strconv.FormatUint(seq, 10)}
	}
	if replayed {
		h.Set("Idempotent-Replayed", "true")
	}
	w.WriteHeader(http.StatusOK)
}

// lengthHeaders are the Content-Length header values of bodies shorter
// than len(lengthHeaders) bytes, each a slice of one long string of the
// numbers written one after another: an answer's length costs no
// allocation (net/http only reads the values it is given).
var lengthHeaders = func() []string {
	const n = 4096
	var digits strings.Builder
	for i := range n {
		digits.WriteString(strconv.Itoa(i))
	}
	all, at := digits.String(), 0
	vals := make([]string, n)
	for i := range vals {
		w := len(strconv.Itoa(i))
		vals[i] = all[at : at+w]
		at += w
	}
	return vals
}()

// lengthHeader is the Content-Length header value of a body of n bytes.
func lengthHeader(n int) []string {
	if n < len(lengthHeaders) {
		return lengthHeaders[n : n+1 : n+1]
	}
	return []string{strconv.Itoa(n)}
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

// connOf returns the connection serving r (h1.Conn: to be watched for its
// client going away, and told when its write is queued), or nil under
// net/http.
func connOf(r *http.Request) h1.Conn {
	if c, ok := h1.ConnOf(r.Context()); ok {
		return c
	}
	return nil
}
