package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"slices"
	"sync/atomic"
	"testing"
	"time"
)

// TestFoldChunksBoundedInRows: the log is folded in chunks of about
// foldRows rows, however few bytes they hold, and the chunks folded one
// after another leave the state the units describe.
func TestFoldChunksBoundedInRows(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "f.db")
	units, want := script(7, 600)
	// No fold until Close, which folds every chunk: their count is the
	// chunking's.
	tune := tuning{foldBytes: 1 << 40, foldAge: time.Hour, foldChunk: 1 << 40, foldRows: 40, maxPending: 64 << 20, busyTimeout: time.Second}
	_, _, _, s := load(t, path, Options{}, tune)
	commitAll(t, s, 1, units)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	// Hundreds of documents to write (and a log row a group), 40 rows to
	// a chunk, a group never split: more than 10 chunks, and many units
	// to a chunk (about 20 chunks here).
	st := s.Stats()
	t.Logf("%d folds", st.Folds)
	if st.Folds < 10 || st.Folds > 100 || st.LogBytes != 0 {
		t.Fatalf("%d folds of 600 units in chunks of 40 rows (stats %+v); want 10 to 100", st.Folds, st)
	}
	s2 := loadSame(t, path, 600, "after the folds", want)
	defer s2.Close()
}

// TestFoldInParts: a batch bigger than foldRows is folded in parts, each
// its own transaction, and a failure (or a kill) after some parts leaves
// the tables holding them and the log every row — from which the next open
// has the state the units describe, and folds it.
func TestFoldInParts(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "f.db")
	want := newModel()
	units := [][]Change{{{Op: OpCreate, Coll: "c", ID: 1, Body: []byte("schema")}}}
	var batch, later []Change
	for i := range int64(1000) {
		batch = append(batch, Change{Op: OpPut, Coll: "c", ID: 1 + i, Body: fmt.Appendf(nil, "first %d", i)})
	}
	batch = append(batch, Change{Op: OpMetaPut, Key: "k", Body: []byte("v")})
	for i := range int64(500) {
		if i%2 == 0 {
			later = append(later, Change{Op: OpDelete, Coll: "c", ID: 1 + 2*i})
		} else {
			later = append(later, Change{Op: OpPut, Coll: "c", ID: 1 + 2*i, Body: fmt.Appendf(nil, "second %d", i)})
		}
	}
	units = append(units, batch, later)
	want.applyAll(t, units)
	// The 5th question at FaultFold fails: the creation's chunk folds
	// whole (the 1st), and three parts of 100 documents commit.
	fault := failFoldAt(5)
	tune := tuning{foldBytes: 1 << 40, foldAge: time.Hour, foldChunk: 1 << 40, foldRows: 100, maxPending: 64 << 20, busyTimeout: time.Second}
	_, _, _, s := load(t, path, Options{Fault: fault}, tune)
	for i, u := range units {
		if err := s.Commit(uint64(i+1), u)(); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Close(); !errors.Is(err, errInjected) {
		t.Fatalf("Close with a failing fold answered %v", err)
	}
	docs, meta, folded := tableCounts(t, path)
	logRows := 0
	for _, r := range readLog(t, path) {
		if r.seq > uint64(folded) {
			logRows++
		}
	}
	if docs != 300 || meta != 0 || logRows != 2 || folded != 1 {
		t.Fatalf("after three parts: %d docs, %d meta records, %d log records after folded_seq, folded_seq %d; want 300, 0, 2, 1", docs, meta, logRows, folded)
	}
	got, seq, _, s2 := load(t, path, Options{}, tune)
	if seq != 3 {
		t.Fatalf("seq %d, want 3", seq)
	}
	sameState(t, "after three parts", got, want)
	if err := s2.Close(); err != nil {
		t.Fatal(err)
	}
	if st := s2.Stats(); st.Folds != 2 || st.LogBytes != 0 {
		t.Fatalf("stats %+v: want the two batches folded, a chunk each", st)
	}
	got, _, _, s3 := load(t, path, Options{}, defaultTuning)
	defer s3.Close()
	sameState(t, "folded in parts", got, want)
}

