package engine

import (
	"fmt"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/fenecdb/fenec/server/store"
)

// heapLive returns the Go heap's live bytes after two collections.
func heapLive() int64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return int64(m.HeapAlloc)
}

// putInOrder puts n jobs whose run_at grows with their id, as a queue is
// filled, and two collections whose int @sorted and @ttl trees fill in
// order too.
func putInOrder(t testing.TB, db *DB, n int) {
	mustExec(t, db, jobsSchema)
	mustExec(t, db, `create collection plain (run_at timestamp, owner text, error text, n int @sorted)`)
	for i := 0; i < n; i += 1000 {
		var jobs, plain strings.Builder
		for k := i; k < min(i+1000, n); k++ {
			if k > i {
				jobs.WriteByte(',')
				plain.WriteByte(',')
			}
			fmt.Fprintf(&jobs, `{payload: {"to": "u%d"}, run_at: %d, attempts: 0}`, k, 1_700_000_000_000+k)
			fmt.Fprintf(&plain, `{n: %d, run_at: %d}`, k, 1_700_000_000_000+k)
		}
		mustExec(t, db, `put jobs [`+jobs.String()+`]`)
		mustExec(t, db, `put plain [`+plain.String()+`]`)
	}
}

// TestLoadCompactsTrees: a file's sorted indexes, filled in key order,
// load into indexes that cost no more than the same jobs put one batch
// after another — numSet fills its leaves in key order either way, and
// compaction packs them anew (compact.go) — and the loaded indexes then
// take every write as the put ones do: the same writes answer the same
// on both.
func TestLoadCompactsTrees(t *testing.T) {
	const n = 60_000
	file := filepath.Join(t.TempDir(), "c.db")
	db, err := Open(Options{File: file, Sync: store.SyncMode{Kind: store.SyncOff}})
	if err != nil {
		t.Fatal(err)
	}
	putInOrder(t, db, n)
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	before := heapLive()
	mem, clk := openMem(t)
	putInOrder(t, mem, n)
	put := heapLive() - before
	before = heapLive()
	loaded, err := Open(Options{File: file, Sync: store.SyncMode{Kind: store.SyncOff}, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	defer loaded.Close()
	load := heapLive() - before
	// Three numSets filled in order (jobs' run_at, plain's n and its
	// queue's own run_at): full leaves whether put or loaded, about 8
	// bytes an item, where a B-tree's put leaves were half empty (16 more
	// bytes an item than compacted).
	perJob := func(b int64) float64 { return float64(b) / n }
	t.Logf("heap per job (both collections): put %.0f bytes, loaded %.0f", perJob(put), perJob(load))
	if !raceEnabled && perJob(load) > perJob(put)+8 {
		t.Errorf("loaded: %.0f bytes of heap per job, put: %.0f; want the load's no more than 8 over", perJob(load), perJob(put))
	}

	// Writes after the load: claims from the front, jobs back with an
	// owner, acks, puts past the end and a run_at moved back.
	writes := []string{
		`set jobs {owner: "w1", run_at: 1800000000000} where run_at < 1700000000500`,
		`del jobs where owner = "w1" and id % 3 = 0`,
		`put jobs [{run_at: 1600000000000, attempts: 1}, {run_at: 1900000000000, attempts: 2}]`,
		`set jobs {run_at: null, error: "x"} where id % 97 = 5`,
		`set plain {owner: "w2", run_at: 1750000000000, n: n - 30000} where id % 11 = 0`,
		`del plain where id % 13 = 1`,
		`put plain [{n: 5, run_at: 1}, {n: null}]`,
	}
	reads := []string{
		`get jobs select id, run_at order run_at limit 50`, `get jobs select id order run_at desc limit 50`,
		`get jobs count where run_at > 1700000059000`, `get jobs select id where run_at = null`,
		`get plain select id, n order n limit 50`, `get plain select id order n desc limit 50`, `get plain count where n >= 40000`,
		`get plain select id where n = null`,
	}
	for _, w := range writes {
		mustExec(t, mem, w)
		mustExec(t, loaded, w)
	}
	for _, q := range reads {
		if a, b := answer(mustExec(t, mem, q)), answer(mustExec(t, loaded, q)); a != b {
			t.Errorf("%s: loaded %s, put %s", q, b, a)
		}
	}
	if a, b := fmt.Sprint(mem.Queues()), fmt.Sprint(loaded.Queues()); a != b {
		t.Errorf("queues: loaded %s, put %s", b, a)
	}
}
