package store

import "time"

// holdClock ends the hold of a sync (holdLocked) at whichever comes
// first: its bound, armed once a hold, or a wake (a request arrived,
// Inbound.Done). One hold at a time uses it (Inbound.wait's caller); wake
// may come from any goroutine.
type holdClock interface {
	// arm starts the bound, d from now, forgetting any earlier one.
	arm(d time.Duration)
	// forget drops a wake from before: only those after it end a wait.
	forget()
	// wait waits for the bound or a wake, answering true at the bound.
	// The caller arms first, and waits no more once it answered true.
	wait() bool
	wake()
	// disarm stops a bound that has not come (the hold ended before it).
	disarm()
}

// timerClock is a holdClock on a runtime timer: where the platform has
// no timerfd (holdclock_other.go), or it could not be made. A runtime
// timer under a millisecond, with every P idle, ends only when the
// poller's sleep does, a whole millisecond (docs/architecture.md, "Group
// commit").
type timerClock struct {
	timer   *time.Timer
	arrived chan struct{} // capacity 1
}

func newTimerClock() *timerClock {
	t := time.NewTimer(time.Hour)
	t.Stop()
	return &timerClock{timer: t, arrived: make(chan struct{}, 1)}
}

func (c *timerClock) arm(d time.Duration) { c.timer.Reset(d) }

func (c *timerClock) forget() {
	select {
	case <-c.arrived:
	default:
	}
}

func (c *timerClock) wait() bool {
	select {
	case <-c.arrived:
		return false
	case <-c.timer.C:
		return true
	}
}

func (c *timerClock) wake() {
	select {
	case c.arrived <- struct{}{}:
	default:
	}
}

func (c *timerClock) disarm() { c.timer.Stop() }