// TestFoldAcrossChunks: a document written again in a later chunk is not
// written by the earlier chunk's fold — a job's claim (a put) and its ack
// (a delete) make one row however the chunks fall — and a failure (or a
// kill) between the two folds leaves the tables holding the document as
// it was before both, and the log the records that bring it to its end.
// Dropping and creating the collection again in a later chunk spares the
// earlier chunks' documents too.
func TestFoldAcrossChunks(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "f.db")
	want := newModel()
	first := [][]Change{{{Op: OpCreate, Coll: "c", ID: 1, Body: []byte("schema")}, {Op: OpCreate, Coll: "d", ID: 1, Body: []byte("schema")}}}
	for i := range int64(20) {
		first = append(first, []Change{{Op: OpPut, Coll: "c", ID: 1 + i, Body: fmt.Appendf(nil, "v0 %d", i)}})
	}
	// Two units a chunk (a document row and a log row each), folded only
	// at Close: the claims' ten chunks come before the acks' ten.
	tune := tuning{foldBytes: 1 << 40, foldAge: time.Hour, foldChunk: 1 << 40, foldRows: 4, maxPending: 64 << 20, busyTimeout: time.Second}
	_, _, _, s := load(t, path, Options{}, tune)
	commitAll(t, s, 1, first)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	var units [][]Change
	for i := range int64(20) {
		units = append(units, []Change{{Op: OpPut, Coll: "c", ID: 1 + i, Body: fmt.Appendf(nil, "claimed %d", i)}})
	}
	for i := range int64(20) {
		if i%2 == 0 {
			units = append(units, []Change{{Op: OpDelete, Coll: "c", ID: 1 + i}})
		} else {
			units = append(units, []Change{{Op: OpPut, Coll: "c", ID: 1 + i, Body: fmt.Appendf(nil, "done %d", i)}})
		}
	}
	// d's documents, put in one chunk, are spared by its drop and
	// creation in the last.
	units = append(units, []Change{{Op: OpPut, Coll: "d", ID: 1, Body: []byte("gone")}, {Op: OpPut, Coll: "d", ID: 2, Body: []byte("gone")}})
	units = append(units, []Change{{Op: OpDrop, Coll: "d"}, {Op: OpCreate, Coll: "d", ID: 1, Body: []byte("schema 2")}, {Op: OpPut, Coll: "d", ID: 1, Body: []byte("kept")}})
	want.applyAll(t, append(slices.Clone(first), units...))

	// The 11th chunk's fold fails: the claims' ten chunks are folded.
	fault := failFoldAt(11)
	var rows []int64
	changed := func() int64 {
		var n int64
		if err := s.conn.QueryRowContext(context.Background(), `SELECT total_changes()`).Scan(&n); err != nil {
			t.Error(err)
		}
		return n
	}
	tune.onFold = func(time.Duration) { rows = append(rows, changed()) }
	_, _, _, s = load(t, path, Options{Fault: fault}, tune)
	before := changed()
	for i, u := range units {
		// One unit a group: a group never splits across chunks.
		if err := s.Commit(uint64(len(first)+1+i), u)(); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Close(); !errors.Is(err, errInjected) {
		t.Fatalf("Close with a failing fold answered %v (after %d folds, stats %+v)", err, len(rows), s.Stats())
	}
	if len(rows) != 10 {
		t.Fatalf("%d folds before the failure, want 10", len(rows))
	}
	// Each of the ten folds wrote its folded_seq and c's next id, and no
	// document.
	for i, n := range rows {
		if n-before != 2*int64(i+1) {
			t.Fatalf("after %d folds SQLite counted %d changed rows, want %d: the claims were written (%v after %d)", i+1, n-before, 2*(i+1), rows, before)
		}
	}
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	var claimed, v0 int
	err = db.QueryRow(`SELECT (SELECT count(*) FROM docs WHERE CAST(body AS TEXT) LIKE 'claimed%'), (SELECT count(*) FROM docs WHERE coll = 'c' AND CAST(body AS TEXT) LIKE 'v0%')`).Scan(&claimed, &v0)
	db.Close()
	if err != nil {
		t.Fatal(err)
	}
	if claimed != 0 || v0 != 20 {
		t.Fatalf("after the claims' folds the tables hold %d claimed and %d first documents; want 0 and 20", claimed, v0)
	}
	seq := uint64(len(first) + len(units))
	s2 := loadSame(t, path, seq, "after a failure between the chunks", want)
	if err := s2.Close(); err != nil {
		t.Fatal(err)
	}
	s3 := loadSame(t, path, seq, "folded", want)
	if err := s3.Close(); err != nil {
		t.Fatal(err)
	}
	if docs, _, folded := tableCounts(t, path); docs != 11 || folded != int(seq) {
		t.Fatalf("folded: %d documents, folded_seq %d; want 11, %d", docs, folded, seq)
	}
}

