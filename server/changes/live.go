package changes

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/fenecdb/fenec/server/engine"
	"github.com/fenecdb/fenec/server/fenecql"
)

// Query is a live query: a get with a where and a select, run under a
// token's access.
type Query struct {
	Get    *fenecql.Get
	Params []fenecql.Value
	Scope  *engine.Scope // nil: full access
}

// Event is one server-sent event: its name, its id (a position) and its
// data, one JSON object. A Comment event is a heartbeat.
type Event struct {
	Name    string
	Pos     uint64
	Data    []byte
	Comment bool
	// Part: not the last event of its commit (or of its rows), so it
	// carries no SSE id: a client cut off in the middle resumes from the
	// commit before, and is sent this one again (docs/changes.md).
	Part bool
}

// rowsPerEvent bounds the rows of one rows or reset event.
const rowsPerEvent = 1000

// CheckLive returns why g cannot be a live query, or nil: a live query's
// rows are decided row by row, so a clause whose answer depends on other
// rows (order, near, limit, offset, count, require) is refused, and the id
// column, which a delete names, must be the row's id.
func CheckLive(g *fenecql.Get) error {
	switch {
	case g.Count:
		return fenecql.Errorf(g.Pos, "a live query answers rows, not a count")
	case g.Order != nil:
		return fenecql.Errorf(g.Pos, "a live query takes no order: its events come in commit order")
	case g.Near != nil:
		return fenecql.Errorf(g.Near.Pos, "a live query takes no near")
	case g.Limit != nil || g.Offset != nil:
		return fenecql.Errorf(g.Pos, "a live query takes no limit or offset: which rows they answer depends on rows other than the one written")
	case g.Require != nil:
		return fenecql.Errorf(g.Pos, "a live query takes no require")
	}
	for _, c := range g.Columns {
		if c.Name == "id" && !isID(c.Expr) {
			return fenecql.Errorf(c.Expr.Position(), "a live query's column id is the row's id, which its delete events name")
		}
	}
	return nil
}

func isID(e fenecql.Expr) bool {
	r, ok := e.(*fenecql.Ref)
	return ok && len(r.Path) == 1 && r.Path[0] == "id"
}

// Check returns the error Live would return before its first event: the
// query refused, or its first read's error. It sends nothing.
func (h *Hub) Check(ctx context.Context, q Query) error {
	if err := CheckLive(q.Get); err != nil {
		return err
	}
	_, err := (&live{h: h, q: q}).read(ctx, nil)
	return err
}

// live is one live query's state on its own goroutine.
type live struct {
	h    *Hub
	q    Query
	view map[int64]bool // the ids the client holds
	at   uint64         // the position the client is current at, once sent what it is sent
	send func(Event) error
}

// sub is a live query as the hub sees it.
type sub struct {
	notes   chan note
	dropped chan struct{} // closed when the buffer overflowed
	behind  bool          // under Hub.mu
}

