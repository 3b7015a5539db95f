package wait

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/fenecdb/fenec/server/clock"
	"github.com/fenecdb/fenec/server/engine"
	"github.com/fenecdb/fenec/server/fenecql"
	"github.com/fenecdb/fenec/server/store"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

type fixture struct {
	t   *testing.T
	db  *engine.DB
	hub *Hub
	// joins: the database is a file under --sync always, where a put's
	// round runs the claim it wakes on the put's goroutine (Hub.written).
	joins bool
}

func newFixture(t *testing.T, clk clock.Clock) *fixture {
	t.Helper()
	return newFixtureOn(t, engine.Options{File: ":memory:", Clock: clk})
}

// newFixtureOn is newFixture over a database opened with opts.
func newFixtureOn(t *testing.T, opts engine.Options) *fixture {
	t.Helper()
	db, err := engine.Open(opts)
	if err != nil {
		t.Fatal(err)
	}
	hub := New(db, nil)
	t.Cleanup(func() { hub.Close(); db.Close() })
	return &fixture{t: t, db: db, hub: hub}
}

func (f *fixture) exec(q string, params ...any) *engine.Result {
	f.t.Helper()
	vs := make([]fenecql.Value, len(params))
	for i, p := range params {
		vs[i], _ = fenecql.FromGo(p)
	}
	r, err := f.db.Exec(context.Background(), q, vs)
	if err != nil {
		f.t.Fatalf("%s: %v", q, err)
	}
	return r
}

// held is one claim held in a goroutine; its answer arrives on done.
type held struct {
	done   chan outcome
	cancel context.CancelFunc
}

type outcome struct {
	answer string
	err    error
	at     time.Time
}

func (f *fixture) hold(wait time.Duration, q string, params ...any) *held {
	f.t.Helper()
	return f.holdGone(nil, wait, q, params...)
}

