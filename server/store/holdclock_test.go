package store

import (
	"testing"
	"time"
)

// TestTimerClock checks the runtime timer's clock, the hold's where no
// timerfd is (holdclock.go), as TestHoldClockTimerfd the timerfd's.
func TestTimerClock(t *testing.T) { checkClock(t, newTimerClock()) }

// checkClock checks how a clock ends a wait: at its bound (answering
// true), or at a wake before it (false); a wake from before forget, or
// an expiration of a bound armed again, ends none.
func checkClock(t *testing.T, c holdClock) {
	t.Helper()
	for range 3 {
		c.forget()
		start := time.Now()
		c.arm(60 * time.Microsecond)
		if !c.wait() {
			t.Fatal("a wait with no wake ended before its bound")
		}
		t.Logf("a bound of 60µs ended the wait after %v", time.Since(start))
	}

	c.forget()
	c.arm(time.Hour)
	go func() {
		time.Sleep(10 * time.Millisecond)
		c.wake()
	}()
	if c.wait() {
		t.Fatal("a wait woken before its bound of an hour answered the bound")
	}
	c.disarm()

	c.arm(time.Microsecond)
	time.Sleep(time.Millisecond)
	c.wake()
	c.forget()
	c.arm(20 * time.Millisecond)
	start := time.Now()
	if !c.wait() {
		t.Fatal("a wake from before forget ended the wait")
	}
	if d := time.Since(start); d < 20*time.Millisecond {
		t.Fatalf("the wait ended after %v, before its bound of 20ms: an earlier expiration ended it", d)
	}
}
