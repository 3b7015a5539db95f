package store

import (
	"sync/atomic"
	"time"
)

// Inbound counts the requests on their way to a commit: read by the
// server that answers them, not yet queued to the store (Commit), nor
// answered without a write. Under --sync always a sync about to start
// waits a little while any are on their way (flush, "the hold"), so that
// the units they are about to queue join it instead of waiting for one
// sync more (docs/architecture.md, "Group commit").
//
// The store is below whatever reads the requests (the HTTP server), so it
// cannot ask it: the count is made where the two are put together
// (fenec serve) and handed to both, the server raising and lowering it,
// the store only reading it. Every raise must be matched by one lowering
// on every path the request may take, or each sync waits its whole hold.
type Inbound struct {
	n       atomic.Int64
	watched atomic.Bool   // a sync's leader waits for none to be on their way
	none    chan struct{} // told (capacity 1) when the count falls to zero while watched
	timer   *time.Timer   // the hold's bound; used by the one leader holding
}

// NewInbound answers a count of none.
func NewInbound() *Inbound {
	t := time.NewTimer(time.Hour)
	t.Stop()
	return &Inbound{none: make(chan struct{}, 1), timer: t}
}

// Add counts a request on its way.
func (in *Inbound) Add() { in.n.Add(1) }

// Done counts one that arrived: queued its unit, or ended without one.
func (in *Inbound) Done() {
	if in.n.Add(-1) == 0 && in.watched.Load() {
		select {
		case in.none <- struct{}{}:
		default:
		}
	}
}

// Pending answers how many are on their way.
func (in *Inbound) Pending() int64 { return in.n.Load() }

// wait waits until none is on its way, or for d at most. One caller at a
// time (the leader of the one group written and not yet synced: flush).
func (in *Inbound) wait(d time.Duration) {
	select {
	case <-in.none: // told after an earlier wait ended
	default:
	}
	in.watched.Store(true)
	if in.n.Load() > 0 {
		in.timer.Reset(d)
		select {
		case <-in.none:
		case <-in.timer.C:
		}
		in.timer.Stop()
	}
	in.watched.Store(false)
}
