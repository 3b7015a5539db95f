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

// Throttle slows down guessing by holding refusals: the answer to a
// refused token waits, FirstDelay for an address's first refusal and twice
// as long for each further one, up to MaxDelay. Refusals sent side by side
// are spaced out, each taking the next free moment rather than all waiting
// for the same one, so an address learns at most one refusal a delay per
// moment reserved. Only refusals wait: a good token is never held, even
// from an address that is guessing — behind a proxy every client shares
// one address, and PostgreSQL's auth_delay likewise delays the failing
// connection alone. Nor does a good token clear the address, which would
// let a guesser sharing it start again from FirstDelay; a penalty lapses
// only once the address has gone a while without a refusal.
type Throttle struct {
	now func() time.Time

	mu    sync.Mutex
	addrs map[string]*penalty
	swept time.Time
}

type penalty struct {
	delay time.Duration // the wait the address's last refusal was given
	next  time.Time     // the moment the latest refusal is answered
	last  time.Time     // the last refusal
}

// NewThrottle returns a throttle reading the time from now (time.Now in
// the server; a fake clock in tests).
func NewThrottle(now func() time.Time) *Throttle {
	return &Throttle{now: now, addrs: map[string]*penalty{}}
}

// Fail records a refused token from addr and returns how long its answer
// must wait.
func (t *Throttle) Fail(addr string) time.Duration {
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
	at := now
	if p.next.After(at) {
		at = p.next
	}
	p.next = at.Add(p.delay)
	return p.next.Sub(now)
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
