// The hold before a sync: a leader waits a little for the units of
// requests on their way (Inbound), which then share its sync.

package store

import (
	"sync/atomic"
	"time"
)

// holdLocked waits, before a sync starts, for the units of requests on
// their way to a commit (Options.Inbound), which then join the sync
// (gathered): while any is between its head and its commit, or while the
// sync would carry fewer units than connections wrote lately and the
// last sync ended within Inbound.busy (but no more units than the recent
// syncs carried: recentMostLocked), for Inbound's hold at most. Holds that gain no unit twice running stop the
// holding for holdRest syncs: a connection that wrote lately but will
// not soon does not delay every sync. mu is held, and released meanwhile.
func (s *Store) holdLocked() {
	if s.holdRest > 0 {
		s.holdRest--
		return
	}
	units0 := s.pendingUnitsLocked()
	var end time.Time // zero: not waited
	siblings := -1    // whether to wait for the connections that wrote lately (-1: not asked yet)
	for {
		units, pending := s.pendingUnitsLocked(), s.inbound.Pending()
		if pending <= 0 && units >= min(s.inbound.Active(), s.recentMostLocked()) {
			break
		}
		now := time.Now()
		if siblings < 0 {
			siblings = 0
			if now.Sub(s.lastSync) < s.inbound.busy {
				siblings = 1
			}
		}
		if pending <= 0 && siblings == 0 {
			break // writing now and then: Inbound.busy
		}
		if end.IsZero() {
			end = now.Add(s.inbound.hold)
		} else if !now.Before(end) {
			break
		}
		s.mu.Unlock()
		s.inbound.wait(end.Sub(now), pending)
		s.mu.Lock()
	}
	switch {
	case end.IsZero():
	case s.pendingUnitsLocked() > units0:
		s.holdMisses = 0
	default:
		s.holdMisses++
		if s.holdMisses == 2 {
			s.holdMisses, s.holdRest = 0, holdRest
		}
	}
}

// recentSyncs is how many of the last syncs' units recentMostLocked
// weighs: enough to see a steady load's usual group through a sync that
// caught only part of it, few enough to follow a load that shrinks.
const recentSyncs = 8

// recentMostLocked returns the most units one of the last recentSyncs
// syncs carried (at least 1); mu is held. The connections that wrote
// lately (Inbound.Active) overcount the units a sync may expect when a
// client spreads its writes over more connections than it writes on at
// once — a worker whose claim and ack go together on two of the three
// connections its pool keeps — and every such sync would then wait out
// its whole hold for a unit that is not coming. A sync waits for no more
// units than the recent ones carried; one that carries more (a load
// growing) raises the bound at once. Measured by make worker-bench
// (docs/benchmarks.md, "The hold and a worker's two connections").
func (s *Store) recentMostLocked() int64 {
	most := 1
	for _, n := range s.recentUnits {
		most = max(most, n)
	}
	return int64(most)
}

// holdRest is how many syncs start without a hold after two holds gained
// nothing (holdLocked).
const holdRest = 16

// pendingUnitsLocked returns the units written and queued, not yet
// syncing; mu is held.
func (s *Store) pendingUnitsLocked() int64 {
	units := int64(s.cur.units)
	for _, g := range s.unsynced {
		units += int64(g.units)
	}
	return units
}

// pipelineUnits is the most units a sync under way may carry for the next
// group to be written meanwhile (flush): as many as a few workers keep in
// flight, fewer than many workers put in one group. Past 2*pipelineUnits
// connections writing lately (Inbound.Active) no group is written early.
const pipelineUnits = 2

// Inbound counts the requests on their way to a commit — read by the
// server that answers them, not yet queued to the store (Commit), nor
// answered without a write — and the connections that wrote lately. Under
// --sync always a sync about to start waits a little while any request is
// on its way, or while it would carry fewer units than those connections
// (holdLocked, "the hold"), so that the units about to be queued join it
// instead of waiting for one sync more (docs/architecture.md, "The
// commit path").
//
// The store is below whatever reads the requests (the HTTP server), so it
// cannot ask it: the count is made where the two are put together
// (fenec serve) and handed to both, the server raising and lowering it,
// the store only reading it. Every raise must be matched by one lowering
// on every path the request may take, or each sync waits its whole hold.
type Inbound struct {
	n       atomic.Int64
	active  atomic.Int64  // the connections that wrote lately (SetActive)
	watched atomic.Bool   // a sync's leader waits for those on their way
	arrived chan struct{} // told (capacity 1) when one arrives while watched
	timer   *time.Timer   // the hold's bound; used by the one leader holding
	hold    time.Duration // the longest a sync waits for them
	// busy is how soon after the last sync ended one must start for the
	// connections that wrote lately to be waited for (holdLocked).
	busy time.Duration
}

// busyHolds is Inbound.busy in holds: about 2 ms by DefaultHold. Under
// a steady load of a few workers, syncs follow each other closely; a
// server whose last sync ended longer ago is writing now and then, its
// writers are not about to send, and a hold there would cost more than
// it asks: with every P idle, the Go runtime's poller sleeps in whole
// milliseconds, so a short hold that runs out lasts a millisecond.
const busyHolds = 16

// DefaultHold bounds the wait of a sync for the requests on their way:
// about two fdatasyncs of a small record (logfile.go's
// BenchmarkSegmentAppend). A shorter hold runs out before most of the
// other connections' requests come; this one has a sync carry more of
// them, for less CPU a job at 4 workers (docs/benchmarks.md, "What bounds
// four durable workers", and "Figures that were in code comments").
const DefaultHold = 120 * time.Microsecond

// NewInbound returns a count of none, for a store whose syncs wait for
// them up to hold (0: DefaultHold; tests lengthen it to see the wait).
func NewInbound(hold time.Duration) *Inbound {
	t := time.NewTimer(time.Hour)
	t.Stop()
	if hold <= 0 {
		hold = DefaultHold
	}
	return &Inbound{arrived: make(chan struct{}, 1), timer: t, hold: hold, busy: busyHolds * hold}
}

// Add counts a request on its way.
func (in *Inbound) Add() { in.n.Add(1) }

// SetActive tells how many connections wrote lately: the units a sync
// may expect.
func (in *Inbound) SetActive(n int) { in.active.Store(int64(n)) }

// Done counts one that arrived: queued its unit, or ended without one.
// It wakes the leader holding, which looks again: simpler than waking it
// only once none is on its way and enough units are in, and no slower
// (docs/benchmarks.md, "Figures that were in code comments").
func (in *Inbound) Done() {
	in.n.Add(-1)
	if in.watched.Load() {
		select {
		case in.arrived <- struct{}{}:
		default:
		}
	}
}

// Pending returns how many are on their way.
func (in *Inbound) Pending() int64 { return in.n.Load() }

// Active returns SetActive's count.
func (in *Inbound) Active() int64 { return in.active.Load() }

// wait waits until one on its way arrives (Done), or for d at most;
// pending is the count its caller saw, and a change before the watch
// starts ends the wait at once (the caller looks again). One caller at a
// time (the leader of the one group written and not yet synced: flush).
func (in *Inbound) wait(d time.Duration, pending int64) {
	select {
	case <-in.arrived: // told after an earlier wait ended
	default:
	}
	in.watched.Store(true)
	if in.n.Load() != pending {
		in.watched.Store(false)
		return
	}
	in.timer.Reset(d)
	select {
	case <-in.arrived:
	case <-in.timer.C:
	}
	in.timer.Stop()
	in.watched.Store(false)
}
