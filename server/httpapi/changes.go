package httpapi

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/fenecdb/fenec/server/changes"
	"github.com/fenecdb/fenec/server/engine"
	"github.com/fenecdb/fenec/server/fenecql"
	"github.com/fenecdb/fenec/server/httpapi/gen"
)

// The live queries and the change stream (docs/changes.md); the changes
// package does the work, this file the HTTP.

// wantsEvents reports whether a request asks for an event stream.
func wantsEvents(r *http.Request) bool {
	for _, v := range r.Header.Values("Accept") {
		for _, part := range strings.Split(v, ",") {
			mt, _, _ := strings.Cut(part, ";")
			if strings.EqualFold(strings.TrimSpace(mt), "text/event-stream") {
				return true
			}
		}
	}
	return false
}

// liveQuery is POST /query asked with Accept: text/event-stream: its get
// as a live query.
func (s *Server) liveQuery(w http.ResponseWriter, r *http.Request, body []byte) {
	if e := s.check(r, s.queryRoute, body); e != nil {
		writeError(w, e)
		return
	}
	var qr gen.QueryRequest
	if err := decodeStrict(body, &qr); err != nil {
		writeError(w, badRequest("the body is not a query: %v", err))
		return
	}
	params := deref(qr.Params)
	vals := make([]fenecql.Value, len(params))
	for j, p := range params {
		v, err := fenecql.FromGo(deref(p))
		if err != nil {
			writeError(w, badRequest("params[%d]: %v", j, err))
			return
		}
		vals[j] = v
	}
	st, err := engine.ParseStatement(qr.Query)
	if err != nil {
		writeError(w, engineError(err, false))
		return
	}
	g, ok := st.(*fenecql.Get)
	if !ok {
		writeError(w, engineError(fenecql.Errorf(st.Position(), "a live query (Accept: text/event-stream) is a get; this is a %s", engine.Kind(st)), false))
		return
	}
	if e := s.after(r); e != nil {
		writeError(w, e)
		return
	}
	s.stream(w, r, changes.Query{Get: g, Params: vals, Scope: access(r).Scope})
}

// WatchCollection is GET /{collection}/changes: the live query
// `get <collection> where <where> select <select>`.
func (s *Server) WatchCollection(w http.ResponseWriter, r *http.Request, collection string, params gen.WatchCollectionParams) {
	text := "get " + collection
	if where := deref(params.Where); where != "" {
		text += " where " + where
	}
	if sel := deref(params.Select); sel != "" {
		text += " select " + sel
	}
	st, err := engine.ParseStatement(text)
	if err != nil {
		writeError(w, badRequest("in `%s`: %v", Clip(text), err))
		return
	}
	g, ok := st.(*fenecql.Get)
	if !ok || g.Coll != collection {
		writeError(w, badRequest("%s is not a collection's name", Clip(collection)))
		return
	}
	s.stream(w, r, changes.Query{Get: g, Scope: access(r).Scope})
}

