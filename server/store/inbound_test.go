package store

import (
	"errors"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"
)

// TestHold checks the wait before a sync (flush, holdLocked) under
// --sync always: a unit committed while another request is on its way
// waits for it, and its sync carries both; one waits no longer than the
// hold; with none on its way, and no other connection writing lately, a
// lone unit never waits; holds that gain nothing stop for a while; and a
// server writing only now and then does not hold for the connections
// that wrote lately.
func TestHold(t *testing.T) {
	const hold = 400 * time.Millisecond
	in := NewInbound(hold)
	_, _, _, s := load(t, filepath.Join(t.TempDir(), "h.db"), Options{Sync: SyncMode{Kind: SyncAlways}, Inbound: in}, defaultTuning)
	defer s.Close()
	seq := uint64(0)
	unit := func() []Change {
		seq++
		return []Change{{Op: OpPut, Coll: "c", ID: int64(seq), Body: []byte(`{}`)}}
	}
	timed := func(wait func() error) time.Duration {
		t.Helper()
		start := time.Now()
		if err := wait(); err != nil {
			t.Fatal(err)
		}
		return time.Since(start)
	}

	// Alone: no wait (the bound is far above a sync's time, even on a
	// loaded machine).
	for range 3 {
		if d := timed(s.Commit(seq+1, unit())); d >= hold/2 {
			t.Fatalf("a lone unit waited %v", d)
		}
	}

	// Another request on its way: the first unit's sync waits for its
	// unit, and one sync makes both durable.
	in.Add()
	syncs := s.Stats().Fsyncs
	first := s.Commit(seq+1, unit())
	done := make(chan time.Duration, 1)
	go func() { done <- timed(first) }()
	// The request on its way arrives a quarter of the hold later: the
	// time the first unit's sync waits for it (the behaviour under test).
	time.Sleep(hold / 4)
	second := s.Commit(seq+1, unit())
	in.Done()
	if d := timed(second); d >= hold/2 {
		t.Fatalf("the unit on its way waited %v after its commit", d)
	}
	if d := <-done; d < hold/8 || d >= hold {
		t.Fatalf("the unit held for one on its way waited %v, want from %v to the hold, %v", d, hold/8, hold)
	}
	if n := s.Stats().Fsyncs - syncs; n != 1 {
		t.Fatalf("%d syncs for the two units, want 1", n)
	}

	// One on its way that never comes: the wait ends at the hold.
	in.Add()
	if d := timed(s.Commit(seq+1, unit())); d < hold || d >= 3*hold {
		t.Fatalf("a unit held for a request that never came waited %v, want the hold, %v", d, hold)
	}
	in.Done()
	if d := timed(s.Commit(seq+1, unit())); d >= hold/2 {
		t.Fatalf("a lone unit waited %v once none was on its way", d)
	}

	// Two connections wrote lately, but the other writes no more: its
	// hold is the second in a row to gain nothing (the one above for a
	// request that never came was the first), so holdRest syncs then
	// start at once.
	in.SetActive(2)
	for i := range 1 + holdRest {
		d := timed(s.Commit(seq+1, unit()))
		if i < 1 && (d < hold || d >= 3*hold) {
			t.Fatalf("unit %d waited %v, want the hold, %v, for the other connection", i, d, hold)
		}
		if i >= 1 && d >= hold/2 {
			t.Fatalf("unit %d waited %v after two holds that gained nothing", i, d)
		}
	}
	in.SetActive(1)
	if d := timed(s.Commit(seq+1, unit())); d >= hold/2 {
		t.Fatalf("a lone unit of the one connection writing waited %v", d)
	}

	// Two connections wrote lately, but the server writes only now and
	// then (the last sync ended longer than busy ago): no hold, which on
	// an idle server would last a millisecond for a hold of 120 µs.
	in.busy = hold / 4
	in.SetActive(2)
	for i := range 3 {
		// A pause longer than busy: the server idle between writes (the
		// behaviour under test).
		time.Sleep(in.busy + 10*time.Millisecond)
		if d := timed(s.Commit(seq+1, unit())); d >= hold/2 {
			t.Fatalf("unit %d, after a pause longer than busy, waited %v for a connection that wrote lately", i, d)
		}
	}
}