// TestFoldBatches: runs of puts and of deletes of every length around the
// fold's statement sizes (32, 8, 1 rows), in two collections, fold to the
// state the units describe.
func TestFoldBatches(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "f.db")
	want := newModel()
	units := [][]Change{{{Op: OpCreate, Coll: "a", ID: 1, Body: []byte("schema")}, {Op: OpCreate, Coll: "b", ID: 1, Body: []byte("schema")}}}
	var fill []Change
	for i := range int64(600) {
		fill = append(fill, Change{Op: OpPut, Coll: "a", ID: 1 + i, Body: fmt.Appendf(nil, "a first %d", i)})
		fill = append(fill, Change{Op: OpPut, Coll: "b", ID: 1 + i, Body: fmt.Appendf(nil, "b first %d", i)})
	}
	units = append(units, fill)
	var runs []Change
	id := int64(1)
	for _, n := range []int64{1, 2, 7, 8, 9, 15, 31, 32, 33, 40, 41, 64, 65, 73} {
		coll := []string{"a", "b"}[n%2]
		for i := range n {
			runs = append(runs, Change{Op: OpPut, Coll: coll, ID: id + i, Body: fmt.Appendf(nil, "%s second %d", coll, id+i)})
		}
		for i := range n {
			runs = append(runs, Change{Op: OpDelete, Coll: coll, ID: id + n + i})
		}
		id += 2 * n
	}
	units = append(units, runs)
	want.applyAll(t, units)
	// The first two units fold first; the runs are one chunk, written in
	// one transaction (no parts).
	tune := tuning{foldBytes: 1 << 40, foldAge: time.Hour, foldChunk: 1 << 40, foldRows: 1 << 20, maxPending: 64 << 20, busyTimeout: time.Second}
	_, _, _, s := load(t, path, Options{}, tune)
	commitAll(t, s, 1, units)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s2 := loadSame(t, path, uint64(len(units)), "folded", want)
	if err := s2.Close(); err != nil {
		t.Fatal(err)
	}
	// Every document is in the tables (the log is folded whole).
	if docs, _, _ := tableCounts(t, path); docs != len(want.colls["a"].docs)+len(want.colls["b"].docs) {
		t.Fatalf("%d documents in the tables, want %d", docs, len(want.colls["a"].docs)+len(want.colls["b"].docs))
	}
}

// failFoldAt returns a Fault that fails the nth question at FaultFold
// (counting from 1) and lets every other pass.
func failFoldAt(n int32) func(at string) error {
	var asked atomic.Int32
	return func(at string) error {
		if at == FaultFold && asked.Add(1) == n {
			return errInjected
		}
		return nil
	}
}

