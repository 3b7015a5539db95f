package store

import (
	"database/sql"
	"fmt"
	"io"
	mrand "math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// model is the state the changes describe, kept the simple way; Load's
// output applied to an empty model must equal the model of what was
// committed.
type model struct {
	order []string // live collections in creation order
	colls map[string]*mcoll
	meta  map[string]Change
}

type mcoll struct {
	schema string
	next   int64
	docs   map[int64]string
}

func newModel() *model { return &model{colls: map[string]*mcoll{}, meta: map[string]Change{}} }

// applyAll applies every change of units to m, in order.
func (m *model) applyAll(t *testing.T, units [][]Change) {
	t.Helper()
	for _, u := range units {
		for _, c := range u {
			if err := m.apply(c); err != nil {
				t.Fatal(err)
			}
		}
	}
}

func (m *model) apply(c Change) error {
	switch c.Op {
	case OpCreate:
		m.drop(c.Coll)
		m.order = append(m.order, c.Coll)
		m.colls[c.Coll] = &mcoll{schema: string(c.Body), next: c.ID, docs: map[int64]string{}}
	case OpDrop:
		m.drop(c.Coll)
	case OpPut, OpDelete:
		mc := m.colls[c.Coll]
		if mc == nil {
			return fmt.Errorf("%v on unknown collection %q", c.Op, c.Coll)
		}
		if c.Op == OpPut {
			mc.docs[c.ID] = string(c.Body)
			mc.next = max(mc.next, c.ID+1)
		} else {
			delete(mc.docs, c.ID)
		}
	case OpMetaPut:
		m.meta[c.Key] = Change{Op: OpMetaPut, Key: c.Key, Body: []byte(string(c.Body)), Expires: c.Expires}
	case OpMetaDelete:
		delete(m.meta, c.Key)
	}
	return nil
}

func (m *model) drop(name string) {
	delete(m.colls, name)
	m.order = slices.DeleteFunc(m.order, func(n string) bool { return n == name })
}

// lines is the canonical listing of m: what Load gives for a folded store.
func (m *model) lines() []string {
	var out []string
	for _, name := range m.order {
		mc := m.colls[name]
		out = append(out, fmt.Sprintf("create %s next=%d schema=%q", name, mc.next, mc.schema))
		for _, id := range slices.Sorted(mapKeys(mc.docs)) {
			out = append(out, fmt.Sprintf("put %s/%d %q", name, id, mc.docs[id]))
		}
	}
	for _, k := range slices.Sorted(mapKeys(m.meta)) {
		out = append(out, fmt.Sprintf("meta %s %q expires=%d", k, m.meta[k].Body, m.meta[k].Expires))
	}
	return out
}

func mapKeys[K comparable, V any](m map[K]V) func(func(K) bool) {
	return func(yield func(K) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// script makes n units of random but valid changes, and the model they
// leave behind.
func script(seed uint64, n int) ([][]Change, *model) {
	r := mrand.New(mrand.NewPCG(seed, 1))
	m := newModel()
	var units [][]Change
	emit := func(u []Change) {
		for _, c := range u {
			if err := m.apply(c); err != nil {
				panic(err)
			}
		}
		units = append(units, u)
	}
	emit([]Change{{Op: OpCreate, Coll: "a", ID: 1, Body: []byte("schema a")}, {Op: OpCreate, Coll: "b", ID: 1}})
	body := func() []byte {
		if r.IntN(20) == 0 {
			return nil // an empty document survives as empty
		}
		return []byte(strings.Repeat(string(rune('a'+r.IntN(26))), 1+r.IntN(300)))
	}
	for len(units) < n {
		var u []Change
		name := []string{"a", "b", "c"}[r.IntN(3)]
		mc := m.colls[name]
		switch k := r.IntN(20); {
		case mc == nil || k == 0:
			if mc != nil {
				u = append(u, Change{Op: OpDrop, Coll: name})
			}
			if r.IntN(3) > 0 {
				u = append(u, Change{Op: OpCreate, Coll: name, ID: 1, Body: []byte("schema " + name)})
			}
		case k < 10:
			for range 1 + r.IntN(5) {
				id := mc.next
				if len(mc.docs) > 0 && r.IntN(3) == 0 {
					id = 1 + r.Int64N(mc.next-1)
				}
				u = append(u, Change{Op: OpPut, Coll: name, ID: id, Body: body()})
				mc.next = max(mc.next, id+1) // so the next put of this unit takes a new id
			}
		case k < 13:
			for id := range mc.docs {
				u = append(u, Change{Op: OpDelete, Coll: name, ID: id})
				break
			}
		case k < 15:
			// Put then delete within one unit: the fold never writes it.
			u = append(u, Change{Op: OpPut, Coll: name, ID: mc.next, Body: body()},
				Change{Op: OpDelete, Coll: name, ID: mc.next})
		case k < 18:
			u = append(u, Change{Op: OpMetaPut, Key: fmt.Sprintf("k%d", r.IntN(8)), Body: body(), Expires: r.Int64N(1e13)})
		default:
			u = append(u, Change{Op: OpMetaDelete, Key: fmt.Sprintf("k%d", r.IntN(8))})
		}
		emit(u)
	}
	return units, m
}

// load opens path, Loads it into a model and returns the model, the seq,
// the raw changes Load gave, and the open store.
func load(t *testing.T, path string, opts Options, tune tuning) (*model, uint64, []Change, *Store) {
	t.Helper()
	s, err := open(path, opts, tune)
	if err != nil {
		t.Fatal(err)
	}
	m := newModel()
	var got []Change
	seq, err := s.Load(func(c Change) error {
		got = append(got, c)
		return m.apply(c)
	})
	if err != nil {
		t.Fatal(err)
	}
	return m, seq, got, s
}

// commitAll commits units with seqs from first on, waiting after every
// tableCounts reads the file's folded tables directly: its documents, its
// meta records and folded_seq.
func tableCounts(t *testing.T, path string) (docs, meta, folded int) {
	t.Helper()
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	err = db.QueryRow(`SELECT (SELECT count(*) FROM docs), (SELECT count(*) FROM meta), (SELECT value FROM state WHERE key = 'folded_seq')`).Scan(&docs, &meta, &folded)
	if err != nil {
		t.Fatal(err)
	}
	return docs, meta, folded
}

// loadSame opens path and checks that it holds want at seq, what naming
// the state in a failure; the caller closes the store.
func loadSame(t *testing.T, path string, seq uint64, what string, want *model) *Store {
	t.Helper()
	s, _ := loadChanges(t, path, seq, what, want)
	return s
}

// loadFolded is loadSame for a file whose log is all folded: Load then
// hands the state over in the canonical order.
func loadFolded(t *testing.T, path string, seq uint64, what string, want *model) *Store {
	t.Helper()
	s, changes := loadChanges(t, path, seq, what, want)
	if c := isCanonical(changes); !slices.Equal(c, want.lines()) {
		s.Close()
		t.Fatalf("%s: Load order is not canonical:\n%q", what, c)
	}
	return s
}

func loadChanges(t *testing.T, path string, seq uint64, what string, want *model) (*Store, []Change) {
	t.Helper()
	got, at, changes, s := load(t, path, Options{}, defaultTuning)
	if at != seq {
		s.Close()
		t.Fatalf("%s: seq %d, want %d", what, at, seq)
	}
	sameState(t, what, got, want)
	return s, changes
}

// seventh so that they make many groups.
func commitAll(t *testing.T, s *Store, first uint64, units [][]Change) {
	t.Helper()
	var waits []func() error
	for i, u := range units {
		waits = append(waits, s.Commit(first+uint64(i), u))
		if i%7 == 6 || i == len(units)-1 {
			for _, w := range waits {
				if err := w(); err != nil {
					t.Fatal(err)
				}
			}
			waits = waits[:0]
		}
	}
}

func sameState(t *testing.T, what string, got, want *model) {
	t.Helper()
	g, w := got.lines(), want.lines()
	if !slices.Equal(g, w) {
		t.Fatalf("%s: state differs\n got %d lines: %.1000q\nwant %d lines: %.1000q", what, len(g), g, len(w), w)
	}
}

// isCanonical reports whether Load gave exactly the folded listing: the log
// was empty.
func isCanonical(changes []Change) []string {
	m := newModel()
	for _, c := range changes {
		m.apply(c)
	}
	var out []string
	for _, c := range changes {
		switch c.Op {
		case OpCreate:
			out = append(out, fmt.Sprintf("create %s next=%d schema=%q", c.Coll, c.ID, c.Body))
		case OpPut:
			out = append(out, fmt.Sprintf("put %s/%d %q", c.Coll, c.ID, c.Body))
		case OpMetaPut:
			out = append(out, fmt.Sprintf("meta %s %q expires=%d", c.Key, c.Body, c.Expires))
		default:
			out = append(out, "not canonical: "+fmt.Sprint(c.Op))
		}
	}
	return out
}

var modes = []SyncMode{{Kind: SyncAlways}, {Kind: SyncInterval, Interval: 5 * time.Millisecond}, {Kind: SyncOff}}

// TestRoundTrip commits a random script, closes (which folds), reopens and
// checks Load gives back exactly the live state, in canonical order. Small
// fold thresholds make folds happen mid-stream, between log rows.
func TestRoundTrip(t *testing.T) {
	t.Parallel()
	for _, mode := range modes {
		t.Run(mode.String(), func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "f.db")
			units, want := script(1, 400)
			_, seq, _, s := load(t, path, Options{Sync: mode}, tuning{foldBytes: 2048, foldAge: time.Millisecond, maxPending: 4096, busyTimeout: time.Second})
			if seq != 0 {
				t.Fatalf("new store seq %d", seq)
			}
			commitAll(t, s, 1, units)
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			st := s.Stats()
			if st.Commits != 400 || st.LogBytes != 0 || st.Folds == 0 {
				t.Fatalf("stats %+v", st)
			}
			t.Logf("%d units, %d changes, %d folds, %d fsyncs", st.Commits, st.Changes, st.Folds, st.Fsyncs)
			if err := s.Close(); err != nil {
				t.Fatalf("second Close: %v", err)
			}

			loadFolded(t, path, 400, "after fold", want).Close()
		})
	}
}

// TestReplay reopens a copy of the files taken before any fold, as a kill
// would leave them: the state comes back from the log alone. Then it commits
// more on top of the replayed log and checks the fold of both.
func TestReplay(t *testing.T) {
	t.Parallel()
	noFold := tuning{foldBytes: 1 << 40, foldAge: time.Hour, maxPending: 1, busyTimeout: time.Second}
	for _, mode := range modes {
		t.Run(mode.String(), func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "f.db")
			units, want := script(2, 300)
			_, _, _, s := load(t, path, Options{Sync: mode}, noFold)
			defer s.Close()
			commitAll(t, s, 1, units)
			for s.Stats().Commits < 300 { // interval/off: written in the background
				time.Sleep(time.Millisecond)
			}
			if st := s.Stats(); st.Folds != 0 || st.LogBytes == 0 {
				t.Fatalf("stats %+v", st)
			}
			crashed := filepath.Join(dir, "crashed.db")
			copyStore(t, path, crashed)

			got, seq, changes, s2 := load(t, crashed, Options{Sync: mode}, defaultTuning)
			if seq != 300 {
				t.Fatalf("seq %d, want 300", seq)
			}
			sameState(t, "replayed log", got, want)
			if c := isCanonical(changes); slices.Equal(c, want.lines()) {
				t.Fatal("Load answered a folded listing; the log was not replayed")
			}
			if st := s2.Stats(); st.LogBytes == 0 {
				t.Fatalf("stats after replay %+v", st)
			}

			more, _ := script(3, 100)
			// The second script re-creates a and b first, so it applies on
			// top of the first.
			for _, u := range more {
				for _, c := range u {
					if err := want.apply(c); err != nil {
						t.Fatal(err)
					}
				}
			}
			commitAll(t, s2, 301, more)
			if err := s2.Close(); err != nil {
				t.Fatal(err)
			}
			loadFolded(t, crashed, 400, "replayed, extended and folded", want).Close()
		})
	}
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	src, err := os.Open(from)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	dst, err := os.Create(to)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(dst, src); err != nil {
		t.Fatal(err)
	}
	if err := dst.Close(); err != nil {
		t.Fatal(err)
	}
}

