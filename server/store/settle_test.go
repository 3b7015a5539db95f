package store

import (
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// TestSettle: under --sync always with Options.Settles, the wait of a
// sync's leader returns before its group is told to OnCommit and handed to
// the folds — those wait for Settle, which a server calls once its answer
// is written (docs/architecture.md, "One durable worker's claim, hop by
// hop") — and no group is lost for it: the next sync hands the one left
// before its own, and Close folds one never settled.
func TestSettle(t *testing.T) {
	path := filepath.Join(t.TempDir(), "f.db")
	var told atomic.Int64
	onCommit := func(time.Duration, int, bool) { told.Add(1) }
	units, want := script(3, 40)
	_, _, _, s := load(t, path, Options{Settles: true, OnCommit: onCommit}, noFoldTuning)
	unfolded := func() int64 {
		s.fmu.Lock()
		defer s.fmu.Unlock()
		return s.unfoldedLocked()
	}
	if err := s.Commit(1, units[0])(); err != nil {
		t.Fatal(err)
	}
	if n, u := told.Load(), unfolded(); n != 0 || u != 0 {
		t.Fatalf("after the leader's wait, before Settle: OnCommit told %d times, %d bytes to fold; want none", n, u)
	}
	s.Settle()
	if n, u := told.Load(), unfolded(); n != 1 || u == 0 {
		t.Fatalf("after Settle: OnCommit told %d times, %d bytes to fold; want once, and the group's record", n, u)
	}
	s.Settle() // nothing left: no second telling
	if n := told.Load(); n != 1 {
		t.Fatalf("a second Settle told OnCommit again: %d", n)
	}

	// Unit 2 is left in hand; unit 3's sync hands it, then its own.
	for seq := uint64(2); seq <= 3; seq++ {
		if err := s.Commit(seq, units[seq-1])(); err != nil {
			t.Fatal(err)
		}
	}
	if n := told.Load(); n != 3 {
		t.Fatalf("after two more syncs without Settle, OnCommit told %d times, want 3", n)
	}

	// The last group is left in hand, never settled: Close folds it
	// with the rest, and deletes the log, the file alone being the state.
	commitAll(t, s, 4, units[3:])
	closedClean(t, s, path, 40)
	loadSame(t, path, 40, "after Close", want).Close()

	// And when the group in hand is all there is to fold.
	path = filepath.Join(t.TempDir(), "g.db")
	_, _, _, s = load(t, path, Options{Settles: true}, noFoldTuning)
	if err := s.Commit(1, units[0])(); err != nil {
		t.Fatal(err)
	}
	closedClean(t, s, path, 1)
}

// closedClean closes s and checks that it folded every unit, through seq,
// and deleted its log.
func closedClean(t *testing.T, s *Store, path string, seq int) {
	t.Helper()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	ents, err := os.ReadDir(filepath.Dir(path))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if strings.Contains(e.Name(), "-log-") {
			t.Fatalf("after Close, log segment %s is left: a group in hand was not folded", e.Name())
		}
	}
	if _, _, folded := tableCounts(t, path); folded != seq {
		t.Fatalf("folded_seq %d after Close, want %d", folded, seq)
	}
}
