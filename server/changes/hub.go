// Package changes follows the database's commits for clients
// (docs/changes.md): live queries, whose rows are read again as the
// commits that touch them land, and a change stream read by named
// consumers. Both are fed by the engine's subscribers (engine.Subscribe),
// on the writer's goroutine: the hub copies what it keeps and hands each
// live query a note on a bounded buffer, so no writer ever waits for a
// client.
package changes

import (
	"errors"
	"slices"
	"sync"
	"time"

	"github.com/fenecdb/fenec/server/engine"
	"github.com/fenecdb/fenec/server/store"
)

// Defaults of Options.
const (
	DefaultRetain    = 100_000
	DefaultRetainAge = 24 * time.Hour
	// DefaultRetainBytes bounds the rows kept: 100 000 changes of 1 KB
	// rows would otherwise hold 100 MB.
	DefaultRetainBytes = 64 << 20
	DefaultBuffer      = 256
	DefaultHeartbeat   = 15 * time.Second
)

// Options configure a Hub.
type Options struct {
	// Retain and RetainAge bound the changes kept for consumers and for
	// live queries that resume: at most Retain changes, none older than
	// RetainAge by the database's clock.
	Retain      int
	RetainAge   time.Duration
	RetainBytes int64 // and at most this many bytes of rows
	// Buffer is how many commits a live query may fall behind before it
	// is closed (docs/changes.md).
	Buffer int
	// Heartbeat is how often a quiet live query is sent a comment line.
	Heartbeat time.Duration
	// ReadTimeout bounds each read of a live query's rows (the server's
	// --read-timeout); 0: none.
	ReadTimeout time.Duration
	Metrics     *Metrics
}

// Change is one document written by a commit.
type Change struct {
	Pos    uint64 // the commit's position (Fenec-Seq)
	At     int64  // when it was told, ms by the database's clock
	Coll   string
	ID     int64
	Delete bool
	Row    []byte // the document as written (JSON); nil for a delete, or on a database with no file
}

// commit is one numbered write as the hub keeps it.
type commit struct {
	pos     uint64
	at      int64
	colls   []string
	changes []Change
	reset   bool // an undo: any row of colls may have changed
}

// note is what a live query is handed for a commit on its collection.
type note struct {
	pos uint64
	ids []int64
	all bool // read every row again (an undo)
}

// Hub follows one database's commits.
type Hub struct {
	db   *engine.DB
	opts Options
	m    *Metrics

	mu sync.Mutex
	// kept are the commits that touched a collection, oldest first; every
	// commit after floor is among them (or touched none), so the oldest
	// position kept is floor+1.
	kept   []commit
	nkept  int   // changes in kept
	nbytes int64 // bytes of their rows
	floor  uint64
	// head is the last position released: every commit up to it has been
	// told, in order. next is the one expected after it; early ones wait
	// in early, since two writers may tell theirs out of order.
	head  uint64
	early map[uint64]commit
	subs  map[string]map[*sub]struct{} // live queries by collection
	nsubs int
	woke  chan struct{} // closed and replaced at each release: the consumers' wait
	busy  map[string]bool
	seen  map[string]uint64 // consumers read or acked since start, and their positions
	done  chan struct{}
	shut  bool

	unsubscribe func()
	j           journal
}

