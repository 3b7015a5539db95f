package engine

import (
	"sync"
	"sync/atomic"
)

// subscribers are the functions told of each committed write. The list is
// replaced, never changed, so a write reads it without a lock.
type subscribers struct {
	mu   sync.Mutex // serialises Subscribe and unsubscribe
	list atomic.Pointer[[]*subscriber]
}

type subscriber struct{ fn func(colls []string) }

// Subscribe has fn told, after each committed write and once the write
// lock is released, which collections the write changed. Any number may
// subscribe (held claims, a change feed, a replication stream); each
// answer unsubscribes its own fn. fn runs on the writer's goroutine, so
// it returns quickly and takes no lock of the database.
func (db *DB) Subscribe(fn func(colls []string)) (unsubscribe func()) {
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

// tell tells every subscriber of a write to colls.
func (ss *subscribers) tell(colls []string) {
	p := ss.list.Load()
	if p == nil {
		return
	}
	for _, s := range *p {
		s.fn(colls)
	}
}
