package store

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"log/slog"
	mrand "math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestTornWAL: a WAL cut short by 1 to 4 000 bytes (a torn last write)
// opens to a consistent prefix of the units, and the open logs what
// SQLite's recovery dropped.
func TestTornWAL(t *testing.T) {
	if testing.Short() {
		t.Skip("kills a child process")
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "f.db")
	acked := runAndKill(t, path, "always", "", 300)
	whole := checkCrashedQuiet(t, dir, path, acked)
	for _, cut := range []int64{1, 24, 1000, 4000} {
		t.Run(fmt.Sprint(cut), func(t *testing.T) {
			torn := filepath.Join(t.TempDir(), "torn.db")
			copyFile(t, path, torn)
			copyFile(t, path+"-wal", torn+"-wal")
			end := walEnd(t, torn+"-wal")
			if err := os.Truncate(torn+"-wal", end-cut); err != nil {
				t.Fatal(err)
			}
			var logged bytes.Buffer
			log := slog.New(slog.NewTextHandler(&logged, nil))
			got, seq, _, s := load(t, torn, Options{Log: log}, defaultTuning)
			defer s.Close()
			k := prefixOf(t, got, seq)
			if k > whole {
				t.Fatalf("units up to %d after the cut, %d before", k, whole)
			}
			if !strings.Contains(logged.String(), "never completed") || !strings.Contains(logged.String(), "dropped_frames=") {
				t.Fatalf("nothing logged of the dropped tail; the log:\n%s", logged.String())
			}
			t.Logf("cut %d bytes: units up to %d of %d kept; %s", cut, k, whole, strings.TrimSpace(logged.String()))
		})
	}
}

// walEnd answers where the WAL's current frames end: a WAL that SQLite
// restarted after a checkpoint keeps its older, longer tail, whose frames
// carry the previous salts and are ignored. A torn last write cuts the
// current frames, so the test cuts there (SQLite's WAL format: a 32-byte
// header with the page size at 8 and the salts at 16; each frame a 24-byte
// header, the salts at 8, then the page).
func walEnd(t *testing.T, path string) int64 {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(b) < 32 {
		t.Fatalf("%s: %d bytes, no WAL header", path, len(b))
	}
	page := int64(binary.BigEndian.Uint32(b[8:12]))
	salts := b[16:24]
	end := int64(32)
	for end+24+page <= int64(len(b)) && bytes.Equal(b[end+8:end+16], salts) {
		end += 24 + page
	}
	if end == 32 {
		t.Fatalf("%s: no current frame", path)
	}
	return end
}

// checkCrashedQuiet checks a copy of the crashed files (leaving the
// originals as the kill left them) and answers the last unit present.
func checkCrashedQuiet(t *testing.T, dir, path string, acked uint64) uint64 {
	t.Helper()
	cp := filepath.Join(dir, "check.db")
	copyFile(t, path, cp)
	copyFile(t, path+"-wal", cp+"-wal")
	return checkCrashed(t, cp, "always", acked)
}

// prefixOf checks that the units present are exactly 2..k for some k
// (nothing half there, no holes, Load's seq k), and answers k.
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
