package wait

import (
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fenecdb/fenec/server/engine"
	"github.com/fenecdb/fenec/server/store"
)

// groups counts the store's groups made durable by a sync (engine
// Options.OnCommit), and the changes of each.
type groups struct {
	mu      sync.Mutex
	changes []int
}

func (g *groups) onCommit(_ time.Duration, changes int, fsync bool) {
	if fsync {
		g.mu.Lock()
		g.changes = append(g.changes, changes)
		g.mu.Unlock()
	}
}

func (g *groups) since(n int) []int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([]int(nil), g.changes[n:]...)
}

func (g *groups) len() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.changes)
}

// TestWokenClaimJoinsThePutsGroup: under --sync always, a put that wakes
// a held claim and the claim's write go to the store in one group, made
// durable by one sync — the claim's answer does not wait for a second.
func TestWokenClaimJoinsThePutsGroup(t *testing.T) {
	var g groups
	f := newFixtureOn(t, engine.Options{File: t.TempDir() + "/j.db", Sync: store.SyncMode{Kind: store.SyncAlways}, OnCommit: g.onCommit})
	f.exec(jobs)
	for i := 1; i <= 5; i++ {
		h := f.hold(5*time.Second, claim, "w")
		f.settle(1)
		time.Sleep(20 * time.Millisecond) // past lookGap since its first look
		n := g.len()
		f.exec(`put jobs {run_at: now(), attempts: 0}`)
		o := h.answer(t, 2*time.Second)
		if o.err != nil {
			t.Fatalf("claim %d: %v", i, o.err)
		}
		f.settle(0)
		// OnCommit runs just after a group's waiters are let go.
		time.Sleep(20 * time.Millisecond)
		if got := g.since(n); len(got) != 1 || got[0] != 2 {
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
	time.Sleep(20 * time.Millisecond)
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