// TestHoldBeforeWrite checks that a sync held for a request on its way
// (flush, holdLocked) writes its units as one log record: the leader
// holds its group while it is still queued, so the unit committed during
// the hold joins it, rather than the leader writing its own unit first
// and the late one after it (two records, two writes, for one sync).
// A subscriber (Subscribe) is told once per record, with its changes. It also checks
// that a sync under way carrying one unit, with many connections
// writing lately, has the next group wait for it rather than be written
// early (pipelineUnits): the one written after it takes every unit
// queued meanwhile.
func TestHoldBeforeWrite(t *testing.T) {
	const hold = 300 * time.Millisecond
	in := NewInbound(hold)
	var mu sync.Mutex
	var records []int // each record's changes, in order
	onCommit := func(e Event) {
		mu.Lock()
		records = append(records, len(e.Changes))
		mu.Unlock()
	}
	// taken returns the records told since it was last called, once
	// they hold n changes (or after 5 s): a commit is told after its
	// waiters are let go (Subscribe), so a Commit returned is not yet a
	// record told.
	taken := func(n int) []int {
		deadline := time.Now().Add(5 * time.Second)
		for {
			mu.Lock()
			sum := 0
			for _, r := range records {
				sum += r
			}
			if sum >= n || time.Now().After(deadline) {
				out := slices.Clone(records)
				records = records[:0]
				mu.Unlock()
				return out
			}
			mu.Unlock()
			time.Sleep(time.Millisecond)
		}
	}
	gate := &syncGate{}
	_, _, _, s := load(t, filepath.Join(t.TempDir(), "g.db"), Options{Sync: SyncMode{Kind: SyncAlways}, Inbound: in, Fault: gate.fault}, defaultTuning)
	s.Subscribe(onCommit)
	defer s.Close()
	seq := uint64(0)
	unit := func() []Change {
		seq++
		return []Change{{Op: OpPut, Coll: "c", ID: int64(seq), Body: []byte(`{}`)}}
	}
	if err := s.Commit(seq+1, unit())(); err != nil {
		t.Fatal(err)
	}
	taken(1)

	// One on its way: the first unit's leader holds; the second comes.
	in.Add()
	syncs := s.Stats().Fsyncs
	first := s.Commit(seq+1, unit())
	done := make(chan error, 1)
	go func() { done <- first() }()
	// The unit on its way comes a quarter of the hold later, during the
	// hold (the behaviour under test).
	time.Sleep(hold / 4)
	second := s.Commit(seq+1, unit())
	in.Done()
	if err := second(); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if n := s.Stats().Fsyncs - syncs; n != 1 {
		t.Fatalf("%d syncs for the two units, want 1", n)
	}
	if got := taken(2); !slices.Equal(got, []int{2}) {
		t.Fatalf("the held sync wrote records of %v changes, want one of 2", got)
	}

	// Many connections wrote lately (and none holds: busy 0, so the
	// siblings' rule never applies). A sync of one unit is under way,
	// kept there by the fault hook; the next unit's group waits for it
	// rather than be written early, and the unit after joins it.
	in.busy = 0
	in.SetActive(16)
	gate.arm()
	a := s.Commit(seq+1, unit())
	go func() { done <- a() }()
	<-gate.entered
	b := s.Commit(seq+1, unit())
	bDone := make(chan error, 1)
	go func() { bDone <- b() }()
	// b's leader decides: its group stays queued, and it waits for the
	// sync under way.
	until(t, s, "b queued, its leader waiting", func() bool { return s.cur.units == 1 && s.cur.led && s.watched })
	c := s.Commit(seq+1, unit())
	close(gate.release)
	for _, err := range []error{<-done, <-bDone, c()} {
		if err != nil {
			t.Fatal(err)
		}
	}
	if got := taken(3); !slices.Equal(got, []int{1, 2}) {
		t.Fatalf("with 16 connections writing, the units during a sync of one went in records of %v changes, want [1 2]", got)
	}
}

// syncGate keeps the next sync of the log in the fault hook until
// released, telling when it got there.
type syncGate struct {
	mu      sync.Mutex
	armed   bool
	entered chan struct{}
	release chan struct{}
}

func (g *syncGate) arm() {
	g.mu.Lock()
	g.armed, g.entered, g.release = true, make(chan struct{}), make(chan struct{})
	g.mu.Unlock()
}

func (g *syncGate) fault(at string) error {
	g.mu.Lock()
	hold := at == FaultSync && g.armed
	if hold {
		g.armed = false
	}
	entered, release := g.entered, g.release
	g.mu.Unlock()
	if hold {
		close(entered)
		<-release
	}
	return nil
}

// TestHoldWaitsForNoMoreThanRecentSyncsCarried: three connections wrote
// lately, but writes come two at a time (a worker whose claim and ack go
// together over two of the three connections its pool keeps): a sync
// carrying the two units waits for no third, since no recent sync carried
// more than two (recentMostLocked). Counting the connections alone, each
// such sync would wait out its whole hold.
func TestHoldWaitsForNoMoreThanRecentSyncsCarried(t *testing.T) {
	const hold = 400 * time.Millisecond
	in := NewInbound(hold)
	in.busy = time.Minute // every sync follows the last closely enough to hold
	_, _, _, s := load(t, filepath.Join(t.TempDir(), "h.db"), Options{Sync: SyncMode{Kind: SyncAlways}, Inbound: in}, defaultTuning)
	defer s.Close()
	in.SetActive(3)
	seq := uint64(0)
	unit := func() []Change {
		seq++
		return []Change{{Op: OpPut, Coll: "c", ID: int64(seq), Body: []byte(`{}`)}}
	}
	for i := range 6 {
		syncs := s.Stats().Fsyncs
		start := time.Now()
		a := s.Commit(seq+1, unit())
		b := s.Commit(seq+1, unit())
		var wg sync.WaitGroup
		errs := make([]error, 2)
		for j, wait := range []func() error{a, b} {
			wg.Go(func() { errs[j] = wait() })
		}
		wg.Wait()
		if err := errors.Join(errs...); err != nil {
			t.Fatal(err)
		}
		if d := time.Since(start); d >= hold/2 {
			t.Fatalf("pair %d waited %v for a third unit no recent sync carried", i, d)
		}
		if n := s.Stats().Fsyncs - syncs; n != 1 {
			t.Fatalf("pair %d took %d syncs, want 1", i, n)
		}
	}
}