// New starts following db's commits. Close stops it.
func New(db *engine.DB, opts Options) *Hub {
	if opts.Retain <= 0 {
		opts.Retain = DefaultRetain
	}
	if opts.RetainAge <= 0 {
		opts.RetainAge = DefaultRetainAge
	}
	if opts.RetainBytes <= 0 {
		opts.RetainBytes = DefaultRetainBytes
	}
	if opts.Buffer <= 0 {
		opts.Buffer = DefaultBuffer
	}
	if opts.Heartbeat <= 0 {
		opts.Heartbeat = DefaultHeartbeat
	}
	h := &Hub{db: db, opts: opts, m: opts.Metrics, early: map[uint64]commit{},
		subs: map[string]map[*sub]struct{}{}, woke: make(chan struct{}), busy: map[string]bool{},
		seen: map[string]uint64{}, done: make(chan struct{})}
	// The records kept across the last restart, then the journal that
	// keeps the next: made before the server takes writes, so no write
	// falls between (docs/changes.md, Across a restart). The journal
	// stays after Close: a write made without it would be skipped by the
	// records after the next restart.
	kept, floor, ok := h.loadJournal()
	db.SetJournal(h.record)
	h.unsubscribe = db.Subscribe(h.written)
	seq := db.Seq()
	h.mu.Lock()
	// Subscribed first: a commit numbered past this is told; one before
	// it is kept only if its record was.
	h.floor, h.head = seq, seq
	h.keepRecords(kept, floor, ok)
	h.mu.Unlock()
	h.m.watch(h)
	return h
}

// Close stops following the commits, and ends every live query (with its
// closing event) and every consumer's wait.
func (h *Hub) Close() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.shut {
		return
	}
	h.shut = true
	close(h.done)
	h.unsubscribe()
}

// Head returns the last position the hub has released.
func (h *Hub) Head() uint64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.head
}

// Oldest returns the oldest position kept: every change after it minus
// one is kept.
func (h *Hub) Oldest() uint64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.floor + 1
}

