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
	"runtime"
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

// Request is a claim to hold.
type Request struct {
	Parsed []engine.Parsed
	Scope  string // who asks, as far as access rules narrow the rows
	Wait   time.Duration
	// Meta, when set, adds records committed with the write that answers
	// the claim (engine.RunOptions.Meta: an idempotency key).
	Meta func([]*engine.Result) map[string]engine.Meta
	// Timeout bounds each run of the claim's statements
	// (engine.RunOptions.Timeout); the waiting between runs is not theirs.
	Timeout time.Duration
	// Gone, when set, reports that the claim's client has gone away,
	// which may be known before ctx ends (h1.Conn's Gone): a claim whose
	// client is gone is dropped rather than run when its turn comes.
	Gone func() bool
}

// given reports whether w's client has given it up.
func (w *waiter) given() bool {
	return w.ctx.Err() != nil || (w.req.Gone != nil && w.req.Gone())
}

// Hub keeps the held claims of one database.
type Hub struct {
	db      *engine.DB
	clk     clock.Clock
	metrics *Metrics

	// rmu keeps rounds one at a time, whether the loop's or a writer's
	// (written): a row goes to the best bid only once every claim that
	// could beat it has looked. It is taken before mu.
	rmu sync.Mutex
	// Held by rmu, the slices a round fills, kept from round to round:
	// a round over a thousand lines would otherwise allocate four
	// thousand-long ones.
	roundLines []*line
	roundHeads []*waiter
	roundReqs  [][]engine.Parsed
	roundBids  []engine.Bid

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

	alarmAt     int64        // clock ms the clock is to call timeMoved at; 0: none
	stopAlarm   func()       // cancels that call
	unsubscribe func()       // from the database's writes
	rounds      atomic.Int64 // rounds the loop has run: a loop that spins shows here
}

// line is the held claims that would take the same rows, oldest first.
type line struct {
	key     string
	colls   []string
	waiters []*waiter
	lastNil time.Time // the last look that found nothing, past the first
	// entered: a claim came since the line last looked. That look finds
	// nothing more often than not (the claim's own try just did), and no
	// write asked for it: it does not put off the next write's look.
	entered bool
	due     int64   // clock ms when time alone can give it rows, 0: never
	running *waiter // the claim given the turn, until it reports back
}

type waiter struct {
	req  *Request
	ctx  context.Context // Hold's
	seq  uint64
	turn chan struct{}
	line *line
	at   time.Time
	// here: the line's turn went to a run on a writer's goroutine (runHere),
	// which answers on ran; under Hub.mu.
	here bool
	ran  chan ran
}

// ran is a claim's run on a writer's goroutine, its write not yet durable.
type ran struct {
	rs      []*engine.Result
	durable engine.Durable // the run's wait for the store (engine.RunOptions.Unwaited)
	err     error
	took    time.Duration
}

// answer waits until the run's write is durable, and returns what Hold
// returns for it.
func (r ran) answer() ([]*engine.Result, time.Duration, error) {
	if r.err != nil {
		return nil, r.took, r.err
	}
	start := time.Now()
	err := r.durable.Wait()
	took := r.took + time.Since(start)
	if err != nil {
		return nil, took, err
	}
	return r.rs, took, nil
}

// New returns a hub over db, told of its writes and woken by its clock
// when a held claim's rows come due by time alone. Close it when done.
func New(db *engine.DB, m *Metrics) *Hub {
	h := &Hub{
		db: db, clk: db.Clock(), metrics: m,
		lines: map[string]*line{}, byColl: map[string]map[*line]bool{},
		closing: make(chan struct{}), dirty: map[string]bool{},
		kick: make(chan struct{}, 1), done: make(chan struct{}),
	}
	h.timer = time.NewTimer(time.Hour)
	h.timer.Stop()
	h.unsubscribe = db.Subscribe(h.written)
	go h.loop()
	return h
}