// TestFoldDenseDeletes: deletes whose ids lie close together, among
// documents that stay, fold by a scan of their range (docsSQL's dense
// form), and deletes far apart by seeking each; both leave exactly the
// documents not deleted.
func TestFoldDenseDeletes(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "f.db")
	want := newModel()
	fill := filled("a", 400, "doc")
	var dels []Change
	for id := int64(1); id <= 128; id++ {
		if id%4 != 0 { // 96 deletes, each 32 within 43 ids: dense
			dels = append(dels, Change{Op: OpDelete, Coll: "a", ID: id})
		}
	}
	for id := int64(150); id < 150+5*40; id += 5 { // 40 deletes 5 apart: not dense
		dels = append(dels, Change{Op: OpDelete, Coll: "a", ID: id})
	}
	want.applyAll(t, [][]Change{fill, dels})
	s := foldByHand(t, path, fill, dels, 1<<20)
	for _, k := range []docsKey{{false, 32, true}, {false, 32, false}, {false, 8, false}} {
		if s.foldTx.stmts[docsText[k]] == nil {
			t.Errorf("the fold did not use %q", docsText[k])
		}
	}
	reopenFolded(t, s, path, want)
	if docs, _, _ := tableCounts(t, path); docs != 400-96-40 {
		t.Fatalf("%d documents in the tables, want %d", docs, 400-96-40)
	}
}

// foldByHand commits fill to a store at path and closes it, reopens it
// with no fold of its own (rows a part), commits dels, and folds the whole
// log itself. It returns the store with wmu held, for the caller to look
// at the statements its fold used (s.foldTx.stmts), then unlock.
func foldByHand(t *testing.T, path string, fill, dels []Change, rows int) *Store {
	t.Helper()
	_, _, _, s := load(t, path, Options{}, defaultTuning)
	commitAll(t, s, 1, [][]Change{fill})
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	tune := tuning{foldBytes: 1 << 40, foldAge: time.Hour, foldChunk: 1 << 40, foldRows: rows, maxPending: 64 << 20, busyTimeout: time.Second}
	_, _, _, s = load(t, path, Options{}, tune)
	commitAll(t, s, 2, [][]Change{dels})
	s.mu.Lock()
	for s.writing || s.syncing || len(s.unsynced) > 0 {
		s.waitChange()
	}
	s.mu.Unlock()
	foldAll(t, s)
	return s
}

// foldAll folds the whole log by hand, and returns with s.wmu held.
func foldAll(t *testing.T, s *Store) {
	t.Helper()
	s.wmu.Lock()
	for more := true; more; {
		var err error
		if more, err = s.foldLog(); err != nil {
			s.wmu.Unlock()
			t.Fatal(err)
		}
	}
}

// reopenFolded ends foldByHand's look (s.wmu held), closes s, and opens
// path again, which must hold want, all of it folded.
func reopenFolded(t *testing.T, s *Store, path string, want *model) {
	t.Helper()
	s.wmu.Unlock()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s2 := loadSame(t, path, 2, "folded", want)
	if err := s2.Close(); err != nil {
		t.Fatal(err)
	}
}

// sealAll seals every chunk waiting for a fold, as their folds will, and
// returns the documents they write ("coll/id").
func sealAll(s *Store) []string {
	s.fmu.Lock()
	defer s.fmu.Unlock()
	var out []string
	for _, f := range s.folds {
		f.seal()
		for _, k := range f.docOrder() {
			out = append(out, fmt.Sprintf("%s/%d", k.coll, k.id))
		}
	}
	return out
}

