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

// Clock answers the time as UTC epoch milliseconds.
type Clock interface {
	NowMS() int64
}

// System is the wall clock.
type System struct{}

func (System) NowMS() int64 { return time.Now().UnixMilli() }

// Manual is a clock that moves only when told. Watchers are told after
// every move, so held claims due at the new time can run.
type Manual struct {
	mu       sync.Mutex
	ms       int64
	watchers []func(int64)
}

// NewManual answers a manual clock at ManualStart.
func NewManual() *Manual { return &Manual{ms: ManualStart} }

func (m *Manual) NowMS() int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.ms
}

// Advance moves the clock d milliseconds on (d ≥ 0) and answers the new time.
func (m *Manual) Advance(d int64) int64 {
	m.mu.Lock()
	m.ms += d
	now, ws := m.ms, m.watchers
	m.mu.Unlock()
	for _, w := range ws {
		w(now)
	}
	return now
}

// Set moves the clock to t and answers it.
func (m *Manual) Set(t int64) int64 {
	m.mu.Lock()
	m.ms = t
	ws := m.watchers
	m.mu.Unlock()
	for _, w := range ws {
		w(t)
	}
	return t
}

// Watch registers f to be called with the new time after every move.
func (m *Manual) Watch(f func(int64)) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.watchers = append(m.watchers, f)
}