// Live runs a live query until ctx ends, the hub closes, or the query
// falls behind (docs/changes.md): first its rows (or, resuming from
// lastID, what it takes for the client to be current), then an event per
// change of its rows. It returns the error send returns, or one that
// ended the query after its closing event was sent; the first read's
// error (the query refused) is returned before any event is sent.
func (h *Hub) Live(ctx context.Context, q Query, lastID uint64, resume bool, send func(Event) error) error {
	if err := CheckLive(q.Get); err != nil {
		return err
	}
	s := &sub{notes: make(chan note, h.opts.Buffer), dropped: make(chan struct{})}
	coll := q.Get.Coll
	h.mu.Lock()
	if h.shut {
		h.mu.Unlock()
		return ErrClosed
	}
	if h.subs[coll] == nil {
		h.subs[coll] = map[*sub]struct{}{}
	}
	h.subs[coll][s] = struct{}{}
	h.nsubs++
	// Registered before the first read: a commit after start is handed
	// to s, and its rows read again.
	start := h.head
	touched, kept := h.touchedSince(coll, lastID)
	if lastID > h.head {
		touched = true // a position this server has not applied
	}
	h.mu.Unlock()
	h.m.setSubscribers(h.subscribers())
	defer func() {
		h.mu.Lock()
		delete(h.subs[coll], s)
		if len(h.subs[coll]) == 0 {
			delete(h.subs, coll)
		}
		h.nsubs--
		h.mu.Unlock()
		h.m.setSubscribers(h.subscribers())
	}()

	l := &live{h: h, q: q, view: map[int64]bool{}, at: start, send: send}
	res, err := l.readCommitted(ctx, nil)
	if err != nil {
		return err
	}
	for _, row := range res.rows {
		l.view[row.id] = true
	}
	switch {
	case !resume:
		err = l.sendRows("rows", start, res)
	case !kept:
		if err = l.event("gap", start, `{"position":%d,"oldest":%d}`, start, h.Oldest()); err == nil {
			err = l.sendRows("reset", start, res)
		}
	case touched || q.Scope != nil:
		// A token held to a policy is sent its rows again whatever
		// changed: "nothing new" would tell it no write touched the
		// collection, rows it may not read included.
		err = l.sendRows("reset", start, res)
	default:
		// Nothing to send: the client is current. A comment still
		// answers, so that the stream's head goes out.
		err = send(Event{Comment: true, Data: []byte("resumed")})
	}
	if err != nil {
		return err
	}

	beat := time.NewTicker(h.opts.Heartbeat)
	defer beat.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-h.done:
			return l.closing(l.at, "shutdown")
		case <-s.dropped:
			// At the last commit it was sent: it resumes from there.
			return l.closing(l.at, "behind")
		case <-beat.C:
			if q.Scope != nil && q.Scope.Until != 0 && h.db.Clock().NowMS() >= q.Scope.Until {
				return l.closing(l.at, "token expired")
			}
			if err := send(Event{Comment: true, Data: []byte("heartbeat")}); err != nil {
				return err
			}
		case n := <-s.notes:
			// One read per commit, so that each event carries the
			// position of the commit that made it, in commit order.
			ids := map[int64]bool{}
			for _, id := range n.ids {
				ids[id] = true
			}
			if err := l.changed(ctx, n.pos, ids, n.all); err != nil {
				return err
			}
		}
	}
}

func (h *Hub) subscribers() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.nsubs
}

// row is one row of a live query's answer: its id, and the row as JSON.
type row struct {
	id   int64
	json []byte
}

type answer struct{ rows []row }

// readCommitted is read, returned once every write the read may have
// seen is committed: on a cluster's leader, memory holds the writes it
// proposed before the log commits them, and a live query shows none of
// those, as the change stream hands out none (docs/changes.md). Every
// write the read saw was made by the time it returned, so waiting for the
// position memory is at just after it is enough. Polled: the log commits
// within a heartbeat or two. A lone server's live query shows a write as
// soon as it is made, like any read.
func (l *live) readCommitted(ctx context.Context, ids []int64) (answer, error) {
	res, err := l.read(ctx, ids)
	if err != nil || !l.h.db.Clustered() {
		return res, err
	}
	seen := l.h.db.Seq()
	if l.h.db.Durable() >= seen {
		return res, nil
	}
	tick := time.NewTicker(2 * time.Millisecond)
	defer tick.Stop()
	for l.h.db.Durable() < seen {
		select {
		case <-ctx.Done():
			return answer{}, ctx.Err()
		case <-l.h.done:
			return answer{}, ErrClosed
		case <-tick.C:
		}
	}
	return res, nil
}

// read runs the query under the token's access, for the rows of ids only
// (nil: every row).
func (l *live) read(ctx context.Context, ids []int64) (answer, error) {
	g := *l.q.Get
	if len(g.Columns) > 0 && !slices.ContainsFunc(g.Columns, func(c fenecql.Column) bool { return c.Name == "id" }) {
		g.Columns = append([]fenecql.Column{{Expr: &fenecql.Ref{Pos: g.Pos, Path: []string{"id"}}, Name: "id"}}, g.Columns...)
	}
	params := l.q.Params
	if ids != nil {
		vs := make([]fenecql.Value, len(ids))
		for i, id := range ids {
			vs[i] = fenecql.Int(id)
		}
		params = append(slices.Clip(params), fenecql.List(vs))
		in := &fenecql.In{Pos: g.Pos, X: &fenecql.Ref{Pos: g.Pos, Path: []string{"id"}}, List: &fenecql.Param{Pos: g.Pos, N: len(params)}}
		if g.Where == nil {
			g.Where = in
		} else {
			g.Where = &fenecql.Binary{Pos: g.Pos, Op: fenecql.OpAnd, L: in, R: g.Where}
		}
	}
	rs, err := l.h.db.Run(ctx, []engine.Parsed{{Stmt: &g, Params: params, Scope: l.q.Scope}}, engine.RunOptions{Timeout: l.h.opts.ReadTimeout})
	if err != nil {
		return answer{}, err
	}
	r := rs[0]
	idAt := slices.Index(r.Columns, "id")
	if idAt < 0 {
		return answer{}, errors.New("changes: a live query's answer has no id")
	}
	out := answer{rows: make([]row, len(r.Rows))}
	for i, vals := range r.Rows {
		out.rows[i] = row{id: vals[idAt].Int(), json: appendRow(nil, r.Columns, vals)}
	}
	return out, nil
}

