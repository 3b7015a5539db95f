package engine

import (
	"context"
	"errors"
	"time"

	"github.com/fenecdb/fenec/server/fenecql"
	"github.com/fenecdb/fenec/server/store"
)

// tx is one request's statements under the lock. Every change to memory is
// noted twice: an undo step, so a refused statement or batch leaves no
// trace, and a store change, committed as one unit when all succeed.
type tx struct {
	db      *DB
	ctx     context.Context // the request's: nil in a held claim's look
	write   bool
	rd      *reader // a read's hold on the read lock (yield.go); nil in a write
	upd     []*Rule // the running scoped set's update rules (updateRules)
	undo    []undoStep
	changes []store.Change
	touched []string
	taken   int    // rows the set and del statements picked
	scope   *Scope // the running statement's access
	// The running statement's environment and plan: one statement runs
	// at a time, so a request's statements share them rather than
	// allocating each its own.
	env  fenecql.Env
	plan plan
	// counts holds the answers of a batch's writes that answer a count,
	// one per statement (at is the running one's): a /batch of ten acks
	// allocates them once.
	counts []Result
	at     int
	// Room for a statement's picked rows and a set's fields, used by one
	// statement at a time: a claim's page and an ack's row need no
	// allocation (plan.room).
	docRoom   [16]*Doc
	fieldRoom [8]int
	// The clauses last found sound in a collection (pick).
	checked   *fenecql.Clauses
	checkedIn *Collection
}

type undoStep struct {
	c       *Collection // a document step: its collection
	id      int64
	old     *Doc  // the document before (nil: there was none)
	oldNext int64 // the collection's next id before
	// rare is a step of another kind (nil for a document's): most steps
	// are documents', and a unit's steps are kept until it is durable,
	// so theirs stay small.
	rare *rareStep
}

// rareStep is an undo step that is not a document's.
type rareStep struct {
	created string      // a create step: the collection's name
	dropped *Collection // a drop step: the collection dropped
	order   uint64
	metaKey string // a side record step: its key and what it held
	oldMeta Meta
	hadMeta bool
}

func (t *tx) runAll(ps []Parsed) ([]*Result, error) {
	rs := make([]*Result, len(ps))
	if len(ps) > 1 {
		t.counts = make([]Result, len(ps))
	}
	failures := t.db.readBackFailures()
	for i, p := range ps {
		t.at = i
		t.scope = p.Scope
		r, err := t.exec(p.Stmt, p.Params)
		if err == nil {
			// A row evicted to the file that could not be read back: the
			// statement's answer would lack it (evict.go).
			err = t.db.readBackFailed(failures)
		}
		if err != nil {
			return nil, &BatchError{At: i, Err: err}
		}
		rs[i] = r
	}
	return rs, nil
}

// touch notes that the transaction changed c. The first collection
// noted is c's own one-name list, shared: its capacity is its length, so a
// second name appended is written into a copy, never into it.
func (t *tx) touch(c *Collection) {
	if len(t.touched) == 0 {
		t.touched = c.touched
		return
	}
	for _, n := range t.touched {
		if n == c.Name {
			return
		}
	}
	t.touched = append(t.touched, c.Name)
}

// firstRoom is how many document steps a transaction is given room for
// at its first: a claim or a /batch of acks writes ten, and slices grown
// from nothing would be allocated five times over.
const firstRoom = 10

// room gives the transaction its undo steps and store changes at its
// first document step, cut from the database's slab.
func (t *tx) room() {
	if t.undo == nil {
		t.undo, t.changes = t.db.slab.take()
	}
}

// writeSlab is the room write transactions cut their undo steps, store
// changes and document bodies from, one transaction after another under
// the write lock: a claim's or a /batch's are then no allocation of their
// own, but a part of a chunk shared with the writes before and after it.
// Each slice's length is the part given out for good; a transaction's
// part is what it appended past that, kept (used) only when it commits.
// What a unit hands on (to the store, to the pending undo) is capped at its
// length, so nothing is ever appended into another unit's part.
type writeSlab struct {
	undo    []undoStep
	changes []store.Change
	bodies  []byte
	scratch []byte // encode's: a body is written here, then copied
}

// Chunk sizes: a chunk lives until every unit cut from it has been
// written and dropped by the store, so they are kept small.
const (
	slabSteps = 256
	slabBytes = 32 << 10
)

// take returns empty slices with room at the end of the current chunks
// (new ones when less than firstRoom steps are left).
func (s *writeSlab) take() ([]undoStep, []store.Change) {
	if cap(s.undo)-len(s.undo) < firstRoom {
		s.undo = make([]undoStep, 0, slabSteps)
	}
	if cap(s.changes)-len(s.changes) < firstRoom {
		s.changes = make([]store.Change, 0, slabSteps)
	}
	return s.undo[len(s.undo):len(s.undo)], s.changes[len(s.changes):len(s.changes)]
}

// used keeps t's steps and changes, which it is committing: when they
// still lie in the chunks (append did not move them out), the chunks'
// given-out parts grow past them.
func (s *writeSlab) used(t *tx) {
	if n := len(t.undo); n > 0 && n <= cap(s.undo)-len(s.undo) && &s.undo[:len(s.undo)+1][len(s.undo)] == &t.undo[0] {
		s.undo = s.undo[:len(s.undo)+n]
	}
	if n := len(t.changes); n > 0 && n <= cap(s.changes)-len(s.changes) && &s.changes[:len(s.changes)+1][len(s.changes)] == &t.changes[0] {
		s.changes = s.changes[:len(s.changes)+n]
	}
}

