package clock

import (
	"math"
	"sync/atomic"
	"testing"
	"time"
)

// TestManualAtMS: a manual clock calls back once a move reaches the time
// asked for, not before, and not after stop; a time already reached is
// called back at once, though not from within AtMS.
func TestManualAtMS(t *testing.T) {
	m := NewManual()
	called := make(chan string, 4)
	m.AtMS(ManualStart+100, func() { called <- "at 100" })
	stop := m.AtMS(ManualStart+50, func() { called <- "stopped" })
	stop()
	m.Advance(99)
	select {
	case c := <-called:
		t.Fatalf("%s called at +99", c)
	default:
	}
	m.Advance(1)
	if c := <-called; c != "at 100" {
		t.Fatalf("called %s", c)
	}
	m.Set(ManualStart + 1000)
	m.AtMS(ManualStart, func() { called <- "past" })
	select {
	case c := <-called:
		if c != "past" {
			t.Fatalf("called %s", c)
		}
	case <-time.After(2 * time.Second):
		t.Fatal("a time already reached was not called back")
	}
	select {
	case c := <-called:
		t.Fatalf("%s called twice, or after stop", c)
	case <-time.After(20 * time.Millisecond):
	}
}

// TestSystemAtMS: the system clock calls back at the time asked for, not
// before.
func TestSystemAtMS(t *testing.T) {
	var s System
	at := s.NowMS() + 30
	got := make(chan int64, 1)
	s.AtMS(at, func() { got <- s.NowMS() })
	select {
	case now := <-got:
		if now < at {
			t.Fatalf("called at %d, before %d", now, at)
		}
	case <-time.After(2 * time.Second):
		t.Fatal("never called")
	}
}

// Times far from now — the last FenecQL timestamp, or one whose distance
// from now overflows a Duration — neither fire at once nor wrap around.
func TestSystemAtMSFarAway(t *testing.T) {
	var s System
	var fired atomic.Int32
	for _, at := range []int64{253402300799999, math.MaxInt64} {
		stop := s.AtMS(at, func() { fired.Add(1) })
		defer stop()
	}
	past := make(chan struct{})
	s.AtMS(math.MinInt64, func() { close(past) })
	select {
	case <-past:
	case <-time.After(2 * time.Second):
		t.Fatal("a time long past was never called")
	}
	// A far-future call fired by mistake would fire within these 50 ms
	// (there is no event to wait for when nothing should happen).
	time.Sleep(50 * time.Millisecond)
	if n := fired.Load(); n != 0 {
		t.Fatalf("far-future calls fired %d times", n)
	}
}
