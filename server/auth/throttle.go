package auth

import (
	"sync"
	"time"
)

// The slow-down of an address whose tokens keep being refused: the first
// refusal makes its next request wait FirstDelay, each further one twice
// as long, up to MaxDelay.
const (
	FirstDelay = 100 * time.Millisecond
	MaxDelay   = 5 * time.Second
)

// forget is how long an address may go without a refusal before its
// penalty is dropped, so the table does not grow with every address seen.
const forget = time.Minute

// Throttle slows down guessing: after a 401, the address's requests are
// let through one at a time, each a delay after the one before, the delay
// doubling with each further 401. A good token clears the address.
// Requests sent side by side are spaced out too, since each takes the
// next free moment rather than all waiting for the same one.
type Throttle struct {
	now func() time.Time

	mu    sync.Mutex
	addrs map[string]*penalty
	swept time.Time
}

type penalty struct {
	delay time.Duration // the wait a further refusal adds
	next  time.Time     // the next moment a request may be checked
	last  time.Time     // the last refusal
}

// NewThrottle answers a throttle reading the time from now (time.Now in
// the server; a fake clock in tests).
func NewThrottle(now func() time.Time) *Throttle {
	return &Throttle{now: now, addrs: map[string]*penalty{}}
}

// Wait answers how long a request from addr must wait before its token
// is checked, reserving that moment for it: 0 for an address in good
// standing.
func (t *Throttle) Wait(addr string) time.Duration {
	t.mu.Lock()
	defer t.mu.Unlock()
	p := t.addrs[addr]
	if p == nil {
		return 0
	}
	now := t.now()
	at := p.next
	if at.Before(now) {
		at = now
	}
	p.next = at.Add(p.delay)
	return at.Sub(now)
}

// Fail records a refused token from addr: its next request waits the
// current delay, and the delay doubles.
func (t *Throttle) Fail(addr string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	now := t.now()
	t.sweep(now)
	p := t.addrs[addr]
	if p == nil {
		p = &penalty{delay: FirstDelay}
		t.addrs[addr] = p
	} else {
		p.delay = min(2*p.delay, MaxDelay)
	}
	p.last = now
	if next := now.Add(p.delay); next.After(p.next) {
		p.next = next
	}
}

// OK records a good token from addr, which clears its penalty.
func (t *Throttle) OK(addr string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.addrs, addr)
}

// sweep drops penalties idle for a while, at most once a minute.
func (t *Throttle) sweep(now time.Time) {
	if now.Sub(t.swept) < forget {
		return
	}
	t.swept = now
	for a, p := range t.addrs {
		if now.Sub(p.last) > forget && now.After(p.next) {
			delete(t.addrs, a)
		}
	}
}
