package store

import (
	"crypto/rand"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

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

func TestBadFiles(t *testing.T) {
	t.Parallel()
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
	t.Parallel()
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
	t.Parallel()
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
	t.Parallel()
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
	t.Parallel()
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

// TestWALStaysOneFile: the store syncs SQLite's WAL through a descriptor
// of its own before it deletes folded log segments, which is only right
// while SQLite keeps writing that same file. Over enough folds that SQLite
// checkpoints and starts the WAL over several times, the WAL at the path
// is still the store's file.
func TestWALStaysOneFile(t *testing.T) {
	t.Parallel()
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