// holdGone is hold with the request's Gone.
func (f *fixture) holdGone(gone func() bool, wait time.Duration, q string, params ...any) *held {
	f.t.Helper()
	vs := make([]fenecql.Value, len(params))
	for i, p := range params {
		vs[i], _ = fenecql.FromGo(p)
	}
	ps, err := engine.Parse([]engine.Statement{{Query: q, Params: vs}})
	if err != nil {
		f.t.Fatal(err)
	}
	if err := engine.Holdable(ps); err != nil {
		f.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	h := &held{done: make(chan outcome, 1), cancel: cancel}
	req := &Request{Parsed: ps, Wait: wait, Gone: gone}
	go func() {
		rs, _, err := f.hub.Hold(ctx, req)
		o := outcome{err: err, at: time.Now()}
		if err == nil {
			o.answer = string(rs[0].AppendJSON(nil))
		}
		h.done <- o
	}()
	return h
}

// settle waits until n claims are held.
func (f *fixture) settle(n int) {
	f.t.Helper()
	for deadline := time.Now().Add(5 * time.Second); f.hub.Held() != n; {
		if time.Now().After(deadline) {
			f.t.Fatalf("held %d, want %d", f.hub.Held(), n)
		}
		time.Sleep(time.Millisecond)
	}
}

// looked waits until the loop's round for the claims' entry has looked
// (and found nothing) and is done: the next round is a write's.
func (f *fixture) looked() {
	f.t.Helper()
	for deadline := time.Now().Add(5 * time.Second); ; {
		f.hub.mu.Lock()
		entered := false
		for _, l := range f.hub.lines {
			entered = entered || l.entered
		}
		f.hub.mu.Unlock()
		if !entered {
			break
		}
		if time.Now().After(deadline) {
			f.t.Fatal("the lines never looked after their claims came")
		}
		time.Sleep(time.Millisecond)
	}
	// The round that looked holds rmu until it is done.
	f.hub.rmu.Lock()
	f.hub.rmu.Unlock()
}

func (h *held) answer(t *testing.T, within time.Duration) outcome {
	t.Helper()
	select {
	case o := <-h.done:
		return o
	case <-time.After(within):
		t.Errorf("no answer within %v", within)
	}
	return outcome{err: errors.New("no answer")}
}

// stillHeld gives a claim woken by mistake a moment to answer (there is
// no event to wait for when nothing should happen), then checks that
// each of hs is still held.
func stillHeld(t *testing.T, hs ...*held) {
	t.Helper()
	time.Sleep(20 * time.Millisecond)
	for _, h := range hs {
		h.still(t)
	}
}

// dueIn moves clk to 1 ms before h's rows come due, ms from now, checks
// that h is still held, then moves it the last 1 ms and returns h's
// answer.
func dueIn(t *testing.T, clk *clock.Manual, ms int64, h *held) outcome {
	t.Helper()
	clk.Advance(ms - 1)
	stillHeld(t, h)
	clk.Advance(1)
	return h.answer(t, time.Second)
}

func (h *held) still(t *testing.T) {
	t.Helper()
	select {
	case o := <-h.done:
		t.Fatalf("answered while it should be held: %+v", o)
	default:
	}
}

const jobs = `create collection jobs (payload json, run_at timestamp @sorted, owner text, attempts int)`
const claim = `set jobs {owner: $1, run_at: now() + 30000, attempts: attempts + 1} where run_at <= now() order run_at limit 1 returning id`

// eachStore runs a test over a database in memory, where a put's round
// runs on its goroutine and hands the turn to the claim, and over a file
// under --sync always, where the claim runs on the put's goroutine too and
// joins its group (Hub.written).
func eachStore(t *testing.T, test func(t *testing.T, f *fixture)) {
	t.Run("memory", func(t *testing.T) { test(t, newFixture(t, clock.System{})) })
	t.Run("always", func(t *testing.T) {
		f := newFixtureOn(t, engine.Options{File: t.TempDir() + "/w.db", Sync: store.SyncMode{Kind: store.SyncAlways}})
		f.joins = true
		test(t, f)
	})
}

func TestPutWakesHeldClaim(t *testing.T) { eachStore(t, testPutWakesHeldClaim) }

// testPutWakesHeldClaim: the put's own wake answers a held claim. Nothing
// else would before its wait ends — no line looks on a timer, and an empty
// collection has nothing coming due — so the answer's time is held against
// the wait's end, not against a latency bound that a slow sync or the race
// detector can exceed. Under --sync always the mechanism is checked too:
// the put's round ran the claim on the put's goroutine, in the put's group
// (its row taken before the put answered), and the hub's loop ran no round.
func testPutWakesHeldClaim(t *testing.T, f *fixture) {
	const wait = 5 * time.Second
	f.exec(jobs)
	start := time.Now()
	h := f.hold(wait, claim, "w1")
	f.settle(1)
	f.looked()
	rounds := f.hub.rounds.Load()
	put := time.Now()
	f.exec(`put jobs {run_at: now(), attempts: 0}`)
	if f.joins {
		if got := string(f.exec(`get jobs select owner`).AppendJSON(nil)); got != `[{"owner":"w1"}]` {
			t.Errorf("once the put answered, the job: %s; want it taken by the held claim, run in the put's group", got)
		}
		if n := f.hub.rounds.Load() - rounds; n != 0 {
			t.Errorf("the loop ran %d rounds for the put; want the put's own round", n)
		}
	}
	o := h.answer(t, wait+5*time.Second)
	if o.err != nil || o.answer != `[{"id":1}]` {
		t.Fatalf("%+v", o)
	}
	if o.at.Sub(start) >= wait {
		t.Errorf("answered %v after the hold began, at the end of its %v wait: the put did not wake it", o.at.Sub(start), wait)
	}
	t.Logf("answered %v after the put", o.at.Sub(put))
}

// TestDelayedJobNotBefore: a held claim takes a delayed job when it comes
// due, never before, and woken by the time: with no other write, only the
// end of the claim's wait would answer it otherwise, so its lateness is
// held against that, not against a bound a loaded machine can exceed.
func TestDelayedJobNotBefore(t *testing.T) {
	t.Parallel()
	const wait = 5 * time.Second
	f := newFixture(t, clock.System{})
	f.exec(jobs)
	f.exec(`put jobs {run_at: now() + 300, attempts: 0}`)
	due := time.Now().Add(300 * time.Millisecond)
	start := time.Now()
	h := f.hold(wait, claim, "w1")
	o := h.answer(t, wait+5*time.Second)
	if o.err != nil || o.answer != `[{"id":1}]` {
		t.Fatalf("%+v", o)
	}
	if o.at.Before(due.Add(-time.Millisecond)) {
		t.Errorf("taken %v before its time", due.Sub(o.at))
	}
	if o.at.Sub(start) >= wait {
		t.Errorf("taken %v late, at the end of the claim's %v wait: the time did not wake it", o.at.Sub(due), wait)
	}
	t.Logf("taken %v after its time", o.at.Sub(due))
}

func TestManualClockWakesExactlyTheDue(t *testing.T) {
	t.Parallel()
	clk := clock.NewManual()
	f := newFixture(t, clk)
	f.exec(`create collection a (run_at timestamp @sorted, owner text)`)
	f.exec(`create collection b (run_at timestamp @sorted, owner text)`)
	f.exec(`put a {run_at: now() + 1000}`)
	f.exec(`put b {run_at: now() + 5000}`)
	ha := f.hold(10*time.Second, `set a {owner: "x"} where run_at <= now() limit 1 returning id`)
	hb := f.hold(10*time.Second, `set b {owner: "x"} where run_at <= now() limit 1 returning id`)
	f.settle(2)
	if o := dueIn(t, clk, 1000, ha); o.answer != `[{"id":1}]` {
		t.Fatalf("a: %+v", o)
	}
	if o := dueIn(t, clk, 4000, hb); o.answer != `[{"id":1}]` {
		t.Fatalf("b: %+v", o)
	}
}

func TestLapsingLeaseWakes(t *testing.T) {
	t.Parallel()
	clk := clock.NewManual()
	f := newFixture(t, clk)
	f.exec(jobs)
	f.exec(`put jobs {run_at: now(), attempts: 0}`)
	f.exec(claim, "dies") // leased for 30 s, never acked
	h := f.hold(10*time.Second, claim, "w2")
	f.settle(1)
	if o := dueIn(t, clk, 30000, h); o.answer != `[{"id":1}]` {
		t.Fatalf("%+v", o)
	}
}

func TestFirstComeFirstServed(t *testing.T) { eachStore(t, testFirstComeFirstServed) }

func testFirstComeFirstServed(t *testing.T, f *fixture) {
	f.exec(jobs)
	var hs []*held
	for i := 0; i < 5; i++ {
		hs = append(hs, f.hold(5*time.Second, claim, fmt.Sprintf("w%d", i)))
		f.settle(i + 1)
	}
	f.exec(`put jobs [{run_at: now(), attempts: 0}, {run_at: now(), attempts: 0}, {run_at: now(), attempts: 0}, {run_at: now(), attempts: 0}, {run_at: now(), attempts: 0}]`)
	for i, h := range hs {
		if o := h.answer(t, time.Second); o.answer != fmt.Sprintf(`[{"id":%d}]`, i+1) {
			t.Errorf("claim %d got %+v", i, o)
		}
	}
	// One job, five held claims: one takes it, four stay held.
	hs = hs[:0]
	for i := 0; i < 5; i++ {
		hs = append(hs, f.hold(5*time.Second, claim, fmt.Sprintf("v%d", i)))
		f.settle(i + 1)
	}
	f.exec(`put jobs {run_at: now(), attempts: 0}`)
	if o := hs[0].answer(t, time.Second); o.answer != `[{"id":6}]` {
		t.Fatalf("the longest held got %+v", o)
	}
	stillHeld(t, hs[1:]...)
	if f.hub.Held() != 4 {
		t.Errorf("held %d", f.hub.Held())
	}
}

func TestNearestCourierTakesTheRide(t *testing.T) { eachStore(t, testNearestCourierTakesTheRide) }

func testNearestCourierTakesTheRide(t *testing.T, f *fixture) {
	f.exec(`create collection rides (pickup geo @geo, run_at timestamp @sorted, owner text)`)
	courier := `set rides {owner: $1, run_at: now() + 30000} where run_at <= now() order distance(pickup, $2) limit 1 returning id, owner`
	far := f.hold(5*time.Second, courier, "far", []any{29.10, 41.10})
	near := f.hold(5*time.Second, courier, "near", []any{29.03, 41.05})
	mid := f.hold(5*time.Second, courier, "mid", []any{29.05, 41.06})
	f.settle(3)
	f.exec(`put rides {pickup: [29.0290, 41.0490], run_at: now()}`)
	if o := near.answer(t, time.Second); o.answer != `[{"id":1,"owner":"near"}]` {
		t.Fatalf("near: %+v", o)
	}
	stillHeld(t, far, mid)
	// The next ride, nearer the far courier, is the far courier's.
	f.exec(`put rides {pickup: [29.09, 41.09], run_at: now()}`)
	if o := far.answer(t, time.Second); o.answer != `[{"id":2,"owner":"far"}]` {
		t.Fatalf("far: %+v", o)
	}
	mid.still(t)
}

func TestWaitEnds(t *testing.T) {
	t.Parallel()
	f := newFixture(t, clock.System{})
	f.exec(jobs)
	h := f.hold(100*time.Millisecond, `set jobs {owner: "w"} where run_at <= now() order run_at limit 10 returning id`)
	if o := h.answer(t, time.Second); o.err != nil || o.answer != `[]` {
		t.Fatalf("%+v", o)
	}
	h = f.hold(100*time.Millisecond, `set jobs {owner: "w"} where run_at <= now() order run_at limit 1 require 1`)
	o := h.answer(t, time.Second)
	if fenecql.CodeOf(o.err) != fenecql.CodeUnmet {
		t.Fatalf("require at the end of the wait: %+v", o)
	}
	h = f.hold(100*time.Millisecond, `del jobs where run_at <= now() limit 1`)
	if o := h.answer(t, time.Second); o.answer != `{"affected":0}` {
		t.Fatalf("%+v", o)
	}
}

func TestCancelledClaimTakesNothing(t *testing.T) { eachStore(t, testCancelledClaimTakesNothing) }

func testCancelledClaimTakesNothing(t *testing.T, f *fixture) {
	f.exec(jobs)
	h := f.hold(5*time.Second, claim, "gone")
	f.settle(1)
	h.cancel()
	if o := h.answer(t, time.Second); !errors.Is(o.err, context.Canceled) {
		t.Fatalf("%+v", o)
	}
	f.settle(0)
	f.exec(`put jobs {run_at: now(), attempts: 0}`)
	if got := string(f.exec(`get jobs select owner`).AppendJSON(nil)); got != `[{"owner":null}]` {
		t.Fatalf("the job: %s", got)
	}
	if got := string(f.exec(claim, "next").AppendJSON(nil)); got != `[{"id":1}]` {
		t.Fatalf("next claim: %s", got)
	}
}

func TestGoneClaimTakesNothing(t *testing.T) { eachStore(t, testGoneClaimTakesNothing) }

// testGoneClaimTakesNothing: a claim whose client is known to be gone
// (Request.Gone) while its context has not ended yet — the client's close
// arrived and the connection's watch has not run — takes nothing when a
// put gives it the turn: a worker that gave up its claim has already
// released what its owner held, and a job taken now would stay leased
// with nobody to run it.
func testGoneClaimTakesNothing(t *testing.T, f *fixture) {
	f.exec(jobs)
	var gone atomic.Bool
	h := f.holdGone(gone.Load, 5*time.Second, claim, "gone")
	f.settle(1)
	gone.Store(true)
	f.exec(`put jobs {run_at: now(), attempts: 0}`)
	if o := h.answer(t, time.Second); !errors.Is(o.err, context.Canceled) {
		t.Fatalf("the gone claim: %+v; want it dropped", o)
	}
	if got := string(f.exec(`get jobs select owner, attempts`).AppendJSON(nil)); got != `[{"owner":null,"attempts":0}]` {
		t.Fatalf("the job: %s; want it untaken", got)
	}
	if got := string(f.exec(claim, "next").AppendJSON(nil)); got != `[{"id":1}]` {
		t.Fatalf("next claim: %s", got)
	}
}

func TestCloseAnswersHeld(t *testing.T) {
	t.Parallel()
	f := newFixture(t, clock.System{})
	f.exec(jobs)
	// Answered by the close, not at the end of its 30 s wait: within 5 s
	// proves that on a machine as loaded as it gets.
	h := f.hold(30*time.Second, claim, "w")
	f.settle(1)
	start := time.Now()
	f.hub.Close()
	if o := h.answer(t, 5*time.Second); o.answer != `[]` {
		t.Fatalf("%+v after %v", o, time.Since(start))
	}
}

// TestManyHeldIdle holds 1 000 claims on an empty queue and measures what
// they cost: the CPU they burn while idle, and memory each. It measures
// the whole process, so it does not run in parallel with other tests (nor
// does TestFarDueDoesNotSpin).
func TestManyHeldIdle(t *testing.T) {
	f := newFixture(t, clock.System{})
	f.exec(jobs)
	runtime.GC()
	var before runtime.MemStats
	runtime.ReadMemStats(&before)
	var hs []*held
	for i := 0; i < 1000; i++ {
		hs = append(hs, f.hold(30*time.Second, claim, fmt.Sprintf("w%d", i)))
	}
	f.settle(1000)
	runtime.GC()
	var after runtime.MemStats
	runtime.ReadMemStats(&after)
	cpu := func() time.Duration {
		var ru syscall.Rusage
		syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
		return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	c0 := cpu()
	// 500 ms idle: the time the CPU is measured over (the behaviour under
	// test; there is no state to wait for).
	time.Sleep(500 * time.Millisecond)
	used := cpu() - c0
	t.Logf("1000 held claims: %v CPU over 500 ms idle; %d bytes of heap each", used, (int64(after.HeapAlloc)-int64(before.HeapAlloc))/1000)
	if used > 50*time.Millisecond {
		t.Errorf("1000 idle held claims burned %v of CPU in 500 ms", used)
	}
	// One put reaches exactly one of them.
	f.exec(`put jobs {run_at: now(), attempts: 0}`)
	f.settle(999)
	var mu sync.Mutex
	took := 0
	var wg sync.WaitGroup
	for _, h := range hs {
		h.cancel()
		wg.Add(1)
		go func(h *held) {
			defer wg.Done()
			if o := h.answer(t, 5*time.Second); o.err == nil {
				mu.Lock()
				took++
				mu.Unlock()
			}
		}(h)
	}
	wg.Wait()
	if took != 1 {
		t.Errorf("%d claims took the one job", took)
	}
	f.settle(0)
}

// TestFarDueDoesNotSpin: a job whose run_at is a "never" value past the
// year 2262 (beyond a time.Duration from now) leaves a held claim asleep,
// not looking again in a loop; the claim still takes a job put meanwhile
// and ends its wait on time.
func TestFarDueDoesNotSpin(t *testing.T) {
	for _, runAt := range []string{`"9999-12-31T23:59:59Z"`, `"2400-01-01T00:00:00Z"`} {
		reg := prometheus.NewRegistry()
		m := NewMetrics(reg)
		db, err := engine.Open(engine.Options{File: ":memory:"})
		if err != nil {
			t.Fatal(err)
		}
		hub := New(db, m)
		f := &fixture{t: t, db: db, hub: hub}
		f.exec(jobs)
		f.exec(`put jobs {run_at: ` + runAt + `, attempts: 0}`)
		var ru0, ru1 syscall.Rusage
		syscall.Getrusage(syscall.RUSAGE_SELF, &ru0)
		rounds0 := hub.rounds.Load()
		h := f.hold(800*time.Millisecond, claim, "w1")
		f.settle(1)
		// Held 400 ms with only the far job there: the time in which a
		// loop that spins would run thousands of rounds (the behaviour
		// under test; there is no state to wait for).
		time.Sleep(400 * time.Millisecond)
		f.exec(`put jobs {run_at: now(), attempts: 0}`)
		if o := h.answer(t, time.Second); o.err != nil || o.answer != `[{"id":2}]` {
			t.Fatalf("%s: %+v", runAt, o)
		}
		start := time.Now()
		h = f.hold(500*time.Millisecond, claim, "w1")
		if o := h.answer(t, 3*time.Second); o.err != nil || o.answer != `[]` || o.at.Sub(start) < 500*time.Millisecond {
			t.Fatalf("%s: the wait's end: %+v after %v", runAt, o, o.at.Sub(start))
		}
		syscall.Getrusage(syscall.RUSAGE_SELF, &ru1)
		looks, rounds := testutil.ToFloat64(m.looks), hub.rounds.Load()-rounds0
		cpu := time.Duration(syscall.TimevalToNsec(ru1.Utime) - syscall.TimevalToNsec(ru0.Utime) + syscall.TimevalToNsec(ru1.Stime) - syscall.TimevalToNsec(ru0.Stime))
		t.Logf("%s: %d rounds, %v looks, %v CPU over ~0.9 s held", runAt, rounds, looks, cpu)
		// A few rounds: each hold's start and end, the put, its run.
		if rounds > 20 || looks > 20 {
			t.Errorf("%s: %d rounds, %v looks while held ~0.9 s: the loop spins", runAt, rounds, looks)
		}
		hub.Close()
		db.Close()
	}
}

// TestPassedOverLineLooksWhenTheTurnEnds: two lines on one collection, a
// put of two jobs: the older claim gets the turn, and the other line —
// passed over while that claim ran — looks as soon as it leaves, not at
// the next write or at the end of its wait.
func TestPassedOverLineLooksWhenTheTurnEnds(t *testing.T) {
	t.Parallel()
	eachStore(t, testPassedOverLineLooksWhenTheTurnEnds)
}

func testPassedOverLineLooksWhenTheTurnEnds(t *testing.T, f *fixture) {
	f.exec(jobs)
	// Another filter: another line.
	other := `set jobs {owner: $1, run_at: now() + 30000} where run_at <= now() and attempts < 5 order run_at limit 1 returning id`
	for i := range 3 {
		a := f.hold(5*time.Second, claim, "a")
		f.settle(1)
		b := f.hold(5*time.Second, other, "b")
		f.settle(2)
		if n := len(f.hub.lines); n != 2 {
			t.Fatalf("%d lines, want 2", n)
		}
		f.exec(`put jobs [{run_at: now(), attempts: 0}, {run_at: now(), attempts: 0}]`)
		if o := a.answer(t, time.Second); o.err != nil || o.answer != fmt.Sprintf(`[{"id":%d}]`, 2*i+1) {
			t.Fatalf("round %d, the older claim: %+v", i, o)
		}
		if o := b.answer(t, time.Second); o.err != nil || o.answer != fmt.Sprintf(`[{"id":%d}]`, 2*i+2) {
			t.Fatalf("round %d, the claim passed over: %+v", i, o)
		}
		f.settle(0)
	}
}

// TestWakesCounted: every write to a collection a claim is held on counts
// a wake by a write — the two puts, and the two claims' own writes, made
// before they leave their line — and a job coming due one by the time.
// The clock is the manual one: on the system clock, whether a job due
// 50 ms after its put woke its claim by the put's write or by the time
// depended on the scheduler.
func TestWakesCounted(t *testing.T) {
	m := NewMetrics(prometheus.NewRegistry())
	clk := clock.NewManual()
	db, err := engine.Open(engine.Options{File: ":memory:", Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	hub := New(db, m)
	t.Cleanup(func() { hub.Close(); db.Close() })
	f := &fixture{t: t, db: db, hub: hub}
	f.exec(jobs)
	h := f.hold(5*time.Second, claim, "w")
	f.settle(1)
	f.exec(`put jobs {run_at: now(), attempts: 0}`)
	if o := h.answer(t, time.Second); o.err != nil || o.answer != `[{"id":1}]` {
		t.Fatalf("%+v", o)
	}
	h = f.hold(5*time.Second, claim, "w")
	f.settle(1)
	f.exec(`put jobs {run_at: now() + 50, attempts: 0}`)
	// The put wakes the claim (a write: the third), whose line looks, finds
	// the job not yet due, stays held and sets the clock's alarm for when
	// it is; only moving the clock then brings it due.
	wakes := func(why string) float64 { return testutil.ToFloat64(m.wakes.WithLabelValues(why)) }
	due := clk.NowMS() + 50
	alarmed := func() bool {
		hub.mu.Lock()
		defer hub.mu.Unlock()
		return hub.alarmAt == due
	}
	for deadline := time.Now().Add(5 * time.Second); wakes("write") < 3 || !alarmed(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("after the second put: %v wakes by a write, alarm set for its due: %v", wakes("write"), alarmed())
		}
	}
	h.still(t)
	if byTime := wakes("time"); byTime != 0 {
		t.Fatalf("%v wakes by the time before the clock moved", byTime)
	}
	clk.Advance(50)
	if o := h.answer(t, time.Second); o.err != nil || o.answer != `[{"id":2}]` {
		t.Fatalf("%+v", o)
	}
	write := testutil.ToFloat64(m.wakes.WithLabelValues("write"))
	byTime := testutil.ToFloat64(m.wakes.WithLabelValues("time"))
	if write != 4 || byTime != 1 {
		t.Fatalf("wakes by a write %v, by the time %v; want 4 and 1", write, byTime)
	}
}

// TestLoneLineTurnUnlooked: a put that a lone line's head can take gives
// it the turn without a look (fenec_held_looks_total stays as it was) and
// the claim takes the job, on a database in memory and under --sync
// always; a put it cannot take yet (a job due later) is tried by the
// head's own run, which takes nothing and leaves it held, and the loop's
// look that follows finds when the job comes due, so the claim takes it
// then, not before.
func TestLoneLineTurnUnlooked(t *testing.T) {
	t.Parallel()
	for name, opts := range map[string]func(t *testing.T) engine.Options{
		"memory": func(*testing.T) engine.Options { return engine.Options{File: ":memory:"} },
		"always": func(t *testing.T) engine.Options {
			return engine.Options{File: t.TempDir() + "/w.db", Sync: store.SyncMode{Kind: store.SyncAlways}}
		},
	} {
		t.Run(name, func(t *testing.T) {
			db, err := engine.Open(opts(t))
			if err != nil {
				t.Fatal(err)
			}
			m := NewMetrics(prometheus.NewRegistry())
			hub := New(db, m)
			t.Cleanup(func() { hub.Close(); db.Close() })
			f := &fixture{t: t, db: db, hub: hub}
			f.exec(jobs)
			// held holds a claim and waits until its arrival's look is done.
			held := func() *held {
				h := f.hold(5*time.Second, claim, "w")
				f.settle(1)
				for end := time.Now().Add(5 * time.Second); ; time.Sleep(time.Millisecond) {
					hub.mu.Lock()
					looked := true
					for _, l := range hub.lines {
						looked = looked && !l.entered && l.running == nil
					}
					hub.mu.Unlock()
					if looked {
						return h
					}
					if time.Now().After(end) {
						t.Fatal("the arrival's look did not happen")
					}
				}
			}

			h := held()
			looks := testutil.ToFloat64(m.looks)
			f.exec(`put jobs {run_at: now(), attempts: 0}`)
			if o := h.answer(t, 2*time.Second); o.err != nil || o.answer != `[{"id":1}]` {
				t.Fatalf("the claim woken by the put: %+v", o)
			}
			if got := testutil.ToFloat64(m.looks); got != looks {
				t.Errorf("looks %v → %v for a lone line's turn, want none", looks, got)
			}
			f.settle(0)

			h = held()
			looks = testutil.ToFloat64(m.looks)
			// now() is the server's clock in whole ms: the job is due 300 ms
			// after the put's ms began, which may be up to 1 ms before this.
			put := time.Now().Truncate(time.Millisecond)
			f.exec(`put jobs {run_at: now() + 300, attempts: 0}`)
			// A claim woken by mistake would answer within these 100 ms
			// (there is no event to wait for when nothing should happen).
			time.Sleep(100 * time.Millisecond)
			h.still(t)
			if hub.Held() != 1 {
				t.Fatalf("held %d after a put it cannot take yet, want 1", hub.Held())
			}
			o := h.answer(t, 3*time.Second)
			if o.err != nil || o.answer != `[{"id":2}]` {
				t.Fatalf("the claim, once the job came due: %+v", o)
			}
			if took := o.at.Sub(put); took < 300*time.Millisecond {
				t.Errorf("the job due 300 ms after its put was taken after %v", took)
			}
			if got := testutil.ToFloat64(m.looks); got <= looks {
				t.Errorf("looks %v → %v: the run that took nothing was not followed by a look", looks, got)
			}
		})
	}
}
