//go:build !linux

package store

// newHoldClock answers a runtime timer's clock: only Linux has a timerfd
// (holdclock_linux.go).
func newHoldClock() holdClock { return newTimerClock() }