// stream answers a live query as text/event-stream until the client goes
// away or the query ends.
func (s *Server) stream(w http.ResponseWriter, r *http.Request, q changes.Query) {
	var last uint64
	resume := false
	if v := r.Header.Get("Last-Event-ID"); v != "" {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil || n > maxSeq {
			writeError(w, badRequest("Last-Event-ID %q: want a position, a whole number from 0 to %d", Clip(v), maxSeq))
			return
		}
		last, resume = n, true
	}
	// A stream lasts: the client's going away ends it (the watch), and the
	// connection's read and write deadlines, made for one answer, are
	// lifted.
	if c := connOf(r); c != nil {
		c.Watch()
	}
	if r.Method == http.MethodHead {
		// HEAD is GET without the body: the same status, and no stream.
		if err := s.changes.Check(r.Context(), q); err != nil {
			writeError(w, s.changesError(err))
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		w.Header().Set("Cache-Control", "no-store")
		w.WriteHeader(http.StatusOK)
		return
	}
	rc := http.NewResponseController(w)
	_ = rc.SetReadDeadline(time.Time{})
	_ = rc.SetWriteDeadline(time.Time{})
	started := false
	var buf []byte
	send := func(ev changes.Event) error {
		if !started {
			h := w.Header()
			h.Set("Content-Type", "text/event-stream")
			h.Set("Cache-Control", "no-store")
			w.WriteHeader(http.StatusOK)
			started = true
		}
		buf = buf[:0]
		if ev.Comment {
			buf = append(append(append(buf, ": "...), ev.Data...), "\n\n"...)
		} else {
			buf = append(buf, "event: "...)
			buf = append(buf, ev.Name...)
			if !ev.Part {
				buf = append(buf, "\nid: "...)
				buf = strconv.AppendUint(buf, ev.Pos, 10)
			}
			buf = append(buf, "\ndata: "...)
			buf = append(buf, ev.Data...)
			buf = append(buf, "\n\n"...)
		}
		if _, err := w.Write(buf); err != nil {
			return err
		}
		return rc.Flush()
	}
	err := s.changes.Live(r.Context(), q, last, resume, send)
	if started || err == nil {
		return
	}
	writeError(w, s.changesError(err))
}

// ReadChanges is GET /_changes.
func (s *Server) ReadChanges(w http.ResponseWriter, r *http.Request, params gen.ReadChangesParams) {
	coll := deref(params.Collection)
	if e := s.changesAccess(r, coll); e != nil {
		writeError(w, e)
		return
	}
	if err := changes.CheckName(params.Consumer); err != nil {
		writeError(w, badRequest("consumer: %v", err))
		return
	}
	wait := time.Duration(deref(params.Wait)) * time.Millisecond
	if wait > 0 {
		if c := connOf(r); c != nil {
			c.Watch() // a held read ends when its client goes away
		}
	}
	b, err := s.changes.Read(r.Context(), consumerID(r, params.Consumer), coll, deref(params.Limit), wait)
	if err != nil {
		writeError(w, s.changesError(err))
		return
	}
	out := struct {
		Consumer string       `json:"consumer"`
		Position uint64       `json:"position"`
		Next     uint64       `json:"next"`
		Changes  []changeJSON `json:"changes"`
	}{Consumer: params.Consumer, Position: b.Pos, Next: b.Next, Changes: make([]changeJSON, len(b.Changes))}
	for i, c := range b.Changes {
		out.Changes[i] = changeJSON{Position: c.Pos, Collection: c.Coll, Op: "put", ID: c.ID, Row: rawRow(c.Row)}
		if c.Delete {
			out.Changes[i].Op = "delete"
		}
	}
	writeJSON(w, out)
}

type changeJSON struct {
	Position   uint64  `json:"position"`
	Collection string  `json:"collection"`
	Op         string  `json:"op"`
	ID         int64   `json:"id"`
	Row        rawJSON `json:"row,omitempty"`
}

// rawJSON is a document as written, sent as it is.
type rawJSON []byte

func (j rawJSON) MarshalJSON() ([]byte, error) { return j, nil }

func rawRow(b []byte) rawJSON {
	if b == nil {
		return nil
	}
	return rawJSON(b)
}

// AckChanges is POST /_changes/ack.
func (s *Server) AckChanges(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		writeError(w, badRequest("reading the body: %v", err))
		return
	}
	var in gen.ChangesAck
	if err := decodeStrict(body, &in); err != nil {
		writeError(w, badRequest("the body is not an ack: %v", err))
		return
	}
	if err := changes.CheckName(in.Consumer); err != nil {
		writeError(w, badRequest("consumer: %v", err))
		return
	}
	if in.Position < 0 {
		writeError(w, badRequest("position %d: want a whole number from 0", in.Position))
		return
	}
	if err := s.changes.Ack(r.Context(), consumerID(r, in.Consumer), uint64(in.Position)); err != nil {
		writeError(w, s.changesError(err))
		return
	}
	w.Header().Set("Fenec-Seq", strconv.FormatUint(s.db.Seq(), 10))
	writeJSON(w, gen.ChangesAck{Consumer: in.Consumer, Position: in.Position})
}

// changesAccess checks that the request's token may read the change
// stream of coll ("" for every collection): the operator's token may; a
// token held to a policy must name a collection it may read whole, since
// a past write's row is not judged against its rules here. One it may not
// read at all is 404, as a get of it is.
func (s *Server) changesAccess(r *http.Request, coll string) *apiError {
	scope := access(r).Scope
	if scope == nil {
		return nil
	}
	if coll == "" {
		return &apiError{code: gen.ErrorCodeForbidden,
			msg: "GET /_changes: a token held to a policy names the collection it reads (collection=…)"}
	}
	if _, ok := s.readable(r.Context(), coll, scope); !ok {
		return &apiError{code: gen.ErrorCodeNotFound, msg: fmt.Sprintf("no collection %s", Clip(coll))}
	}
	if !readsWhole(scope, coll) {
		return &apiError{code: gen.ErrorCodeForbidden,
			msg: fmt.Sprintf("GET /_changes: this token may read only some rows of %s, and the change stream cannot hold a past write to its rules row by row: use a live query (GET /%s/changes)", Clip(coll), Clip(coll))}
	}
	return nil
}

// readsWhole reports whether a rule lets the scope read every row of coll.
func readsWhole(scope *engine.Scope, coll string) bool {
	for _, rule := range scope.Rules {
		if (rule.Coll == coll || rule.Coll == "*") && rule.Grants&engine.GrantRead != 0 && rule.Filter == nil {
			return true
		}
	}
	return false
}

// consumerID is the name a consumer is kept under: a token held to a
// policy has consumers of its own, under its subject (its JWT's sub), so
// that one tenant can neither read from nor move another's position.
func consumerID(r *http.Request, name string) string {
	if who := subject(access(r)); who != "" {
		return who + "/" + name
	}
	return name
}

// changesError maps the changes package's errors to answers.
func (s *Server) changesError(err error) *apiError {
	var gone *changes.GoneError
	var past *changes.PastError
	switch {
	case errors.As(err, &gone):
		return &apiError{code: gen.ErrorCodeChangesGone, msg: err.Error()}
	case errors.Is(err, changes.ErrBusy):
		return &apiError{code: gen.ErrorCodeConsumerBusy, msg: "another read under this consumer's name is running: one reader per name (docs/changes.md)"}
	case errors.As(err, &past):
		return badRequest("%v", err)
	case errors.Is(err, changes.ErrClosed):
		return newError(gen.ErrorCodeUnavailable, "the server is shutting down")
	}
	return engineError(err, false)
}
