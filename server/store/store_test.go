package store

import (
	"crypto/rand"
	"database/sql"
	"errors"
	"fmt"
	"io"
	mrand "math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
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
	got, at, _, s := load(t, path, Options{}, defaultTuning)
	if at != seq {
		s.Close()
		t.Fatalf("%s: seq %d, want %d", what, at, seq)
	}
	sameState(t, what, got, want)
	return s
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

func TestParseSync(t *testing.T) {
	for _, s := range []string{"always", "off", "1", "250", "3600000"} {
		m, err := ParseSync(s)
		if err != nil || m.String() != s {
			t.Errorf("ParseSync(%q) = %v, %v", s, m, err)
		}
	}
	if m, _ := ParseSync("250"); m.Interval != 250*time.Millisecond {
		t.Errorf("interval %v", m.Interval)
	}
	for _, s := range []string{"", "0", "-5", "1.5", "ALWAYS", "10ms", "3600001"} {
		if _, err := ParseSync(s); err == nil || !strings.Contains(err.Error(), "want always, off") {
			t.Errorf("ParseSync(%q): %v", s, err)
		}
	}
}

// TestRoundTrip commits a random script, closes (which folds), reopens and
// checks Load gives back exactly the live state, in canonical order. Small
// fold thresholds make folds happen mid-stream, between log rows.
func TestRoundTrip(t *testing.T) {
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

			got, seq, changes, s2 := load(t, path, Options{Sync: mode}, defaultTuning)
			defer s2.Close()
			if seq != 400 {
				t.Fatalf("seq %d, want 400", seq)
			}
			sameState(t, "after fold", got, want)
			if c := isCanonical(changes); !slices.Equal(c, want.lines()) {
				t.Fatalf("Load order is not canonical:\n%q", c)
			}
		})
	}
}

