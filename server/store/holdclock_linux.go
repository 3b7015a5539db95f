package store

import (
	"errors"
	"os"
	"time"

	"golang.org/x/sys/unix"
)

// fdClock is a holdClock on a Linux timerfd read through the runtime's
// netpoller (os.File on a non-blocking descriptor), so the bound ends
// the poller's sleep at its time: with every P idle, the runtime sleeps
// in epoll_pwait for whole milliseconds, and a runtime timer of 60 µs
// there lasts about one (docs/architecture.md, "What bounds four durable
// workers"). A wake sets the file's read deadline in the past, which
// readies the waiting reader without a system call; the next forget
// clears it.
type fdClock struct {
	f   *os.File
	fd  int
	buf [8]byte // the expirations read: one hold's reader at a time
}

// newHoldClock answers an fdClock, or a timerClock where no timerfd can
// be made (a sandbox refusing it).
func newHoldClock() holdClock {
	fd, err := unix.TimerfdCreate(unix.CLOCK_MONOTONIC, unix.TFD_NONBLOCK|unix.TFD_CLOEXEC)
	if err != nil {
		return newTimerClock()
	}
	// Non-blocking, so os.File puts it in the netpoller; its cleanup
	// closes the descriptor once the Inbound is gone.
	return &fdClock{f: os.NewFile(uintptr(fd), "hold-timerfd"), fd: fd}
}

func (c *fdClock) set(d time.Duration) {
	// Setting it also drops any expiration not read (timerfd_settime
	// resets the count), so a bound from an earlier hold never ends this
	// one. It cannot fail on a valid timerfd and spec.
	spec := unix.ItimerSpec{Value: unix.NsecToTimespec(int64(d))}
	_ = unix.TimerfdSettime(c.fd, 0, &spec, nil)
}

func (c *fdClock) arm(d time.Duration) {
	if d <= 0 {
		d = 1 // a zero value would disarm it
	}
	c.set(d)
}

func (c *fdClock) forget() { _ = c.f.SetReadDeadline(time.Time{}) }

func (c *fdClock) wait() bool {
	_, err := c.f.Read(c.buf[:])
	// Any error but the deadline a wake set (none is expected) ends the
	// hold as its bound would: a hold is never longer for it.
	return !errors.Is(err, os.ErrDeadlineExceeded)
}

// pastDeadline is a read deadline long past: it readies the reader at
// once.
var pastDeadline = time.Unix(1, 0)

func (c *fdClock) wake() { _ = c.f.SetReadDeadline(pastDeadline) }

func (c *fdClock) disarm() { c.set(0) }
