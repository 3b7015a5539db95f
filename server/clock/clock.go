// Package clock is the engine's source of time: the system clock in
// production, a manual clock that tests and `fenec serve --clock manual`
// move by hand.
package clock

import (
	"sync"
	"time"
)

// ManualStart is where a manual clock starts: 2026-05-03T09:20:00.000Z.
const ManualStart int64 = 1777800000000

// Clock returns the time as UTC epoch milliseconds, and calls back when it
// reaches a given time: whoever waits on the time (held claims whose rows
// come due) asks the clock rather than knowing which clock it is.
type Clock interface {
	NowMS() int64
	// AtMS calls f once when the clock reads at or later, never from
	// within AtMS itself (its caller may hold locks f takes). stop
	// cancels a call that has not begun.
	AtMS(at int64, f func()) (stop func())
}

// System is the wall clock.
type System struct{}

func (System) NowMS() int64 { return time.Now().UnixMilli() }

func (System) AtMS(at int64, f func()) (stop func()) {
	t := time.AfterFunc(time.Until(time.UnixMilli(at)), f)
	return func() { t.Stop() }
}

// Manual is a clock that moves only when told. The calls asked for with
// AtMS run, after a move, once it reaches their time.
type Manual struct {
	mu     sync.Mutex
	ms     int64
	alarms map[*alarm]bool
}

type alarm struct {
	at int64
	f  func()
}

// NewManual returns a manual clock at ManualStart.
func NewManual() *Manual { return &Manual{ms: ManualStart, alarms: map[*alarm]bool{}} }

func (m *Manual) NowMS() int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.ms
}

// AtMS calls f when a move brings the clock to at or later; at once, in
// its own goroutine, when it is there already.
func (m *Manual) AtMS(at int64, f func()) (stop func()) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if at <= m.ms {
		go f()
		return func() {}
	}
	a := &alarm{at: at, f: f}
	m.alarms[a] = true
	return func() {
		m.mu.Lock()
		defer m.mu.Unlock()
		delete(m.alarms, a)
	}
}

// Advance moves the clock d milliseconds on (d ≥ 0) and returns the new time.
func (m *Manual) Advance(d int64) int64 {
	m.mu.Lock()
	return m.moved(m.ms + d)
}

// Set moves the clock to t and returns it.
func (m *Manual) Set(t int64) int64 {
	m.mu.Lock()
	return m.moved(t)
}

// moved sets the time, m.mu held, and calls the alarms it reaches once
// the lock is released: they may read the clock.
func (m *Manual) moved(t int64) int64 {
	m.ms = t
	var due []func()
	for a := range m.alarms {
		if a.at <= t {
			due = append(due, a.f)
			delete(m.alarms, a)
		}
	}
	m.mu.Unlock()
	for _, f := range due {
		f()
	}
	return t
}