// written is the engine's subscriber: on the writer's goroutine, so it
// copies what it keeps and hands on notes without waiting.
func (h *Hub) written(w engine.Write) {
	now := h.db.Clock().NowMS()
	c := commit{pos: w.Seq, at: now, colls: slices.Clone(w.Colls)}
	var rec []byte
	for _, ch := range w.Changes {
		if ch.Op == store.OpMetaPut && w.Seq != 0 && ch.Key == recordKey(w.Seq) {
			rec = ch.Body
		}
	}
	if rec != nil {
		h.seenRecords(w)
	}
	if _, rc, err := decodeRecord(w.Seq, rec); rec != nil && err == nil {
		// The rows the record holds, shared rather than copied again.
		c.at, c.changes = rc.at, rc.changes
		w.Changes = nil
	}
	for _, ch := range w.Changes {
		if ch.Op != store.OpPut && ch.Op != store.OpDelete {
			continue
		}
		x := Change{Pos: w.Seq, At: now, Coll: ch.Coll, ID: ch.ID, Delete: ch.Op == store.OpDelete}
		if !x.Delete && ch.Body != nil {
			x.Row = slices.Clone(ch.Body)
		}
		c.changes = append(c.changes, x)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.shut {
		return
	}
	if w.Seq == 0 {
		// An undo or a discard: memory went back to an earlier write,
		// whose number the next write takes again; or a cluster node's
		// snapshot: memory jumped to a later one.
		jumped := h.db.Seq() > h.head
		h.moveTo(h.db.Seq())
		// The records changed under the journal (taken back, or a
		// snapshot's): its state is read again from them; after a
		// snapshot they give back the changes memory jumped over.
		kept, floor, ok := h.loadJournal()
		if jumped {
			h.keepRecords(kept, floor, ok)
		}
		c.pos, c.reset = h.head, true
		h.fanOut(c)
		h.releaseEarly()
		return
	}
	if w.Seq <= h.head {
		// Numbered again after an undo that changed no collection.
		h.moveTo(w.Seq - 1)
	}
	h.early[w.Seq] = c
	h.releaseEarly()
}

// keepRecords makes the commits of the records (loadJournal's) the ones
// kept, when they reach further back than floor does now; h.mu is held.
func (h *Hub) keepRecords(kept []commit, floor uint64, ok bool) {
	if !ok || floor >= h.floor {
		return
	}
	h.kept, h.nkept, h.nbytes, h.floor = nil, 0, 0, floor
	for _, c := range kept {
		if c.pos <= h.head {
			h.kept = append(h.kept, c)
			h.nkept += len(c.changes)
			h.nbytes += rowBytes(c)
		}
	}
}

// releaseEarly releases the commits told early that are now next.
func (h *Hub) releaseEarly() {
	for {
		next, ok := h.early[h.head+1]
		if !ok {
			break
		}
		delete(h.early, h.head+1)
		h.release(next)
	}
}

// moveTo makes pos the head: back (an undo), dropping what was kept past
// it, or on (a snapshot), past writes never told one by one, which are
// then not kept: the oldest kept is after pos.
func (h *Hub) moveTo(pos uint64) {
	if pos > h.head {
		h.kept, h.nkept, h.nbytes, h.floor = nil, 0, 0, pos
		for p := range h.early {
			if p <= pos {
				delete(h.early, p)
			}
		}
		h.head = pos
		return
	}
	for len(h.kept) > 0 && h.kept[len(h.kept)-1].pos > pos {
		h.drop(h.kept[len(h.kept)-1])
		h.kept = h.kept[:len(h.kept)-1]
	}
	for p := range h.early {
		if p > pos {
			delete(h.early, p)
		}
	}
	h.head = pos
	if h.floor > pos {
		h.floor = pos
	}
}

// release makes a commit, the next in order, visible: kept, handed to
// the live queries on its collections, and the waiting consumers woken.
func (h *Hub) release(c commit) {
	h.head = c.pos
	if len(c.colls) > 0 {
		h.kept = append(h.kept, c)
		h.nkept += len(c.changes)
		for _, x := range c.changes {
			h.nbytes += int64(len(x.Row))
		}
		h.trim(c.at)
		h.fanOut(c)
	}
	close(h.woke)
	h.woke = make(chan struct{})
}

// trim drops the oldest commits past the retention bounds.
func (h *Hub) trim(now int64) {
	age := h.opts.RetainAge.Milliseconds()
	n := 0
	for n < len(h.kept)-1 && (h.nkept > h.opts.Retain || h.nbytes > h.opts.RetainBytes || h.kept[n].at < now-age) {
		h.drop(h.kept[n])
		h.floor = h.kept[n].pos
		n++
	}
	if n > 0 {
		// Resliced, not copied: at the bound every commit drops one, and
		// copying the rest each time would cost a copy of all kept.
		clear(h.kept[:n])
		h.kept = h.kept[n:]
	}
}

// drop counts a kept commit out.
func (h *Hub) drop(c commit) {
	h.nkept -= len(c.changes)
	for _, x := range c.changes {
		h.nbytes -= int64(len(x.Row))
	}
}

// fanOut hands the commit to each live query on its collections; one
// whose buffer is full is dropped (closed with its closing event).
func (h *Hub) fanOut(c commit) {
	for _, coll := range c.colls {
		subs := h.subs[coll]
		if len(subs) == 0 {
			continue
		}
		n := note{pos: c.pos, all: c.reset}
		for _, x := range c.changes {
			if x.Coll == coll {
				n.ids = append(n.ids, x.ID)
			}
		}
		for s := range subs {
			select {
			case s.notes <- n:
			default:
				h.dropLocked(s)
			}
		}
	}
}

func (h *Hub) dropLocked(s *sub) {
	if s.behind {
		return
	}
	s.behind = true
	close(s.dropped)
	h.m.droppedOne()
}

// touchedSince reports whether a kept commit after pos touched coll, and
// whether pos is still within what is kept.
func (h *Hub) touchedSince(coll string, pos uint64) (touched, kept bool) {
	if pos < h.floor {
		return false, false
	}
	for i := len(h.kept) - 1; i >= 0 && h.kept[i].pos > pos; i-- {
		if slices.Contains(h.kept[i].colls, coll) || h.kept[i].reset {
			return true, true
		}
	}
	return false, true
}

// ErrClosed is returned once the hub is closed.
var ErrClosed = errors.New("changes: the server is shutting down")
