package wait

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fenecdb/fenec/server/engine"
	"github.com/fenecdb/fenec/server/store"
)

// groups counts the store's groups made durable by a sync (the engine's
// Stored events), and the changes of each.
type groups struct {
	mu      sync.Mutex
	changes []int
}

func (g *groups) stored(w engine.Write) {
	if w.Stored.Fsync {
		g.mu.Lock()
		g.changes = append(g.changes, len(w.Stored.Changes))
		g.mu.Unlock()
	}
}

func (g *groups) since(n int) []int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([]int(nil), g.changes[n:]...)
}

// after waits until the groups synced since the first n hold changes
// changes in all (a Stored event is told just after a group's waiters are let go,
// so an answer may come before it), and returns them: split into more
// groups or not, they are all there.
func (g *groups) after(t *testing.T, n, changes int) []int {
	t.Helper()
	for end := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
		got, sum := g.since(n), 0
		for _, c := range got {
			sum += c
		}
		if sum >= changes {
			return got
		}
		if time.Now().After(end) {
			t.Fatalf("groups of %v changes synced in 10 s, want %d changes", got, changes)
		}
	}
}

func (g *groups) len() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.changes)
}

// groupedQueue returns a fixture on a file under --sync always, with the
// jobs collection, and the groups its store commits.
func groupedQueue(t *testing.T) (*fixture, *groups) {
	g := &groups{}
	f := newFixtureOn(t, engine.Options{File: t.TempDir() + "/q.db", Sync: store.SyncMode{Kind: store.SyncAlways}})
	f.db.Subscribe(g.stored, engine.Stored)
	f.exec(jobs)
	return f, g
}

// TestWokenClaimJoinsThePutsGroup: under --sync always, a put that wakes
// a held claim and the claim's write go to the store in one group, made
// durable by one sync — the claim's answer does not wait for a second.
func TestWokenClaimJoinsThePutsGroup(t *testing.T) {
	f, g := groupedQueue(t)
	for i := 1; i <= 5; i++ {
		h := f.hold(5*time.Second, claim, "w")
		f.settle(1)
		f.looked() // the arrival's round is done: the put's round runs the claim
		n := g.len()
		f.exec(`put jobs {run_at: now(), attempts: 0}`)
		o := h.answer(t, 5*time.Second)
		if o.err != nil {
			t.Fatalf("claim %d: %v", i, o.err)
		}
		f.settle(0)
		if got := g.after(t, n, 2); len(got) != 1 || got[0] != 2 {
			t.Fatalf("put %d and the claim it woke were made durable in groups of %v changes, want one group of 2", i, got)
		}
	}
}

// TestStoreFailsUnderPutAndWokenClaim: when the store fails to write the
// group holding a put and the claim it woke, both are answered
// unavailable and both are undone.
func TestStoreFailsUnderPutAndWokenClaim(t *testing.T) {
	var fail atomic.Bool
	fault := func(at string) error {
		if at == store.FaultCommit && fail.Load() {
			return errors.New("injected: database or disk is full")
		}
		return nil
	}
	f := newFixtureOn(t, engine.Options{File: t.TempDir() + "/f.db", Sync: store.SyncMode{Kind: store.SyncAlways}, StoreFault: fault})
	f.exec(jobs)
	h := f.hold(5*time.Second, claim, "w")
	f.settle(1)
	f.looked() // the arrival's round is done: the put's round runs the claim
	seq := f.db.Seq()
	fail.Store(true)
	_, err := f.db.Exec(t.Context(), `put jobs {run_at: now(), attempts: 0}`, nil)
	if !errors.Is(err, engine.ErrUnavailable) {
		t.Fatalf("the put: %v, want unavailable", err)
	}
	if o := h.answer(t, 2*time.Second); !errors.Is(o.err, engine.ErrUnavailable) {
		t.Fatalf("the claim: %+v, want unavailable", o)
	}
	if got := f.db.Seq(); got != seq {
		t.Errorf("seq %d after the failure, want %d: a unit was not undone", got, seq)
	}
	fail.Store(false)
	for end := time.Now().Add(10 * time.Second); f.db.StoreErr() != nil; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatal("the store did not work again")
		}
	}
	if got := string(f.exec(`get jobs count`).AppendJSON(nil)); got != `[{"count":0}]` {
		t.Fatalf("after the failure the jobs are %s, want none", got)
	}
	// Both undone, the queue works again: a put wakes a held claim.
	h = f.hold(5*time.Second, claim, "w2")
	f.settle(1)
	f.exec(`put jobs {run_at: now(), attempts: 0}`)
	if o := h.answer(t, 2*time.Second); o.err != nil || o.answer != `[{"id":1}]` {
		t.Fatalf("after recovery: %+v", o)
	}
}

