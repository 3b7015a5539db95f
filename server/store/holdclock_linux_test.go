package store

import (
	"encoding/binary"
	"testing"
	"time"
)

// TestHoldClockTimerfd checks how a hold ends on Linux (holdclock_linux.go):
// its bound is a timerfd in the runtime's netpoller, so the poller's sleep
// ends at it, and a wait answers the bound only once the timerfd's
// expiration was read. No wall-clock bound is asserted (a loaded machine
// may run the woken reader late): the expiration read is what shows the
// timerfd ended the wait.
func TestHoldClockTimerfd(t *testing.T) {
	c, ok := newHoldClock().(*fdClock)
	if !ok {
		t.Fatalf("the hold's clock is a %T, want the timerfd's", newHoldClock())
	}
	// Only a file in the netpoller takes a deadline (os.ErrNoDeadline
	// otherwise): the reader parks there, and epoll_pwait wakes at the
	// bound.
	if err := c.f.SetReadDeadline(time.Time{}); err != nil {
		t.Fatalf("the timerfd is not in the netpoller: %v", err)
	}
	c.forget()
	c.arm(60 * time.Microsecond)
	if !c.wait() {
		t.Fatal("a wait with no wake ended before its bound")
	}
	if n := binary.NativeEndian.Uint64(c.buf[:]); n != 1 {
		t.Fatalf("the wait answered its bound with %d expirations read, want 1", n)
	}
	checkClock(t, c)
}