// TestFoldSkipsUnwritten: a document put and deleted again before a fold
// wrote it — in one chunk or across chunks, as a job put, claimed and
// acked between two folds — costs the fold no row, while one the tables
// hold, one put again after its delete, and one a sealed chunk writes do;
// the tables end as the units describe.
func TestFoldSkipsUnwritten(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "f.db")
	want := newModel()
	first := [][]Change{{{Op: OpCreate, Coll: "c", ID: 1, Body: []byte("schema")}}}
	for i := range int64(10) {
		first = append(first, []Change{{Op: OpPut, Coll: "c", ID: 1 + i, Body: fmt.Appendf(nil, "held %d", 1+i)}})
	}
	_, _, _, s := load(t, path, Options{}, defaultTuning)
	commitAll(t, s, 1, first)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	// Two units a chunk: the puts of 11–20 are in chunks before their
	// deletes.
	var units [][]Change
	for i := range int64(10) {
		units = append(units, []Change{{Op: OpPut, Coll: "c", ID: 11 + i, Body: fmt.Appendf(nil, "job %d", 11+i)}})
	}
	for i := range int64(10) {
		units = append(units, []Change{{Op: OpDelete, Coll: "c", ID: 11 + i}})
	}
	units = append(units,
		[]Change{{Op: OpPut, Coll: "c", ID: 21, Body: []byte("job 21")}, {Op: OpDelete, Coll: "c", ID: 21}},
		[]Change{{Op: OpPut, Coll: "c", ID: 22, Body: []byte("job 22")}, {Op: OpDelete, Coll: "c", ID: 22}, {Op: OpPut, Coll: "c", ID: 22, Body: []byte("job 22 again")}},
		[]Change{{Op: OpDelete, Coll: "c", ID: 5}},
		[]Change{{Op: OpPut, Coll: "c", ID: 23, Body: []byte("job 23")}},
	)
	want.applyAll(t, append(slices.Clone(first), units...))
	tune := tuning{foldBytes: 1 << 40, foldAge: time.Hour, foldChunk: 1 << 40, foldRows: 4, maxPending: 64 << 20, busyTimeout: time.Second}
	_, _, _, s = load(t, path, Options{}, tune)
	commitAll(t, s, uint64(len(first)+1), units)
	s.mu.Lock()
	for s.writing || s.syncing || len(s.unsynced) > 0 {
		s.waitChange()
	}
	s.mu.Unlock()
	if got, want := slices.Sorted(slices.Values(sealAll(s))), []string{"c/22", "c/23", "c/5"}; !slices.Equal(got, want) {
		t.Errorf("the folds write %v, want %v", got, want)
	}
	// 23 is now in a sealed chunk: its delete is a row.
	del := []Change{{Op: OpDelete, Coll: "c", ID: 23}}
	want.applyAll(t, [][]Change{del})
	seq := uint64(len(first) + len(units) + 1)
	commitAll(t, s, seq, [][]Change{del})
	if got := sealAll(s); len(slices.DeleteFunc(slices.Clone(got), func(d string) bool { return d != "c/23" })) != 2 {
		t.Errorf("after 23's delete the folds write %v, want c/23 twice", got)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s2 := loadSame(t, path, seq, "folded", want)
	if err := s2.Close(); err != nil {
		t.Fatal(err)
	}
	if docs, _, _ := tableCounts(t, path); docs != 10 {
		t.Fatalf("%d documents in the tables, want 10", docs)
	}
}

