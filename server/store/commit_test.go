package store

import (
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/fenecdb/fenec/server/internal/testwait"
)

// TestGroupCommit: 16 writers under always share fsyncs. Each sync is
// slowed by 2 ms (as a slow disk's is), so that the units committed during
// one pile up behind it however fast the write is and however loaded the
// machine: they must go down in a few syncs, not one each.
func TestGroupCommit(t *testing.T) {
	slow := func(at string) error {
		if at == FaultSync {
			time.Sleep(2 * time.Millisecond)
		}
		return nil
	}
	path := filepath.Join(t.TempDir(), "f.db")
	_, _, _, s := load(t, path, Options{Fault: slow}, noFoldTuning)
	const writers, each = 16, 200
	var mu sync.Mutex // the engine's write lock
	var seq uint64
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			for i := range each {
				mu.Lock()
				seq++
				wait := s.Commit(seq, []Change{{Op: OpMetaPut, Key: fmt.Sprintf("w%d-%d", w, i), Body: make([]byte, 200)}})
				mu.Unlock()
				if err := wait(); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	st := s.Stats()
	// Each record's synced (docs/reliability.md) is the seq of a record
	// before it (or 0), and rises: a group written while the sync before
	// it was under way says so.
	recs := readLog(t, path)
	if len(recs) == 0 {
		t.Fatal("no records in the log")
	}
	seqs := map[uint64]bool{0: true}
	var synced uint64
	behind := 0
	for i, r := range recs {
		if !seqs[r.synced] || r.synced < synced {
			t.Fatalf("record %d (seq %d) says %d synced, after %d: not an earlier record's seq, or lower", i, r.seq, r.synced, synced)
		}
		if i > 0 && r.synced < recs[i-1].seq {
			behind++
		}
		synced = r.synced
		seqs[r.seq] = true
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if st.Commits != writers*each {
		t.Fatalf("commits %d", st.Commits)
	}
	// 16 writers, at most one unit each in flight: with every sync taking
	// 2 ms, a group holds the units of the writers released by the sync
	// before it, many more than 2 but for scheduling stalls of milliseconds.
	per := float64(st.Commits) / float64(st.Fsyncs)
	if per < 2 {
		t.Fatalf("no group commit: %d fsyncs for %d commits (%.2f units per fsync, want at least 2)", st.Fsyncs, st.Commits, per)
	}
	t.Logf("%d commits, %d fsyncs: %.1f units per fsync; %d of %d records written before the one before them was synced", st.Commits, st.Fsyncs, per, behind, len(recs))
}

// heldSync is an Options.Fault that, once armed, holds the next sync of
// the log until released: a test then commits units while a sync is
// under way.
type heldSync struct {
	armed   atomic.Bool
	held    chan struct{} // closed when the sync is held
	release chan struct{}
	failAt  atomic.Int32 // if n > 0, the nth write to the log from now fails
}

func newHeldSync() *heldSync {
	return &heldSync{held: make(chan struct{}), release: make(chan struct{})}
}

func (h *heldSync) fault(at string) error {
	switch at {
	case FaultSync:
		if h.armed.CompareAndSwap(true, false) {
			close(h.held)
			<-h.release
		}
	case FaultCommit:
		if h.failAt.Load() > 0 && h.failAt.Add(-1) == 0 {
			return errInjected
		}
	}
	return nil
}

// until waits until cond holds under the store's mu: the pipeline's state.
func until(t *testing.T, s *Store, what string, cond func() bool) {
	t.Helper()
	testwait.Until(t, what, func() bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		return cond()
	})
}

// syncUnderWay commits unit 1 and holds its sync; then unit 2, whose group
// is written during that sync; then units 3 and 4, queued behind it, their
// leader waiting. It returns the four waits' errors (each channel gets its
// once the wait returns).
func syncUnderWay(t *testing.T, s *Store, h *heldSync) []chan error {
	t.Helper()
	put := func(k string) []Change { return []Change{{Op: OpMetaPut, Key: k, Body: []byte("v")}} }
	waits := make([]chan error, 4)
	start := func(i int) {
		wait := s.Commit(uint64(i+1), put(fmt.Sprint("k", i+1)))
		waits[i] = make(chan error, 1)
		go func() { waits[i] <- wait() }()
	}
	h.armed.Store(true)
	start(0)
	<-h.held
	start(1)
	until(t, s, "unit 2's group written during the sync of unit 1", func() bool { return len(s.unsynced) == 1 })
	start(2)
	start(3)
	until(t, s, "units 3 and 4 queued, their leader waiting", func() bool { return s.cur.units == 2 && s.cur.led && s.watched })
	return waits
}

// TestSyncTakesQueued: under --sync always a sync takes every unit queued
// when it starts, not only the group written during the sync before it.
// With unit 1's sync held, unit 2 is written at once; units 3 and 4 come
// after that write. Once the sync ends, one more sync makes 2, 3 and 4
// durable (two in all, not three), and 3 and 4's record was written before
// that sync, so it says only unit 1 was synced.
func TestSyncTakesQueued(t *testing.T) {
	t.Parallel()
	h := newHeldSync()
	path := filepath.Join(t.TempDir(), "f.db")
	var told atomic.Int64 // the events that say Fsync: the syncs, which fenec_store_fsyncs_total counts
	onCommit := func(e Event) {
		if e.Fsync {
			told.Add(1)
		}
	}
	_, _, _, s := load(t, path, Options{Fault: h.fault}, noFoldTuning)
	s.Subscribe(onCommit)
	before, toldBefore := s.Stats().Fsyncs, told.Load()
	waits := syncUnderWay(t, s, h)
	close(h.release)
	for i, w := range waits {
		if err := <-w; err != nil {
			t.Fatalf("unit %d: %v", i+1, err)
		}
	}
	if n := s.Stats().Fsyncs - before; n != 2 {
		t.Fatalf("%d syncs for the four units, want 2 (units 3 and 4 waited for a sync of their own)", n)
	}
	if n := told.Load() - toldBefore; n != 2 {
		t.Fatalf("subscribers told of %d syncs for the four units, want 2 (one sync made two groups durable)", n)
	}
	recs := readLog(t, path)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range recs {
		got = append(got, fmt.Sprintf("%d/%d", r.seq, r.synced))
	}
	// Records as seq/synced: 1 alone; 2 during its sync; 3 and 4 before
	// the next sync started (after unit 1's had ended).
	if want := []string{"1/0", "2/0", "4/1"}; !slices.Equal(got, want) {
		t.Fatalf("records (seq/synced) %v, want %v", got, want)
	}
}

// TestSyncTakesQueuedFails: when the write of the units a sync would take
// fails, the group written before them is still synced and answered, and
// they and every later unit answer the failure.
func TestSyncTakesQueuedFails(t *testing.T) {
	t.Parallel()
	h := newHeldSync()
	path := filepath.Join(t.TempDir(), "f.db")
	_, _, _, s := load(t, path, Options{Fault: h.fault}, noFoldTuning)
	waits := syncUnderWay(t, s, h)
	h.failAt.Store(1) // the next write: units 3 and 4's
	close(h.release)
	for i, w := range waits {
		err := <-w
		if ok := i < 2; ok != (err == nil) || (!ok && !errors.Is(err, errInjected)) {
			t.Fatalf("unit %d answered %v", i+1, err)
		}
	}
	if d := s.Durable(); d != 2 {
		t.Fatalf("Durable %d, want 2", d)
	}
	if err := s.Commit(3, []Change{{Op: OpMetaPut, Key: "k5", Body: []byte("v")}})(); !errors.Is(err, errInjected) {
		t.Fatalf("a later Commit answered %v", err)
	}
	s.Close()
	recs := readLog(t, path)
	if len(recs) != 2 || recs[1].seq != 2 {
		t.Fatalf("%d records in the log, want units 1 and 2", len(recs))
	}
}

// BenchmarkCommit measures units committed per second, each unit a
// statement of 1 or 10 puts of 200-byte bodies, by 1, 4 or 16 writers that
// wait for their unit as a request would, and the process's CPU time per
// unit (user and system, the kernel's share of the syncs included: a
// figure a loaded disk moves far less than units/s), and its context
// switches per unit (cs/op).
//
//	cd server && go test ./store -run '^$' -bench Commit -benchtime 2000x
func BenchmarkCommit(b *testing.B) {
	body := make([]byte, 200)
	for _, mode := range modes {
		for _, writers := range []int{1, 4, 16} {
			for _, puts := range []int{1, 10} {
				b.Run(fmt.Sprintf("%s/writers=%d/puts=%d", mode, writers, puts), func(b *testing.B) {
					s, err := Open(filepath.Join(b.TempDir(), "f.db"), Options{Sync: mode})
					if err != nil {
						b.Fatal(err)
					}
					if _, err := s.Load(func(Change) error { return nil }); err != nil {
						b.Fatal(err)
					}
					if err := s.Commit(1, []Change{{Op: OpCreate, Coll: "c", ID: 1}})(); err != nil {
						b.Fatal(err)
					}
					var mu sync.Mutex
					seq := uint64(1)
					var left atomic.Int64
					left.Store(int64(b.N))
					cpu0, cs0 := processCPU(), processSwitches()
					b.ResetTimer()
					var wg sync.WaitGroup
					for range writers {
						wg.Go(func() {
							for left.Add(-1) >= 0 {
								mu.Lock()
								seq++
								u := make([]Change, puts)
								for i := range u {
									u[i] = Change{Op: OpPut, Coll: "c", ID: int64(seq%100000)*10 + int64(i), Body: body}
								}
								wait := s.Commit(seq, u)
								mu.Unlock()
								if err := wait(); err != nil {
									b.Error(err)
									return
								}
							}
						})
					}
					wg.Wait()
					b.StopTimer()
					cpu, cs := processCPU()-cpu0, processSwitches()-cs0
					st := s.Stats()
					if err := s.Close(); err != nil {
						b.Fatal(err)
					}
					b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "stmts/s")
					b.ReportMetric(float64(cpu.Microseconds())/float64(b.N), "cpu-µs/op")
					b.ReportMetric(float64(cs)/float64(b.N), "cs/op")
					if st.Fsyncs > 0 {
						b.ReportMetric(float64(st.Commits)/float64(st.Fsyncs), "units/fsync")
					}
				})
			}
		}
	}
}

