package store

import (
	"bytes"
	"fmt"
	mrand "math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// prefixOf checks that the units present are exactly 2..k for some k
// (nothing half there, no holes, Load's seq k), and returns k.
func prefixOf(t *testing.T, got *model, seq uint64) uint64 {
	t.Helper()
	c := got.colls["c"]
	if c == nil {
		t.Fatalf("collection c is gone (seq %d)", seq)
	}
	var k uint64
	for i := uint64(2); ; i++ {
		want := fmt.Sprintf("unit %d %s", i, strings.Repeat("x", 100))
		a, okA := c.docs[int64(2*i)]
		b, okB := c.docs[int64(2*i+1)]
		m, okM := got.meta[fmt.Sprint("m", i)]
		if !okA && !okB && !okM {
			break
		}
		if !okA || !okB || !okM || a != want || b != want || string(m.Body) != want {
			t.Fatalf("unit %d is half there: docs %v %v, meta %v", i, okA, okB, okM)
		}
		k = i
	}
	if n := uint64(len(c.docs)); n != 2*(k-1) {
		t.Fatalf("units 2..%d present, but %d documents (a hole or a stray)", k, n)
	}
	if seq != k {
		t.Fatalf("Load answered seq %d, units up to %d present", seq, k)
	}
	return k
}

// TestDamagedFile: random bytes flipped in a cleanly closed file make Open
// refuse it with a clear message, or (a flip that lands in a document's
// bytes, which SQLite does not check) load every document: never a part
// of them as if whole.
func TestDamagedFile(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := filepath.Join(dir, "f.db")
	_, _, _, s := load(t, path, Options{Sync: SyncMode{Kind: SyncOff}}, defaultTuning)
	const n = 5000
	units := [][]Change{{{Op: OpCreate, Coll: "c", ID: 1}}}
	for i := int64(1); i <= n; i++ {
		units = append(units, []Change{{Op: OpPut, Coll: "c", ID: i, Body: []byte(fmt.Sprintf("document %d %s", i, strings.Repeat("y", 80)))}})
	}
	commitAll(t, s, 1, units)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	clean, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	refused := 0
	for trial := range 12 {
		r := mrand.New(mrand.NewPCG(uint64(trial), 7))
		b := bytes.Clone(clean)
		for range 20 {
			b[100+r.IntN(len(b)-100)] ^= byte(1 + r.IntN(255)) // past SQLite's file header
		}
		damaged := filepath.Join(t.TempDir(), "d.db")
		if err := os.WriteFile(damaged, b, 0o644); err != nil {
			t.Fatal(err)
		}
		s, err := open(damaged, Options{}, tuning{foldBytes: 1 << 40, foldAge: time.Hour, foldChunk: 1 << 20, maxPending: 64 << 20, busyTimeout: time.Second})
		if err != nil {
			if !strings.Contains(err.Error(), "is damaged and was not opened") && !strings.Contains(err.Error(), "not a Fenec store") {
				t.Fatalf("trial %d: refused without saying why clearly: %v", trial, err)
			}
			refused++
			continue
		}
		docs := 0
		_, err = s.Load(func(c Change) error {
			if c.Op == OpPut {
				docs++
			}
			return nil
		})
		s.Close()
		if err == nil && docs != n {
			t.Fatalf("trial %d: opened and loaded %d of %d documents, with no error", trial, docs, n)
		}
	}
	if refused == 0 {
		t.Fatal("no damaged copy was refused: the trials did not damage the structure")
	}
	t.Logf("%d of 12 damaged copies refused at open; the rest loaded all %d documents or failed loading", refused, n)
}
