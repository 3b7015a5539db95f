// Package wait holds claims sent with Fenec-Wait at the server until they
// take a row. Held claims that would take the same rows wait in a line,
// first come first served; on a write to a collection, or when the time
// comes that a delayed job is due or a lease lapses, the head of every
// line on it looks — all under one read lock — and the claim that ranks a
// row first (by its own order, then by who waited longest) runs.
package wait

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fenecdb/fenec/server/clock"
	"github.com/fenecdb/fenec/server/engine"
)

// MaxWait is the longest a claim is held.
const MaxWait = 30 * time.Second

// lookGap is how soon a line that looked and found nothing looks again on
// a write: writes that come faster share one look.
const lookGap = time.Millisecond

// Run runs a held request under the write lock. With onlyIfTakes it takes
// rows or undoes itself and answers engine.ErrNothingTaken.
type Run func(onlyIfTakes bool) ([]*engine.Result, error)

// Request is a claim to hold.
type Request struct {
	Parsed []engine.Parsed
	Scope  string // who asks, as far as access rules narrow the rows
	Wait   time.Duration
	Run    Run
}

// Hub keeps the held claims of one database.
type Hub struct {
	db      *engine.DB
	clk     clock.Clock
	metrics *Metrics

	mu      sync.Mutex
	lines   map[string]*line
	byColl  map[string]map[*line]bool
	arrived uint64
	held    int
	closed  bool
	closing chan struct{}

	dirty map[string]bool // collections written since the last round
	kick  chan struct{}
	timer *time.Timer
	done  chan struct{}

	rounds atomic.Int64 // rounds the loop has run: a loop that spins shows here
}

// line is the held claims that would take the same rows, oldest first.
type line struct {
	key     string
	colls   []string
	waiters []*waiter
	lastNil time.Time // the last look that found nothing
	due     int64     // clock ms when time alone can give it rows, 0: never
	running *waiter   // the claim given the turn, until it reports back
}

type waiter struct {
	req  *Request
	seq  uint64
	turn chan struct{}
	line *line
	at   time.Time
}

// New answers a hub over db; clk is db's clock. A manual clock's moves
// wake the claims due by them.
func New(db *engine.DB, clk clock.Clock, m *Metrics) *Hub {
	h := &Hub{
		db: db, clk: clk, metrics: m,
		lines: map[string]*line{}, byColl: map[string]map[*line]bool{},
		closing: make(chan struct{}), dirty: map[string]bool{},
		kick: make(chan struct{}, 1), done: make(chan struct{}),
	}
	h.timer = time.NewTimer(time.Hour)
	h.timer.Stop()
	if mc, ok := clk.(*clock.Manual); ok {
		mc.Watch(func(int64) { h.timeMoved() })
	}
	go h.loop()
	return h
}

// Written is the engine's OnWrite: held claims on these collections look.
func (h *Hub) Written(colls []string) {
	h.mu.Lock()
	if h.held == 0 {
		h.mu.Unlock()
		return
	}
	any := false
	for _, c := range colls {
		if len(h.byColl[c]) > 0 {
			h.dirty[c] = true
			any = true
		}
	}
	h.mu.Unlock()
	if any {
		h.metrics.wake("write")
		h.poke()
	}
}

func (h *Hub) timeMoved() {
	h.mu.Lock()
	now := h.clk.NowMS()
	any := false
	for _, l := range h.lines {
		if l.due != 0 && l.due <= now {
			h.lookAgain(l.colls)
			any = true
		}
	}
	h.mu.Unlock()
	if any {
		h.metrics.wake("time")
	}
}

func (h *Hub) poke() {
	select {
	case h.kick <- struct{}{}:
	default:
	}
}