// processCPU returns the CPU time (user and system) the process has used.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// processSwitches returns the context switches (voluntary and involuntary)
// the process's threads have made: each sleep and wake of a thread (in a
// sync, the runtime's monitor polling meanwhile, an idle thread woken for a
// waiter) costs one (docs/benchmarks.md, "The durable path's CPU").
func processSwitches() int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return ru.Nvcsw + ru.Nivcsw
}

// TestDetach commits units under always whose waits nobody calls, as a
// cluster node applying its log does: after Detach the committer writes
// and syncs them by itself, and a reopened file holds them all.
func TestDetach(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "f.db")
	_, _, _, s := load(t, path, Options{}, noFoldTuning)
	s.Detach()
	const units = 50
	for seq := uint64(1); seq <= units; seq++ {
		s.Commit(seq, []Change{{Op: OpMetaPut, Key: fmt.Sprintf("k%d", seq), Body: []byte("v")}})
	}
	until(t, s, "the detached units reach the disk", func() bool { return s.durable == units })
	if st := s.Stats(); st.Commits != units || st.Fsyncs == 0 {
		t.Fatalf("stats %+v: want %d commits, synced", st, units)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	got, seq, _, s2 := load(t, path, Options{}, noFoldTuning)
	defer s2.Close()
	if seq != units || len(got.meta) != units {
		t.Fatalf("reopened: seq %d, %d meta records; want %d of each", seq, len(got.meta), units)
	}
}
