package store

import (
	"path/filepath"
	"testing"
)

// TestCommitReusesChanges: a group appends its changes into the slice of a
// group before it, once the folds are done with that one, rather than
// growing a new one from empty.
func TestCommitReusesChanges(t *testing.T) {
	_, _, _, s := load(t, filepath.Join(t.TempDir(), "f.db"), Options{}, defaultTuning)
	defer s.Close()
	big := []Change{{Op: OpCreate, Coll: "c", ID: 1}}
	for i := range int64(99) {
		big = append(big, Change{Op: OpPut, Coll: "c", ID: 1 + i, Body: []byte("x")})
	}
	if err := s.Commit(1, big)(); err != nil {
		t.Fatal(err)
	}
	// The group is handed to the folds before its pipeline stage ends.
	s.mu.Lock()
	for s.writing || s.syncing || len(s.unsynced) > 0 {
		s.waitChange()
	}
	s.mu.Unlock()
	wait := s.Commit(2, []Change{{Op: OpDelete, Coll: "c", ID: 1}})
	s.mu.Lock()
	n, c := len(s.cur.changes), cap(s.cur.changes)
	s.mu.Unlock()
	if err := wait(); err != nil {
		t.Fatal(err)
	}
	if n != 1 || c < len(big) {
		t.Fatalf("the second group's changes: length %d, capacity %d; want 1 and the first group's %d or more", n, c, len(big))
	}
}

// TestCommitAllocsOff: under off (and an interval) a Commit that does not
// wait makes no allocation of its own: the wait it returns is one func
// value made at open, and the group's changes slice is reused.
func TestCommitAllocsOff(t *testing.T) {
	_, _, _, s := load(t, filepath.Join(t.TempDir(), "f.db"), Options{Sync: SyncMode{Kind: SyncOff}}, defaultTuning)
	defer s.Close()
	if err := s.Commit(1, []Change{{Op: OpCreate, Coll: "c", ID: 1}})(); err != nil {
		t.Fatal(err)
	}
	seq := uint64(1)
	unit := []Change{{Op: OpPut, Coll: "c", ID: 1, Body: []byte("x")}}
	// The group's slice grows to its size in the first runs, by doubling:
	// a handful of allocations over the 2000.
	allocs := testing.AllocsPerRun(2000, func() {
		seq++
		if err := s.Commit(seq, unit)(); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Fatalf("%.0f allocations a Commit under off, want 0", allocs)
	}
}