// TestReplay reopens a copy of the files taken before any fold, as a kill
// would leave them: the state comes back from the log alone. Then it commits
// more on top of the replayed log and checks the fold of both.
func TestReplay(t *testing.T) {
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
			got, seq, changes, s3 := load(t, crashed, Options{Sync: mode}, defaultTuning)
			defer s3.Close()
			if seq != 400 {
				t.Fatalf("seq %d, want 400", seq)
			}
			sameState(t, "replayed, extended and folded", got, want)
			if c := isCanonical(changes); !slices.Equal(c, want.lines()) {
				t.Fatalf("Load order is not canonical:\n%q", c)
			}
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

// until polls cond under the store's mu: the pipeline's state.
func until(t *testing.T, s *Store, what string, cond func() bool) {
	t.Helper()
	for start := time.Now(); ; time.Sleep(100 * time.Microsecond) {
		s.mu.Lock()
		ok := cond()
		s.mu.Unlock()
		if ok {
			return
		}
		if time.Since(start) > 10*time.Second {
			t.Fatalf("never: %s", what)
		}
	}
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
	h := newHeldSync()
	path := filepath.Join(t.TempDir(), "f.db")
	var told atomic.Int64 // OnCommit's fsync trues: the syncs, which fenec_store_fsyncs_total counts
	onCommit := func(_ time.Duration, _ int, fsync bool) {
		if fsync {
			told.Add(1)
		}
	}
	_, _, _, s := load(t, path, Options{Fault: h.fault, OnCommit: onCommit}, noFoldTuning)
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
		t.Fatalf("OnCommit told of %d syncs for the four units, want 2 (one sync made two groups durable)", n)
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

func TestBadFiles(t *testing.T) {
	dir := t.TempDir()
	random := filepath.Join(dir, "random")
	junk := make([]byte, 8192)
	rand.Read(junk)
	if err := os.WriteFile(random, junk, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(random, Options{}); err == nil || !strings.Contains(err.Error(), "not a Fenec store (not a SQLite database file)") {
		t.Errorf("random bytes: %v", err)
	}
	if b, _ := os.ReadFile(random); string(b) != string(junk) {
		t.Error("Open changed a file it refused")
	}

	other := filepath.Join(dir, "other.db")
	db, err := sql.Open("sqlite", other)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`CREATE TABLE t(x)`); err != nil {
		t.Fatal(err)
	}
	db.Close()
	if _, err := Open(other, Options{}); err == nil || !strings.Contains(err.Error(), "a SQLite database but not a Fenec store") {
		t.Errorf("other SQLite file: %v", err)
	}

	future := filepath.Join(dir, "future.db")
	s, err := Open(future, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.conn.ExecContext(t.Context(), `PRAGMA user_version = 99`); err != nil {
		t.Fatal(err)
	}
	s.Close()
	if _, err := Open(future, Options{}); err == nil || !strings.Contains(err.Error(), "format version 99") {
		t.Errorf("unknown version: %v", err)
	}

	if _, err := Open(filepath.Join(dir, "no/such/dir/f.db"), Options{}); err == nil {
		t.Error("Open in a missing directory answered nil")
	}
	if _, err := Open(dir, Options{Sync: SyncMode{Kind: SyncInterval}}); err == nil || !strings.Contains(err.Error(), "bad sync mode") {
		t.Errorf("zero interval: %v", err)
	}
}

func TestInUse(t *testing.T) {
	path := filepath.Join(t.TempDir(), "f.db")
	s, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := open(path, Options{}, tuning{busyTimeout: 50 * time.Millisecond}); err == nil || !strings.Contains(err.Error(), "in use") {
		t.Errorf("second Open: %v", err)
	}
}

func TestMemory(t *testing.T) {
	s, err := Open(":memory:", Options{})
	if err != nil {
		t.Fatal(err)
	}
	if seq, err := s.Load(func(Change) error { t.Fatal("memory store loaded something"); return nil }); seq != 0 || err != nil {
		t.Fatal(seq, err)
	}
	if err := s.Commit(1, []Change{{Op: OpMetaPut, Key: "k"}})(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
}

func TestLoadOnce(t *testing.T) {
	_, _, _, s := load(t, filepath.Join(t.TempDir(), "f.db"), Options{}, defaultTuning)
	defer s.Close()
	if _, err := s.Load(func(Change) error { return nil }); err == nil {
		t.Fatal("second Load answered nil")
	}
	s.Close()
	if err := s.Commit(1, nil)(); err != ErrClosed {
		t.Fatalf("Commit after Close: %v", err)
	}
}

func TestEncoding(t *testing.T) {
	units, _ := script(4, 200)
	var all []Change
	for _, u := range units {
		all = append(all, u...)
	}
	b := appendChanges(nil, all)
	var got []Change
	if err := decodeChanges(b, func(c Change) error { got = append(got, c); return nil }); err != nil {
		t.Fatal(err)
	}
	show := func(cs []Change) (out []string) {
		for _, c := range cs {
			out = append(out, fmt.Sprintf("%d %q %d %q %q %d", c.Op, c.Coll, c.ID, c.Key, c.Body, c.Expires))
		}
		return out
	}
	if !slices.Equal(show(got), show(all)) {
		t.Fatal("decode(encode(changes)) differs")
	}
	for i := range min(len(b), 3000) { // a truncated row is an error or a prefix, never a panic
		decodeChanges(b[:i], func(Change) error { return nil })
	}
	if err := decodeChanges([]byte{0x7f}, func(Change) error { return nil }); err == nil {
		t.Fatal("unknown op decoded")
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

// TestWALStaysOneFile: the store syncs SQLite's WAL through a descriptor
// of its own before it deletes folded log segments, which is only right
// while SQLite keeps writing that same file. Over enough folds that SQLite
// checkpoints and starts the WAL over several times, the WAL at the path
// is still the store's file.
func TestWALStaysOneFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "f.db")
	_, _, _, s := load(t, path, Options{}, tuning{foldBytes: 64 << 10, foldAge: 10 * time.Millisecond, foldChunk: 64 << 10, maxPending: 64 << 20, busyTimeout: time.Second, segBytes: 256 << 10})
	const units = 3000
	for i := uint64(1); i <= units; i++ {
		if err := s.Commit(i, []Change{{Op: OpMetaPut, Key: fmt.Sprint("k", i%500), Body: make([]byte, 2000)}})(); err != nil {
			t.Fatal(err)
		}
	}
	ours, err := s.wal.Stat()
	if err != nil {
		t.Fatal(err)
	}
	there, err := os.Stat(path + "-wal")
	if err != nil {
		t.Fatal(err)
	}
	st := s.Stats()
	if !os.SameFile(ours, there) {
		t.Fatal("the WAL at the path is not the file the store syncs")
	}
	// The folds wrote 6 MB of meta records or more (each fold each key's
	// record once); the WAL holds less than that once checkpoints
	// started it over.
	if there.Size() >= 6<<20 {
		t.Fatalf("the WAL was never started over: %d bytes after %d folds", there.Size(), st.Folds)
	}
	if st.Folds < 10 || st.Fsyncs < units {
		t.Fatalf("folds %d, syncs %d: want many folds, and a sync per unit", st.Folds, st.Fsyncs)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
}
