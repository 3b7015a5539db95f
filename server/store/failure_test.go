package store

import (
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fenecdb/fenec/server/internal/testwait"
)

var errInjected = errors.New("injected: database or disk is full")

// switchable returns an Options.Fault that fails commits while commit is
// set and folds while fold is set.
func switchable(commit, fold *atomic.Bool) func(string) error {
	return func(at string) error {
		if (at == FaultCommit && commit.Load()) || (at == FaultFold && fold.Load()) {
			return errInjected
		}
		return nil
	}
}

// TestRecover: a store whose write failed refuses Commits, answers probes
// with the failure while it lasts, and takes Commits again after a probe
// succeeds and Resume — from the seq after the last one written, which is
// all the file holds.
func TestRecover(t *testing.T) {
	t.Parallel()
	for _, mode := range []SyncMode{{Kind: SyncAlways}, {Kind: SyncInterval, Interval: time.Millisecond}} {
		t.Run(mode.String(), func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "f.db")
			var failCommit, failFold atomic.Bool
			var failed atomic.Int32
			_, _, _, s := load(t, path, Options{Sync: mode, Fault: switchable(&failCommit, &failFold)}, defaultTuning)
			s.Subscribe(countFailures(&failed))
			put := func(k string) []Change { return []Change{{Op: OpMetaPut, Key: k, Body: []byte("v")}} }
			if err := s.Commit(1, put("a"))(); err != nil {
				t.Fatal(err)
			}
			for s.Durable() != 1 {
				time.Sleep(time.Millisecond)
			}
			failCommit.Store(true)
			wait := s.Commit(2, put("b"))
			if mode.Kind == SyncAlways {
				if err := wait(); !errors.Is(err, errInjected) {
					t.Fatalf("wait answered %v", err)
				}
			}
			for s.Failed() == nil {
				time.Sleep(time.Millisecond)
			}
			if err := s.Commit(2, put("c"))(); !errors.Is(err, errInjected) {
				t.Fatalf("a Commit to a failed store answered %v", err)
			}
			if s.Durable() != 1 {
				t.Fatalf("Durable %d after the failure", s.Durable())
			}
			if err := s.Probe(); !errors.Is(err, errInjected) {
				t.Fatalf("a probe while writes fail answered %v", err)
			}
			failCommit.Store(false)
			if err := s.Probe(); err != nil {
				t.Fatalf("a probe once writes work answered %v", err)
			}
			if s.Failed() == nil {
				t.Fatal("a probe alone ended the failure: the engine has not undone the lost units yet")
			}
			s.Resume()
			if err := s.Commit(2, put("d"))(); err != nil {
				t.Fatal(err)
			}
			// A failure is told on a goroutine of its own.
			testwait.Until(t, "the failure told", func() bool { return failed.Load() >= 1 })
			if st := s.Stats(); st.Failures != 1 || st.Failed != nil || failed.Load() != 1 {
				t.Fatalf("stats %+v, the failure told %d times", st, failed.Load())
			}
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			got, seq, _, s2 := load(t, path, Options{}, defaultTuning)
			defer s2.Close()
			if keys := strings.Join(mapKeysSorted(got.meta), ","); keys != "a,d" || seq != 2 {
				t.Fatalf("the file holds %s at seq %d, want a,d at 2", keys, seq)
			}
		})
	}
}