// written is told of every committed write: held claims on these
// collections look. On the writer's own goroutine, when the engine allows
// it (a Local write), the round runs here rather than in the loop — one
// hand-off fewer between a put and the claim it wakes — and when the
// write Joins, the claim given the turn runs here too, so that its write
// goes into the put's group of the store and one sync makes both durable.
//
// A round that wakes a claim's goroutine (or hands it its run) then
// yields: that goroutine is next to run on this thread, and so goes at
// once, ahead of the rest of the write's request — its answer (under
// --sync always, its group's sync, which it then leads) goes out before
// the writer's, rather than once the writer's is written or another
// thread, woken for it, has taken it over (tens of µs each on a small
// VM). The writer goes on as soon as a thread is free.
func (h *Hub) written(wr engine.Write) {
	h.mu.Lock()
	if h.held == 0 {
		h.mu.Unlock()
		return
	}
	any := false
	for _, c := range wr.Colls {
		if len(h.byColl[c]) > 0 {
			h.dirty[c] = true
			any = true
		}
	}
	h.mu.Unlock()
	if !any {
		return
	}
	h.metrics.wokeBy(true)
	if !wr.Local {
		h.poke()
		return
	}
	if !h.rmu.TryLock() {
		// A round is under way: the loop's next one looks for this write
		// rather than the writer waiting for it.
		h.poke()
		return
	}
	next, w, woke := h.round(wr.Joins, true)
	h.rmu.Unlock()
	if !next.IsZero() {
		h.poke() // the loop's timer takes the look put off by lookGap
	}
	if w != nil {
		h.runHere(w)
	}
	if w != nil || woke {
		runtime.Gosched()
	}
}

// runHere runs a held claim given the turn on a writer's goroutine, and
// hands the run to the claim's Hold, which waits until its write is
// durable before it answers.
func (h *Hub) runHere(w *waiter) {
	start := time.Now()
	sent := false
	defer func() {
		if !sent { // the run panicked: the claim's Hold still gets an answer
			w.ran <- ran{err: errRunStopped, took: time.Since(start)}
		}
	}()
	var durable engine.Durable
	rs, err := h.db.Run(w.ctx, w.req.Parsed, engine.RunOptions{Meta: w.req.Meta, OnlyIfTakes: true, Timeout: w.req.Timeout, Unwaited: &durable})
	w.ran <- ran{rs: rs, durable: durable, err: err, took: time.Since(start)}
	sent = true
}

var errRunStopped = errors.New("the held claim's run stopped on the goroutine of the write that woke it")

// timeMoved is the clock's call at the earliest time a held claim's rows
// come due: the lines due by now look.
func (h *Hub) timeMoved() {
	h.mu.Lock()
	h.alarmAt = 0
	now := h.clk.NowMS()
	any := false
	for _, l := range h.lines {
		if l.due != 0 && l.due <= now {
			l.due = 0 // acted on: the line looks, and learns its next due
			h.lookAgain(l.colls)
			any = true
		}
	}
	h.poke() // a round, which sets the clock's next call, even if none was due
	h.mu.Unlock()
	if any {
		h.metrics.wokeBy(false)
	}
}

func (h *Hub) poke() {
	select {
	case h.kick <- struct{}{}:
	default:
	}
}