// TestFoldSkipsUnwrittenAfterParts: documents a fold's parts wrote before a
// failure (past the collection's next_id, which only the last part
// raises) are held by the tables: deleted after the next open, they are
// deleted rows, not skipped.
func TestFoldSkipsUnwrittenAfterParts(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "f.db")
	want := newModel()
	units := [][]Change{{{Op: OpCreate, Coll: "c", ID: 1, Body: []byte("schema")}}}
	var batch []Change
	for i := range int64(300) {
		batch = append(batch, Change{Op: OpPut, Coll: "c", ID: 1 + i, Body: fmt.Appendf(nil, "job %d", 1+i)})
	}
	units = append(units, batch)
	// The 3rd question at FaultFold fails: the creation's chunk folds,
	// then one part of 100 documents.
	tune := tuning{foldBytes: 1 << 40, foldAge: time.Hour, foldChunk: 1 << 40, foldRows: 100, maxPending: 64 << 20, busyTimeout: time.Second}
	_, _, _, s := load(t, path, Options{Fault: failFoldAt(3)}, tune)
	for i, u := range units {
		if err := s.Commit(uint64(i+1), u)(); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Close(); !errors.Is(err, errInjected) {
		t.Fatalf("Close with a failing fold answered %v", err)
	}
	if docs, _, folded := tableCounts(t, path); docs != 100 || folded != 1 {
		t.Fatalf("after a part: %d documents, folded_seq %d; want 100, 1", docs, folded)
	}
	var dels []Change
	for i := range int64(300) {
		dels = append(dels, Change{Op: OpDelete, Coll: "c", ID: 1 + i})
	}
	units = append(units, dels)
	want.applyAll(t, units)
	_, _, _, s = load(t, path, Options{}, defaultTuning)
	if err := s.Commit(3, dels)(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s2 := loadSame(t, path, 3, "folded", want)
	if err := s2.Close(); err != nil {
		t.Fatal(err)
	}
	if docs, _, _ := tableCounts(t, path); docs != 0 {
		t.Fatalf("%d documents in the tables, want 0", docs)
	}
}

// TestLatestPages: latestPages returns what was set for each id — the
// ids of a page apart, of pages apart, negative and the extremes — and
// drops a page once its last entry is deleted.
func TestLatestPages(t *testing.T) {
	t.Parallel()
	l := latestPages{}
	a, b := newFoldSet(), newFoldSet()
	ids := []int64{0, 1, pageIDs - 1, pageIDs, 5 * pageIDs, -1, -pageIDs, math.MinInt64, math.MaxInt64}
	for i, id := range ids {
		if l.get(id) != nil {
			t.Fatalf("id %d: set before any set", id)
		}
		l.set(id, []*foldSet{a, b}[i%2])
	}
	l.set(1, b) // again: still one entry
	for i, id := range ids {
		want := []*foldSet{a, b}[i%2]
		if id == 1 {
			want = b
		}
		if l.get(id) != want {
			t.Fatalf("id %d: got another chunk", id)
		}
	}
	for _, id := range ids {
		l.del(id)
		l.del(id) // again: nothing to do
		if l.get(id) != nil {
			t.Fatalf("id %d: still set after its delete", id)
		}
	}
	if len(l) != 0 {
		t.Fatalf("%d pages left with no entry", len(l))
	}
}

// TestFoldDeleteRanges: stretches of consecutive deletes, of every length
// around rangeMin, among documents that stay, and one long stretch, fold
// to exactly the documents not deleted — in one transaction, and in parts
// of 16 documents that cut stretches in two. Those of rangeMin ids or more
// go by their bounds (rangeSQL).
func TestFoldDeleteRanges(t *testing.T) {
	t.Parallel()
	for _, rows := range []int{1 << 20, 16} {
		t.Run(fmt.Sprintf("foldRows=%d", rows), func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "f.db")
			want := newModel()
			fill := []Change{{Op: OpCreate, Coll: "a", ID: 1, Body: []byte("schema")}, {Op: OpCreate, Coll: "b", ID: 1, Body: []byte("schema")}}
			for i := range int64(400) {
				fill = append(fill, Change{Op: OpPut, Coll: "a", ID: 1 + i, Body: fmt.Appendf(nil, "a %d", 1+i)})
				fill = append(fill, Change{Op: OpPut, Coll: "b", ID: 1 + i, Body: fmt.Appendf(nil, "b %d", 1+i)})
			}
			var dels []Change
			deleted := 0
			id := int64(1)
			for n := int64(1); n <= 9; n++ {
				for i := range n {
					dels = append(dels, Change{Op: OpDelete, Coll: "a", ID: id + i})
				}
				deleted += int(n)
				id += n + 1 + n%2 // a gap of one or two documents that stay
			}
			for i := range int64(100) { // and one long stretch
				dels = append(dels, Change{Op: OpDelete, Coll: "a", ID: 200 + i})
			}
			deleted += 100
			// In b, ids out of order within the unit: the fold sorts them.
			for _, i := range []int64{9, 5, 6, 8, 7, 1, 3} {
				dels = append(dels, Change{Op: OpDelete, Coll: "b", ID: i})
			}
			deleted += 7
			want.applyAll(t, [][]Change{fill, dels})
			s := foldByHand(t, path, fill, dels, rows)
			if s.foldTx.stmts[rangeSQL] == nil {
				t.Errorf("the fold did not use %q", rangeSQL)
			}
			reopenFolded(t, s, path, want)
			if docs, _, _ := tableCounts(t, path); docs != 800-deleted {
				t.Fatalf("%d documents in the tables, want %d", docs, 800-deleted)
			}
		})
	}
}