// breakStore makes every later write to the log fail in the kernel: the
// segment the next record goes to is a descriptor open only for reading.
func breakStore(t *testing.T, s *Store) {
	t.Helper()
	ro, err := os.Open(os.DevNull)
	if err != nil {
		t.Fatal(err)
	}
	s.wmu.Lock()
	s.segs = append(s.segs, &segment{path: os.DevNull, f: ro})
	s.wmu.Unlock()
}

const brokenWrite = "bad file descriptor"

func TestFailure(t *testing.T) {
	t.Parallel()
	t.Run("always", func(t *testing.T) {
		_, _, _, s := load(t, filepath.Join(t.TempDir(), "f.db"), Options{}, defaultTuning)
		put := []Change{{Op: OpMetaPut, Key: "k", Body: []byte("v")}}
		if err := s.Commit(1, put)(); err != nil {
			t.Fatal(err)
		}
		breakStore(t, s)
		if err := s.Commit(2, put)(); err == nil || !strings.Contains(err.Error(), brokenWrite) {
			t.Fatalf("wait answered %v", err)
		}
		if err := s.Commit(3, put)(); err == nil || !strings.Contains(err.Error(), brokenWrite) {
			t.Fatalf("later wait answered %v", err)
		}
		if st := s.Stats(); st.Failed == nil || st.Commits != 1 {
			t.Fatalf("stats %+v", st)
		}
		if err := s.Close(); err == nil {
			t.Fatal("Close of a failed store answered nil")
		}
	})
	t.Run("interval", func(t *testing.T) {
		_, _, _, s := load(t, filepath.Join(t.TempDir(), "f.db"), Options{Sync: SyncMode{Kind: SyncInterval, Interval: time.Millisecond}}, defaultTuning)
		breakStore(t, s)
		put := []Change{{Op: OpMetaPut, Key: "k", Body: []byte("v")}}
		// The writer's lock held, the committer cannot write the unit
		// before its wait is called: without it, a wait called a tick
		// late (a loaded machine, -race) found the store already failed
		// by that write, and answered the failure, as it should then.
		s.wmu.Lock()
		answered := make(chan error, 1)
		go func() { answered <- s.Commit(1, put)() }()
		select {
		case err := <-answered:
			s.wmu.Unlock()
			if err != nil {
				t.Fatalf("interval wait answered %v before the write", err)
			}
		case <-time.After(10 * time.Second):
			s.wmu.Unlock()
			t.Fatal("interval wait waited for the write")
		}
		for deadline := time.Now().Add(10 * time.Second); s.Stats().Failed == nil; {
			if time.Now().After(deadline) {
				t.Fatal("the committer's write to the broken log did not fail the store within 10 s")
			}
			time.Sleep(time.Millisecond)
		}
		if err := s.Commit(2, put)(); err == nil || !strings.Contains(err.Error(), brokenWrite) {
			t.Fatalf("later wait answered %v", err)
		}
		if err := s.Close(); err == nil {
			t.Fatal("Close of a failed store answered nil")
		}
	})
}
