package store

import (
	"context"
	"errors"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"
)

// TestCopyWhileCommitting: a copy taken while units are committed holds
// every unit committed before Copy was called and a whole prefix of the
// rest (no unit in part), opens as a store, and says which seq it holds.
func TestCopyWhileCommitting(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := filepath.Join(dir, "f.db")
	units, _ := script(7, 3000)
	tune := defaultTuning
	tune.foldChunk = 2 << 10 // many small folds while the copy runs
	tune.foldRows = 2        // chunks written in parts: a copy must not end between them
	tune.foldAge = time.Millisecond
	tune.copyPages = 2 // many steps, the writer let go between them
	s, err := open(path, Options{}, tune)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Load(func(Change) error { return nil }); err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	const before = 1500
	commitAll(t, s, 1, units[:before])
	var committed atomic.Int64
	committed.Store(before)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := before; i < len(units); i++ {
			if err := s.Commit(uint64(i+1), units[i])(); err != nil {
				t.Error(err)
				return
			}
			committed.Store(int64(i + 1))
		}
	}()
	steps := 0
	seq, err := s.Copy(t.Context(), filepath.Join(dir, "copy.db"), func(done, total int) {
		steps++
		if done > total {
			t.Errorf("progress %d of %d", done, total)
		}
		// Between two steps, more units are committed (and folded, the
		// fold age being 1 ms): the copy must take them whole or not.
		from, end := committed.Load(), time.Now().Add(5*time.Second)
		for committed.Load() < from+50 && committed.Load() < int64(len(units)) && time.Now().Before(end) {
			time.Sleep(100 * time.Microsecond)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	during := committed.Load()
	<-done
	if seq < before {
		t.Fatalf("the copy holds seq %d: want at least %d, committed before the copy began", seq, before)
	}
	if steps < 2 {
		t.Fatalf("the copy took %d steps: want several, the writer let go between them", steps)
	}
	t.Logf("copy holds seq %d; %d units were committed when it returned; %d steps", seq, during, steps)
	want := newModel()
	want.applyAll(t, units[:seq])
	c := loadSame(t, filepath.Join(dir, "copy.db"), seq, "the copy", want)
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestCopyGivenUp: a copy whose context ends between two steps returns the
// context's error and leaves the store as it was: commits go on, and the
// next copy holds them.
func TestCopyGivenUp(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	units, _ := script(3, 400)
	tune := defaultTuning
	tune.copyPages = 1
	s, err := open(filepath.Join(dir, "f.db"), Options{}, tune)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Load(func(Change) error { return nil }); err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	commitAll(t, s, 1, units[:200])
	ctx, cancel := context.WithCancel(t.Context())
	if _, err := s.Copy(ctx, filepath.Join(dir, "given-up.db"), func(int, int) { cancel() }); !errors.Is(err, context.Canceled) {
		t.Fatalf("a copy given up: %v", err)
	}
	commitAll(t, s, 201, units[200:])
	seq, err := s.Copy(t.Context(), filepath.Join(dir, "copy.db"), nil)
	if err != nil || seq != 400 {
		t.Fatalf("the next copy: seq %d, %v; want 400", seq, err)
	}
	want := newModel()
	want.applyAll(t, units)
	c := loadSame(t, filepath.Join(dir, "copy.db"), 400, "the copy after one given up", want)
	c.Close()
}