// Hold runs a claim, holding it while it would take nothing, for up to
// its wait. It answers what the claim answered when it took a row, or at
// the end of the wait (or the hub's close) what it answers on an empty
// queue. A cancelled ctx drops the claim at once: it takes nothing.
func (h *Hub) Hold(ctx context.Context, req *Request) ([]*engine.Result, error) {
	key, colls := lineKey(req.Parsed, req.Scope)
	// A claim goes straight to the back of the queue while any held claim
	// waits on its collections: a row goes to the claim that has waited
	// longest, or bids best, never to the newest.
	if !h.waiting(colls) {
		rs, err := req.Run(true)
		if !errors.Is(err, engine.ErrNothingTaken) {
			return rs, err
		}
	}
	if req.Wait <= 0 {
		return req.Run(false)
	}
	w, ok := h.enter(req, key, colls)
	if !ok {
		return req.Run(false)
	}
	start := time.Now()
	defer func() { h.metrics.heldFor(time.Since(start)) }()
	deadline := time.NewTimer(req.Wait)
	defer deadline.Stop()
	for {
		select {
		case <-ctx.Done():
			h.leave(w)
			return nil, ctx.Err()
		case <-deadline.C:
			h.leave(w)
			return req.Run(false)
		case <-h.closing:
			h.leave(w)
			return req.Run(false)
		case <-w.turn:
			if ctx.Err() != nil {
				h.leave(w)
				return nil, ctx.Err()
			}
			rs, err := req.Run(true)
			if errors.Is(err, engine.ErrNothingTaken) {
				h.turnDone(w)
				continue
			}
			h.leave(w)
			return rs, err
		}
	}
}

// enter puts a claim at the back of its line, and has the line look at
// once: a row may have come between the claim's own try and now.
func (h *Hub) enter(req *Request, key string, colls []string) (*waiter, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return nil, false
	}
	l := h.lines[key]
	if l == nil {
		l = &line{key: key, colls: colls}
		h.lines[key] = l
		for _, c := range colls {
			if h.byColl[c] == nil {
				h.byColl[c] = map[*line]bool{}
			}
			h.byColl[c][l] = true
		}
	}
	h.arrived++
	w := &waiter{req: req, seq: h.arrived, turn: make(chan struct{}, 1), line: l, at: time.Now()}
	l.waiters = append(l.waiters, w)
	l.lastNil = time.Time{}
	h.held++
	h.metrics.setHeld(h.held)
	h.lookAgain(colls)
	return w, true
}

// leave takes a claim out of its line. If it had the turn, the next in
// line looks, since more rows may be ready.
func (h *Hub) leave(w *waiter) {
	h.mu.Lock()
	defer h.mu.Unlock()
	l := w.line
	for i, x := range l.waiters {
		if x == w {
			l.waiters = append(l.waiters[:i], l.waiters[i+1:]...)
			h.held--
			h.metrics.setHeld(h.held)
			break
		}
	}
	if l.running == w {
		l.running = nil
		h.lookAgain(l.colls)
	}
	if len(l.waiters) == 0 {
		delete(h.lines, l.key)
		for _, c := range l.colls {
			delete(h.byColl[c], l)
			if len(h.byColl[c]) == 0 {
				delete(h.byColl, c)
			}
		}
	}
}

// turnDone reports a turn that took nothing after all (another write got
// there first): the claim keeps its place, and its line looks again.
func (h *Hub) turnDone(w *waiter) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if w.line.running == w {
		w.line.running = nil
	}
	h.lookAgain(w.line.colls)
}

// lookAgain has the lines on colls look in the next round; h.mu is held.
func (h *Hub) lookAgain(colls []string) {
	for _, c := range colls {
		h.dirty[c] = true
	}
	h.poke()
}

func (h *Hub) waiting(colls []string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, c := range colls {
		if len(h.byColl[c]) > 0 {
			return true
		}
	}
	return false
}

// Close answers every held claim at once with its empty answer, and holds
// no more.
func (h *Hub) Close() {
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		return
	}
	h.closed = true
	close(h.closing)
	h.mu.Unlock()
	<-h.done
}

// Held answers how many claims are held now.
func (h *Hub) Held() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.held
}
