package engine

import (
	"sync"
	"sync/atomic"

	"github.com/fenecdb/fenec/server/store"
)

// subscribers are the functions told of each committed write. The list is
// replaced, never changed, so a write reads it without a lock.
type subscribers struct {
	mu   sync.Mutex // serialises Subscribe and unsubscribe
	list atomic.Pointer[[]*subscriber]
}

type subscriber struct{ fn func(Write) }

// Write is what a subscriber is told of a committed write (or an undo).
type Write struct {
	Colls []string // the collections it changed
	// Local: told on the goroutine of a write a caller made on a database
	// alone, before it is answered, with no lock of the database held: the
	// subscriber may read and write the database before it returns, and
	// the write's answer waits for it. Never on a cluster node (a write
	// there waits for the cluster's log, which may be the very goroutine
	// telling: replica.go), nor for an undo.
	Local bool
	// Joins: Local, under --sync always, before the write waits for the
	// store: a write the subscriber makes now goes into the same group of
	// the store as this one (unless another write has started writing
	// that group meanwhile), so one sync makes both durable.
	Joins bool
	// Seq is the write's position (its Fenec-Seq), and Changes what it
	// wrote, as the store has them; zero and nil for an undo or a discard,
	// which may have changed any row of Colls. Every numbered write is
	// told once, one that changed only side records too (with no Colls),
	// though two writers may tell theirs out of order. Changes (and their
	// bodies) are the writer's: a subscriber copies what it keeps before
	// it returns.
	Seq     uint64
	Changes []store.Change
}

// Subscribe has fn told, after each committed write and once the write
// lock is released, which collections the write changed. Any number may
// subscribe (held claims, a change feed, a replication stream); each
// answer unsubscribes its own fn. fn runs on the writer's goroutine, so
// unless the Write is Local it returns quickly and takes no lock of the
// database.
func (db *DB) Subscribe(fn func(Write)) (unsubscribe func()) {
	s := &subscriber{fn: fn}
	db.written.change(func(old []*subscriber) []*subscriber { return append(old, s) })
	return func() {
		db.written.change(func(old []*subscriber) []*subscriber {
			var out []*subscriber
			for _, x := range old {
				if x != s {
					out = append(out, x)
				}
			}
			return out
		})
	}
}

func (ss *subscribers) change(f func([]*subscriber) []*subscriber) {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	var old []*subscriber
	if p := ss.list.Load(); p != nil {
		old = *p
	}
	next := f(append([]*subscriber(nil), old...))
	ss.list.Store(&next)
}

// tell tells every subscriber of a write to colls, made elsewhere (a
// cluster node's log, an undo): not Local.
func (ss *subscribers) tell(colls []string) { ss.tellWrite(Write{Colls: colls}) }

func (ss *subscribers) tellWrite(w Write) {
	p := ss.list.Load()
	if p == nil {
		return
	}
	for _, s := range *p {
		s.fn(w)
	}
}