// Hold runs a claim on the database, holding it while it would take
// nothing, for up to its wait. It returns what the claim answered when it
// took a row, or at the end of the wait (or the hub's close) what it
// answers on an empty queue, and how long the run that answered took. A
// cancelled ctx drops the claim at once: it takes nothing, no run answers
// it, and took is 0.
func (h *Hub) Hold(ctx context.Context, req *Request) (rs []*engine.Result, took time.Duration, err error) {
	key, colls := lineKey(req.Parsed, req.Scope)
	// A claim goes straight to the back of the queue while any held claim
	// waits on its collections: a row goes to the claim that has waited
	// longest, or bids best, never to the newest.
	if !h.waiting(colls) {
		rs, took, err := h.try(ctx, req, true)
		if !errors.Is(err, engine.ErrNothingTaken) {
			return rs, took, err
		}
	}
	if req.Wait <= 0 {
		return h.try(ctx, req, false)
	}
	w, ok := h.enter(ctx, req, key, colls)
	if !ok {
		return h.try(ctx, req, false)
	}
	start := time.Now()
	defer func() { h.metrics.heldFor(time.Since(start)) }()
	deadline := time.NewTimer(req.Wait)
	defer deadline.Stop()
	for {
		select {
		case <-ctx.Done():
			if rs, took, err, ok := h.quit(w); ok {
				return rs, took, err
			}
			return nil, 0, ctx.Err()
		case <-deadline.C:
			if rs, took, err, ok := h.quit(w); ok {
				return rs, took, err
			}
			return h.try(ctx, req, false)
		case <-h.closing:
			if rs, took, err, ok := h.quit(w); ok {
				return rs, took, err
			}
			return h.try(ctx, req, false)
		case r := <-w.ran:
			if errors.Is(r.err, engine.ErrNothingTaken) {
				h.turnDone(w)
				continue
			}
			rs, took, err := r.answer()
			h.leave(w)
			return rs, took, err
		case <-w.turn:
			if w.given() {
				h.leave(w)
				return nil, 0, context.Canceled
			}
			rs, took, err := h.try(ctx, req, true)
			if errors.Is(err, engine.ErrNothingTaken) {
				h.turnDone(w)
				continue
			}
			h.leave(w)
			return rs, took, err
		}
	}
}

// try runs the claim once, all or nothing. With onlyIfTakes a run that
// would take no row is undone and returns engine.ErrNothingTaken.
func (h *Hub) try(ctx context.Context, req *Request, onlyIfTakes bool) ([]*engine.Result, time.Duration, error) {
	start := time.Now()
	rs, err := h.db.Run(ctx, req.Parsed, engine.RunOptions{Meta: req.Meta, OnlyIfTakes: onlyIfTakes, Timeout: req.Timeout})
	return rs, time.Since(start), err
}

// enter puts a claim at the back of its line, and has the line look at
// once: a row may have come between the claim's own try and now.
func (h *Hub) enter(ctx context.Context, req *Request, key string, colls []string) (*waiter, bool) {
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
	w := &waiter{req: req, ctx: ctx, seq: h.arrived, turn: make(chan struct{}, 1), ran: make(chan ran, 1), line: l, at: time.Now()}
	l.waiters = append(l.waiters, w)
	l.lastNil, l.entered = time.Time{}, true
	h.held++
	h.metrics.setHeld(h.held)
	h.lookAgain(colls)
	return w, true
}

// leave takes a claim out of its line. If it had the turn, the lines
// still held on its collections — the next in its own, and those a round
// passed over while it ran — look, since more rows may be ready; with none
// left the loop is not woken for nothing (the claim's answer is written
// after leave).
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
	ran := l.running == w
	if ran {
		l.running = nil
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
	if ran && h.waitingLocked(l.colls) {
		h.lookAgain(l.colls)
	}
}

// quit takes a claim out of its line when it stops waiting — unless a run
// on a writer's goroutine has its turn: then it waits for that run (short:
// no wait for the disk), and returns it (ok) if it took a row.
func (h *Hub) quit(w *waiter) (rs []*engine.Result, took time.Duration, err error, ok bool) {
	h.mu.Lock()
	here := w.here
	h.mu.Unlock()
	if here {
		r := <-w.ran
		if !errors.Is(r.err, engine.ErrNothingTaken) {
			rs, took, err = r.answer()
			h.leave(w)
			return rs, took, err, true
		}
	}
	h.leave(w)
	return nil, 0, nil, false
}

// turnDone reports a turn that took nothing after all (another write got
// there first): the claim keeps its place, and its line looks again.
func (h *Hub) turnDone(w *waiter) {
	h.mu.Lock()
	defer h.mu.Unlock()
	w.here = false
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
	return h.waitingLocked(colls)
}

// waitingLocked: any held claim waits on colls; h.mu is held.
func (h *Hub) waitingLocked(colls []string) bool {
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
	if h.stopAlarm != nil {
		h.stopAlarm()
	}
	h.mu.Unlock()
	h.unsubscribe()
	<-h.done
}

// Held returns how many claims are held now.
func (h *Hub) Held() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.held
}