func mapKeysSorted(m map[string]Change) []string {
	var out []string
	for k := range mapKeys(m) {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// TestFoldFailsMidway: a fold that fails halfway (after writing the
// documents, before the meta records) is rolled back whole — the tables
// hold nothing of it, the log keeps every record — and the next open has
// everything. Then folds in small chunks leave the same state.
func TestFoldFailsMidway(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "f.db")
	units, want := script(5, 200)
	var failCommit, failFold atomic.Bool
	noFold := tuning{foldBytes: 1 << 40, foldAge: time.Hour, foldChunk: 1 << 40, maxPending: 64 << 20, busyTimeout: time.Second}
	_, _, _, s := load(t, path, Options{Fault: switchable(&failCommit, &failFold)}, noFold)
	commitAll(t, s, 1, units)
	failFold.Store(true)
	if err := s.Close(); !errors.Is(err, errInjected) {
		t.Fatalf("Close with a failing fold answered %v", err)
	}
	docs, meta, folded := tableCounts(t, path)
	logRows := len(readLog(t, path))
	if docs != 0 || meta != 0 || folded != 0 || logRows == 0 {
		t.Fatalf("after a failed fold: %d docs, %d meta records, folded_seq %d, %d log rows: the fold was not rolled back whole", docs, meta, folded, logRows)
	}
	got, seq, _, s2 := load(t, path, Options{}, tuning{foldBytes: 1, foldAge: time.Millisecond, foldChunk: 4 << 10, maxPending: 64 << 20, busyTimeout: time.Second})
	if seq != 200 {
		t.Fatalf("seq %d, want 200", seq)
	}
	sameState(t, "after a failed fold", got, want)
	// The replayed log folds in chunks of 4 KB, each its own transaction.
	more, _ := script(6, 100)
	want.applyAll(t, more)
	commitAll(t, s2, 201, more)
	for s2.Stats().Folds < 3 {
		time.Sleep(time.Millisecond)
	}
	if err := s2.Close(); err != nil {
		t.Fatal(err)
	}
	got, _, _, s3 := load(t, path, Options{}, defaultTuning)
	defer s3.Close()
	sameState(t, "folded in chunks", got, want)
}

// TestSyncFailure: a failed sync of the WAL fails the groups it was to make
// durable and stops the store, which then stays stopped — the WAL's pages
// are in doubt after a failed sync, so probes answer the failure until the
// file is opened again — with Durable at the last group synced. Reopened,
// the file holds every unit acknowledged.
func TestSyncFailure(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "f.db")
	var failSync atomic.Bool
	var failed atomic.Int32
	fault := func(at string) error {
		if at == FaultSync && failSync.Load() {
			return errInjected
		}
		return nil
	}
	_, _, _, s := load(t, path, Options{Fault: fault}, defaultTuning)
	s.Subscribe(countFailures(&failed))
	put := func(k string) []Change { return []Change{{Op: OpMetaPut, Key: k, Body: []byte("v")}} }
	if err := s.Commit(1, put("a"))(); err != nil {
		t.Fatal(err)
	}
	failSync.Store(true)
	if err := s.Commit(2, put("b"))(); !errors.Is(err, errInjected) {
		t.Fatalf("the wait of a unit whose sync failed answered %v", err)
	}
	if s.Failed() == nil || s.Durable() != 1 {
		t.Fatalf("after a failed sync: Failed %v, Durable %d, want failed at 1", s.Failed(), s.Durable())
	}
	if err := s.Commit(2, put("c"))(); !errors.Is(err, errInjected) {
		t.Fatalf("a Commit to a failed store answered %v", err)
	}
	failSync.Store(false)
	if err := s.Probe(); !errors.Is(err, errInjected) || !strings.Contains(err.Error(), "restart") {
		t.Fatalf("a probe after a failed sync answered %v, want the failure until a restart", err)
	}
	if err := s.Close(); !errors.Is(err, errInjected) {
		t.Fatalf("Close answered %v", err)
	}
	for deadline := time.Now().Add(5 * time.Second); failed.Load() == 0 && time.Now().Before(deadline); {
		time.Sleep(time.Millisecond) // a failure is told on a goroutine of its own
	}
	if failed.Load() != 1 {
		t.Fatalf("the failure was told %d times", failed.Load())
	}
	got, _, _, s2 := load(t, path, Options{}, defaultTuning)
	defer s2.Close()
	if _, ok := got.meta["a"]; !ok {
		t.Fatal("the unit acknowledged before the failed sync is not in the file")
	}
}

// countFailures returns a subscriber (Subscribe) that counts the failures
// it is told of, and checks that a commit's event carries no failure.
func countFailures(n *atomic.Int32) func(Event) {
	return func(e Event) {
		if e.Failed != nil {
			n.Add(1)
		}
	}
}