// TestManyPutsManyHeld: producers put jobs while workers hold claims, take
// a job each and come back for the next: every job is taken exactly once,
// by a claim answered with it, and none is left behind — whether a put's
// round runs on its own goroutine or falls to the loop (a round already
// under way), and whether or not the claim joins its group.
func TestManyPutsManyHeld(t *testing.T) {
	t.Parallel()
	eachStore(t, testManyPutsManyHeld)
}

func testManyPutsManyHeld(t *testing.T, f *fixture) {
	const producers, perProducer, workers = 4, 50, 6
	f.exec(jobs)
	var mu sync.Mutex
	taken := map[string]int{}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				o := f.hold(200*time.Millisecond, claim, fmt.Sprintf("w%d", w)).answer(t, 5*time.Second)
				if o.err != nil {
					t.Errorf("worker %d: %v", w, o.err)
					return
				}
				if o.answer != "[]" {
					mu.Lock()
					taken[o.answer]++
					mu.Unlock()
				}
			}
		}()
	}
	var pw sync.WaitGroup
	for range producers {
		pw.Add(1)
		go func() {
			defer pw.Done()
			for range perProducer {
				f.db.Exec(t.Context(), `put jobs {run_at: now(), attempts: 0}`, nil)
				time.Sleep(time.Duration(rand.N(500)) * time.Microsecond)
			}
		}()
	}
	pw.Wait()
	want := producers * perProducer
	for end := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		mu.Lock()
		n := len(taken)
		mu.Unlock()
		if n == want || time.Now().After(end) {
			break
		}
	}
	close(stop)
	wg.Wait()
	if len(taken) != want {
		t.Errorf("%d of %d jobs taken", len(taken), want)
	}
	for a, n := range taken {
		if n != 1 {
			t.Errorf("%s taken %d times", a, n)
		}
	}
	if got := string(f.exec(`get jobs where attempts = 1 count`).AppendJSON(nil)); got != fmt.Sprintf(`[{"count":%d}]`, want) {
		t.Errorf("jobs claimed once: %s, want %d", got, want)
	}
}

// TestPutJustAfterArrivalJoins: a put sent the moment a claim's arrival
// look has found nothing — well within lookGap of it — is looked at by its
// own round at once, and the claim's write joins its group: the arrival's
// look does not put the next write's off.
func TestPutJustAfterArrivalJoins(t *testing.T) {
	f, g := groupedQueue(t)
	for i := 1; i <= 5; i++ {
		h := f.hold(5*time.Second, claim, "w")
		f.settle(1)
		// Until the arrival's look is done.
		for end := time.Now().Add(5 * time.Second); ; runtime.Gosched() {
			f.hub.mu.Lock()
			looked := true
			for _, l := range f.hub.lines {
				looked = looked && !l.entered && l.running == nil
			}
			f.hub.mu.Unlock()
			if looked {
				break
			}
			if time.Now().After(end) {
				t.Fatal("the arrival's look did not happen")
			}
		}
		n := g.len()
		f.exec(`put jobs {run_at: now(), attempts: 0}`)
		if o := h.answer(t, 2*time.Second); o.err != nil {
			t.Fatalf("claim %d: %v", i, o.err)
		}
		f.settle(0)
		if got := g.after(t, n, 2); len(got) != 1 || got[0] != 2 {
			t.Fatalf("put %d, sent just after the claim's arrival, and the claim were made durable in groups of %v changes, want one group of 2", i, got)
		}
	}
}