func appendRow(dst []byte, cols []string, vals []fenecql.Value) []byte {
	dst = append(dst, '{')
	for k, v := range vals {
		if k > 0 {
			dst = append(dst, ',')
		}
		dst = fenecql.AppendJSONText(dst, cols[k])
		dst = append(dst, ':')
		dst = fenecql.AppendJSON(dst, v)
	}
	return append(dst, '}')
}

// changed reads the rows of ids again (every row when all) and sends what
// changed for the client: a row that matches now is an insert or an
// update; one the client holds that no longer matches (or is gone, or no
// longer readable) is a delete. A delete only names a row the client
// holds, so an id the token may not read is never sent.
func (l *live) changed(ctx context.Context, pos uint64, ids map[int64]bool, all bool) error {
	var list []int64
	if !all {
		list = make([]int64, 0, len(ids))
		for id := range ids {
			list = append(list, id)
		}
		slices.Sort(list)
	}
	res, err := l.readCommitted(ctx, list)
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if errors.Is(err, ErrClosed) {
			return l.closing(l.at, "shutdown")
		}
		reason := "the query failed: " + err.Error()
		if errors.Is(err, engine.ErrScopeEnded) {
			reason = "token expired"
		}
		return l.closing(pos, reason)
	}
	var evs []Event
	found := map[int64]bool{}
	for _, r := range res.rows {
		found[r.id] = true
		name := "update"
		if !l.view[r.id] {
			name = "insert"
			l.view[r.id] = true
		}
		evs = append(evs, Event{Name: name, Pos: pos, Data: fmt.Appendf(nil, `{"position":%d,"row":%s}`, pos, r.json)})
	}
	var gone []int64
	if all {
		for id := range l.view {
			if !found[id] {
				gone = append(gone, id)
			}
		}
	} else {
		for _, id := range list {
			if l.view[id] && !found[id] {
				gone = append(gone, id)
			}
		}
	}
	slices.Sort(gone)
	for _, id := range gone {
		delete(l.view, id)
		evs = append(evs, Event{Name: "delete", Pos: pos, Data: fmt.Appendf(nil, `{"position":%d,"id":%d}`, pos, id)})
	}
	for i, ev := range evs {
		ev.Part = i < len(evs)-1
		if err := l.send(ev); err != nil {
			return err
		}
		l.h.m.sent()
	}
	l.at = pos
	return nil
}

func (l *live) sendRows(name string, pos uint64, res answer) error {
	for i := 0; i == 0 || i < len(res.rows); i += rowsPerEvent {
		part := res.rows[i:min(i+rowsPerEvent, len(res.rows))]
		b := fmt.Appendf(nil, `{"position":%d,"rows":[`, pos)
		for k, r := range part {
			if k > 0 {
				b = append(b, ',')
			}
			b = append(b, r.json...)
		}
		b = append(b, `],"last":`...)
		last := i+rowsPerEvent >= len(res.rows)
		b = strconv.AppendBool(b, last)
		b = append(b, '}')
		if err := l.send(Event{Name: name, Pos: pos, Data: b, Part: !last}); err != nil {
			return err
		}
		l.h.m.sent()
	}
	return nil
}

func (l *live) event(name string, pos uint64, format string, args ...any) error {
	if err := l.send(Event{Name: name, Pos: pos, Data: fmt.Appendf(nil, format, args...)}); err != nil {
		return err
	}
	l.h.m.sent()
	return nil
}

// errEnded is returned once a live query has sent its closing event.
var errEnded = errors.New("changes: the live query was closed")

// IsEnded reports whether err is a live query's end after its closing
// event (rather than a failure to send).
func IsEnded(err error) bool { return errors.Is(err, errEnded) }

func (l *live) closing(pos uint64, reason string) error {
	b := fmt.Appendf(nil, `{"position":%d,"reason":`, pos)
	b = fenecql.AppendJSONText(b, reason)
	b = append(b, '}')
	if err := l.send(Event{Name: "closing", Pos: pos, Data: b}); err != nil {
		return err
	}
	l.h.m.sent()
	return errEnded
}
