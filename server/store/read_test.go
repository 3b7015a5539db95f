package store

import (
	"fmt"
	"path/filepath"
	"testing"
)

// readAll reads ids of coll back as "id=body" lines.
func readAll(t *testing.T, s *Store, coll string, ids ...int64) []string {
	t.Helper()
	var got []string
	if err := s.ReadDocs(coll, ids, func(id int64, body []byte) {
		got = append(got, fmt.Sprintf("%d=%s", id, body))
	}); err != nil {
		t.Fatal(err)
	}
	return got
}

// TestReadDocs: ReadDocs answers the tables as the folds left them, many
// ids in a query (more than readBatch in several), and FoldedSeq says up
// to which seq they hold every change; Load marks the puts it read from
// the tables (InTables) and not those of the log.
func TestReadDocs(t *testing.T) {
	path := filepath.Join(t.TempDir(), "f.db")
	_, _, _, s := load(t, path, Options{}, defaultTuning)
	units := [][]Change{{{Op: OpCreate, Coll: "c", ID: 1, Body: []byte("{}")}}}
	var ids []int64
	for i := int64(1); i <= 300; i++ {
		units = append(units, []Change{{Op: OpPut, Coll: "c", ID: i, Body: []byte(fmt.Sprintf("v1-%d", i))}})
		ids = append(ids, i)
	}
	commitAll(t, s, 1, units)
	if got := s.FoldedSeq(); got != 0 {
		t.Fatalf("FoldedSeq %d before a fold", got)
	}
	if got := readAll(t, s, "c", 1, 2); len(got) != 0 {
		t.Fatalf("read before a fold: %q", got)
	}
	if err := s.Fold(); err != nil {
		t.Fatal(err)
	}
	if got := s.FoldedSeq(); got != 301 {
		t.Fatalf("FoldedSeq %d after folding 301 units", got)
	}
	got := readAll(t, s, "c", append(ids, 999)...)
	if len(got) != 300 || got[0] != "1=v1-1" || got[299] != "300=v1-300" {
		t.Fatalf("read %d rows: first %q", len(got), got[:min(3, len(got))])
	}
	// A change not folded yet is not in the tables: the old version is
	// read back until the fold.
	commitAll(t, s, 302, [][]Change{{{Op: OpPut, Coll: "c", ID: 7, Body: []byte("v2-7")}, {Op: OpDelete, Coll: "c", ID: 8}}})
	if got := readAll(t, s, "c", 7, 8); fmt.Sprint(got) != "[7=v1-7 8=v1-8]" || s.FoldedSeq() != 301 {
		t.Fatalf("before the fold: %q, FoldedSeq %d", got, s.FoldedSeq())
	}
	if err := s.Fold(); err != nil {
		t.Fatal(err)
	}
	if got := readAll(t, s, "c", 8, 7); fmt.Sprint(got) != "[7=v2-7]" || s.FoldedSeq() != 302 {
		t.Fatalf("after the fold: %q, FoldedSeq %d", got, s.FoldedSeq())
	}
	commitAll(t, s, 303, [][]Change{{{Op: OpPut, Coll: "c", ID: 9, Body: []byte("v2-9")}}})
	// Close folds: reopen without, to keep the last unit in the log.
	s.Close()
	_, _, loaded, s := load(t, path, Options{}, defaultTuning)
	defer s.Close()
	if got := s.FoldedSeq(); got != 303 {
		t.Fatalf("FoldedSeq %d at open", got)
	}
	for _, c := range loaded {
		if c.Op == OpPut && !c.InTables {
			t.Errorf("a put of the tables not marked: %+v", c)
		}
	}
	mem, err := Open(":memory:", Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer mem.Close()
	if err := mem.ReadDocs("c", []int64{1}, func(int64, []byte) {}); err != ErrNoTables || mem.FoldedSeq() != 0 {
		t.Fatalf(":memory: ReadDocs %v, FoldedSeq %d", err, mem.FoldedSeq())
	}
}
