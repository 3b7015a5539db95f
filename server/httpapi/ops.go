package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/fenecdb/fenec/server/engine"
	"github.com/fenecdb/fenec/server/fenecql"
	"github.com/fenecdb/fenec/server/httpapi/gen"
)

// Health is GET /_health: 200 while the store takes writes, 503 while it
// is failed (reads are still answered; the engine probes the store and
// takes writes again by itself).
func (s *Server) Health(w http.ResponseWriter, r *http.Request) {
	if err := s.db.StoreErr(); err != nil {
		msg := err.Error()
		b, _ := json.Marshal(gen.Health{Ok: false, Store: gen.Failed, Error: &msg})
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Content-Length", strconv.Itoa(len(b)+1))
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = w.Write(append(b, '\n'))
		return
	}
	writeJSON(w, gen.Health{Ok: true, Store: gen.Ok})
}

// Metrics is GET /_metrics.
func (s *Server) Metrics(w http.ResponseWriter, r *http.Request) {
	if e := fullAccess(r, "GET /_metrics"); e != nil {
		writeError(w, e)
		return
	}
	promhttp.HandlerFor(s.metrics.reg, promhttp.HandlerOpts{ErrorLog: slogPrinter{s}}).ServeHTTP(w, r)
}

// Collections is GET /collections (openapi.yaml's x-order keeps each
// object's keys in the order a person reads them: name first). A token
// held to a policy is shown the collections it may read, each with the
// count of documents it may read: to it, the others are not there.
func (s *Server) Collections(w http.ResponseWriter, r *http.Request) {
	out := gen.Collections{Collections: []gen.Collection{}}
	scope := access(r).Scope
	for _, c := range s.db.Collections() {
		gc := gen.Collection{Name: c.Name, Documents: c.Docs, Fields: make([]gen.Field, len(c.Fields))}
		if scope != nil {
			n, ok := s.readable(r.Context(), c.Name, scope)
			if !ok {
				continue
			}
			gc.Documents = n
		}
		for i, f := range c.Fields {
			gc.Fields[i] = gen.Field{Name: f.Name, Type: gen.FieldType(f.Type.String())}
			if f.Index != fenecql.NoIndex {
				idx := gen.FieldIndex(f.Index.String())
				gc.Fields[i].Index = &idx
			}
			if f.TTL > 0 {
				ms := int(f.TTL)
				gc.Fields[i].TtlMs = &ms
			}
		}
		out.Collections = append(out.Collections, gc)
	}
	writeJSON(w, out)
}

// readable returns how many documents of coll the scope may read, or false
// when it may read none of the collection.
func (s *Server) readable(ctx context.Context, coll string, scope *engine.Scope) (int, bool) {
	st, err := fenecql.Parse("get " + coll + " count")
	if err != nil {
		return 0, false
	}
	rs, err := s.db.Run(ctx, []engine.Parsed{{Stmt: st, Scope: scope}}, engine.RunOptions{})
	if err != nil {
		return 0, false
	}
	return int(rs[0].Rows[0][0].Int()), true
}

// fullAccess refuses (403) a token held to a policy: the operator's routes
// are for the --token.
func fullAccess(r *http.Request, route string) *apiError {
	if access(r).Scope == nil {
		return nil
	}
	return &apiError{code: gen.ErrorCodeForbidden,
		msg: route + " needs the server's --token: a token held to a policy may not use it"}
}