func (t *tx) setDoc(c *Collection, d *Doc) {
	t.room()
	next := c.nextID
	old := c.set(d)
	t.undo = append(t.undo, undoStep{c: c, id: d.ID, old: old, oldNext: next})
	var body []byte
	if t.db.keep {
		body = t.encode(d)
	}
	t.changes = append(t.changes, store.Change{Op: store.OpPut, Coll: c.Name, ID: d.ID, Body: body})
	t.touch(c)
}

// affected returns a count of n as the running statement's answer.
func (t *tx) affected(n int64) *Result {
	if t.at < len(t.counts) {
		r := &t.counts[t.at]
		*r = Result{Affected: n}
		return r
	}
	return affected(n)
}

// encode returns d as persisted (appendDoc), cut from the slab's bytes:
// a claim's ten bodies are no allocation of their own. A body is given out
// as it is written, whether or not its unit commits: a refused unit's
// bytes are room lost, not reused, since nothing tracks who holds them.
//
// The body is written into scratch first and then copied, its length
// known: appending into the chunk itself would, for a body past the
// chunk's room, move the whole chunk into one twice its size, and so on
// without bound. A body of more than an eighth of a chunk gets an
// allocation of its own.
func (t *tx) encode(d *Doc) []byte {
	s := &t.db.slab
	s.scratch = appendDoc(s.scratch[:0], d)
	body := s.scratch
	if len(body) > slabBytes/8 {
		if cap(s.scratch) > slabBytes {
			s.scratch = nil // a large document's room is not kept
		}
		return append([]byte(nil), body...)
	}
	if cap(s.bodies)-len(s.bodies) < len(body) {
		s.bodies = make([]byte, 0, slabBytes)
	}
	start := len(s.bodies)
	s.bodies = append(s.bodies, body...)
	return s.bodies[start:len(s.bodies):len(s.bodies)]
}

func (t *tx) deleteDoc(c *Collection, id int64) {
	old := c.delete(id)
	if old == nil {
		return
	}
	t.room()
	t.undo = append(t.undo, undoStep{c: c, id: id, old: old, oldNext: c.nextID})
	t.changes = append(t.changes, store.Change{Op: store.OpDelete, Coll: c.Name, ID: id})
	t.touch(c)
}

func (t *tx) create(c *Collection) {
	t.db.made++
	t.db.colls[c.Name], t.db.created[c.Name] = c, t.db.made
	t.undo = append(t.undo, undoStep{rare: &rareStep{created: c.Name}})
	t.changes = append(t.changes, store.Change{Op: store.OpCreate, Coll: c.Name, ID: c.nextID, Body: encodeSchema(c.Fields())})
	t.touch(c)
}

func (t *tx) drop(c *Collection) {
	t.undo = append(t.undo, undoStep{rare: &rareStep{dropped: c, order: t.db.created[c.Name]}})
	delete(t.db.colls, c.Name)
	delete(t.db.created, c.Name)
	t.changes = append(t.changes, store.Change{Op: store.OpDrop, Coll: c.Name})
	t.touch(c)
}

// rollback undoes every step, last first.
func (t *tx) rollback() {
	undoSteps(t.db, t.undo)
	t.undo, t.changes, t.touched = nil, nil, nil
}

// undoSteps undoes steps, last first (under the write lock).
func undoSteps(db *DB, steps []undoStep) {
	for i := len(steps) - 1; i >= 0; i-- {
		u := steps[i]
		if u.rare == nil {
			if u.old != nil {
				u.c.set(u.old)
			} else {
				u.c.delete(u.id)
			}
			u.c.nextID = u.oldNext
			continue
		}
		switch r := u.rare; {
		case r.metaKey != "":
			if r.hadMeta {
				db.setMeta(r.metaKey, r.oldMeta)
			} else {
				db.deleteMeta(r.metaKey)
			}
		case r.created != "":
			delete(db.colls, r.created)
			delete(db.created, r.created)
		case r.dropped != nil:
			db.colls[r.dropped.Name] = r.dropped
			db.created[r.dropped.Name] = r.order
		}
	}
}

// coll returns the named collection, or not_found.
func (t *tx) coll(pos fenecql.Pos, name string) (*Collection, error) {
	c := t.db.colls[name]
	if c == nil {
		return nil, fenecql.CodeErrorf(fenecql.CodeUnknown, pos, "no collection %s", name)
	}
	if t.rd != nil {
		t.rd.saw(c)
	}
	return c, nil
}

// stopped returns why the request's statements must stop — its client went
// away, or it ran past its time limit — or nil. Long loops ask it every
// checkEvery rows: a context's Err takes a lock, too dear for every row.
func stopped(ctx context.Context) error {
	if ctx == nil {
		return nil
	}
	switch err := ctx.Err(); {
	case err == nil:
		return nil
	case errors.Is(err, context.DeadlineExceeded):
		return ErrStatementTimeout
	default:
		return unavailableError(err, "request given up")
	}
}

// timeLimit is a run's context under RunOptions.Timeout: its Err is
// DeadlineExceeded from the limit on. Nothing in a run waits on Done — its
// loops ask stopped every checkEvery rows — so the limit is read from the
// clock when asked, not armed as a timer: context.WithTimeout would make a
// timer and a child context of the request's for every request. It never
// leaves the engine, and its Done is its parent's.
type timeLimit struct {
	context.Context
	at time.Time
}

func (c *timeLimit) Deadline() (time.Time, bool) {
	if d, ok := c.Context.Deadline(); ok && d.Before(c.at) {
		return d, true
	}
	return c.at, true
}

func (c *timeLimit) Err() error {
	if err := c.Context.Err(); err != nil {
		return err
	}
	if !time.Now().Before(c.at) {
		return context.DeadlineExceeded
	}
	return nil
}

// checkEvery is how many rows a loop goes between asks of stopped.
const checkEvery = 256