// filled returns the changes that create coll and put n documents in it,
// ids 1 to n, each body its word and its id.
func filled(coll string, n int64, word string) []Change {
	fill := []Change{{Op: OpCreate, Coll: coll, ID: 1, Body: []byte("schema")}}
	for id := int64(1); id <= n; id++ {
		fill = append(fill, Change{Op: OpPut, Coll: coll, ID: id, Body: fmt.Appendf(nil, "%s %d", word, id)})
	}
	return fill
}

// TestFoldChunkSizedByItsRoom: a chunk's maps are made for the documents
// it can hold, not for those of the last chunk sealed. After a put of
// thousands of documents is folded (its seal leaves a hint of thousands),
// each chunk of small units held maps made for thousands until the next
// fold: a quarter of a megabyte a chunk, under --sync always a chunk every
// few claims. The sizes are asked of the ids' slice (a map's are not
// told), made alike; the state stays the units'.
func TestFoldChunkSizedByItsRoom(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "f.db")
	want := newModel()
	fill := filled("jobs", 5000, "job")
	const rows = 64
	tune := tuning{foldBytes: 1 << 40, foldAge: time.Hour, foldChunk: 1 << 40, foldRows: rows, maxPending: 64 << 20, busyTimeout: time.Second}
	_, _, _, s := load(t, path, Options{}, tune)
	commitAll(t, s, 1, [][]Change{fill})
	units := [][]Change{fill}
	// Fold the fill by hand: its seal leaves the hint.
	foldAll(t, s)
	s.wmu.Unlock()
	if h := s.latest["jobs"].hint; h < 1000 {
		t.Fatalf("the fill's seal left a hint of %d; the test needs thousands", h)
	}
	// Claims of ten and acks of ten, many chunks of them, and one unit
	// bigger than a chunk's rows, which begins a chunk of its own.
	seq := uint64(2)
	for c := range int64(30) {
		var claim, ack []Change
		for i := range int64(10) {
			id := 1 + c*10 + i
			claim = append(claim, Change{Op: OpPut, Coll: "jobs", ID: id, Body: fmt.Appendf(nil, "claimed %d", id)})
			ack = append(ack, Change{Op: OpDelete, Coll: "jobs", ID: id})
		}
		units = append(units, claim, ack)
	}
	var big []Change
	for i := range int64(3 * rows) {
		big = append(big, Change{Op: OpPut, Coll: "jobs", ID: 1000 + i, Body: fmt.Appendf(nil, "big %d", i)})
	}
	units = append(units, big)
	// One at a time: a group is a unit.
	for i, u := range units[1:] {
		if err := s.Commit(seq+uint64(i), u)(); err != nil {
			t.Fatal(err)
		}
	}
	s.fmu.Lock()
	chunks := 0
	for _, f := range s.folds {
		cf := f.colls["jobs"]
		if cf == nil {
			continue
		}
		chunks++
		// Its first group's changes, or foldRows, bound its room: no
		// group here holds more than the big unit.
		if cap(cf.ids) > len(big)+1 {
			t.Errorf("a chunk of %d documents (%d rows) made its ids for %d; no group here holds more than %d changes", len(cf.docs), f.rows, cap(cf.ids), len(big))
		}
	}
	s.fmu.Unlock()
	if chunks < 3 {
		t.Fatalf("%d chunks hold the units; the test needs several", chunks)
	}
	want.applyAll(t, units)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s2 := loadSame(t, path, uint64(len(units)), "after the folds", want)
	if err := s2.Close(); err != nil {
		t.Fatal(err)
	}
}