// MoveClock is POST /_clock: only a server started with --clock manual has
// a clock to move.
func (s *Server) MoveClock(w http.ResponseWriter, r *http.Request) {
	if e := fullAccess(r, "POST /_clock"); e != nil {
		writeError(w, e)
		return
	}
	if s.cfg.Clock == nil {
		writeError(w, &apiError{code: gen.ErrorCodeNotFound,
			msg: "this server runs on the system clock: POST /_clock needs fenec serve --clock manual"})
		return
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		writeError(w, badRequest("reading the body: %v", err))
		return
	}
	// The spec has checked the shape: one of two whole numbers, ≥ 0. The
	// one whose only key the body has is the move.
	var advance gen.ClockMove0
	var set gen.ClockMove1
	var now int64
	switch {
	case decodeOnly(body, &advance) == nil:
		if cur := s.cfg.Clock.NowMS(); advance.AdvanceMs > maxClockMS-cur {
			writeError(w, badRequest("advance_ms %d would move the clock past year 9999", advance.AdvanceMs))
			return
		}
		now = s.cfg.Clock.Advance(advance.AdvanceMs)
	case decodeOnly(body, &set) == nil:
		if set.SetMs > maxClockMS {
			writeError(w, badRequest("set_ms %d is past year 9999", set.SetMs))
			return
		}
		now = s.cfg.Clock.Set(set.SetMs)
	default:
		writeError(w, badRequest(`send {"advance_ms": n} or {"set_ms": t}`))
		return
	}
	writeJSON(w, gen.ClockNow{NowMs: now, Now: fenecql.FormatTime(now)})
}

// decodeOnly decodes one JSON object that has no key but v's.
func decodeOnly(body []byte, v any) error {
	d := json.NewDecoder(bytes.NewReader(body))
	d.DisallowUnknownFields()
	if err := d.Decode(v); err != nil {
		return err
	}
	if _, err := d.Token(); err != io.EOF {
		return errors.New("data after the JSON value")
	}
	return nil
}

// maxClockMS is 9999-12-31T23:59:59.999Z: timestamps print as ISO-8601
// with four-digit years, so the clock stays below it.
const maxClockMS = 253402300799999

func writeJSON(w http.ResponseWriter, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		writeError(w, &apiError{code: gen.ErrorCodeInternal, msg: fmt.Sprintf("encoding the answer: %v", err)})
		return
	}
	b = append(b, '\n')
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(b)))
	_, _ = w.Write(b)
}

// slogPrinter logs promhttp's errors through the server's logger.
type slogPrinter struct{ s *Server }

func (p slogPrinter) Println(v ...any) { p.s.log.Error("metrics", "err", fmt.Sprint(v...)) }

// Backup is GET /_backup: a consistent copy of the file, taken while
// writes go on (engine.DB.Copy), streamed from a temporary file beside the
// database, with the seq it holds in Fenec-Seq.
func (s *Server) Backup(w http.ResponseWriter, r *http.Request) {
	if e := fullAccess(r, "GET /_backup"); e != nil {
		writeError(w, e)
		return
	}
	// A big file takes longer to copy and send than the server's
	// WriteTimeout allows a request: this route has none.
	_ = http.NewResponseController(w).SetWriteDeadline(time.Time{})
	path, seq, err := s.db.Copy(r.Context(), nil)
	if err != nil {
		switch {
		case errors.Is(err, engine.ErrNoFile):
			writeError(w, &apiError{code: gen.ErrorCodeNotFound, msg: err.Error()})
		case s.db.StoreErr() != nil:
			writeError(w, &apiError{code: gen.ErrorCodeUnavailable, msg: "the store failed, so no copy was taken: " + s.db.StoreErr().Error()})
		default:
			writeError(w, &apiError{code: gen.ErrorCodeInternal, msg: "taking the copy: " + err.Error()})
		}
		return
	}
	defer os.Remove(path)
	f, err := os.Open(path)
	if err != nil {
		writeError(w, &apiError{code: gen.ErrorCodeInternal, msg: "reading the copy: " + err.Error()})
		return
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		writeError(w, &apiError{code: gen.ErrorCodeInternal, msg: "reading the copy: " + err.Error()})
		return
	}
	// The file is gone from the directory once sent; the open descriptor
	// keeps it readable until then.
	w.Header().Set("Content-Type", "application/vnd.sqlite3")
	w.Header().Set("Content-Length", strconv.FormatInt(fi.Size(), 10))
	w.Header().Set("Fenec-Seq", strconv.FormatUint(seq, 10))
	if _, err := io.Copy(w, f); err != nil {
		s.log.Warn("sending a backup", "err", err)
	}
}
