package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fenecdb/fenec/server/httpapi/apitest"
)

// fenecCmd runs bin with args (a command other than serve) and returns
// its output; failed says whether it exited non-zero.
func fenecCmd(t *testing.T, env []string, args ...string) (out string, failed bool) {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), env...)
	b, err := cmd.CombinedOutput()
	if _, ok := err.(*exec.ExitError); err != nil && !ok {
		t.Fatal(err)
	}
	return string(b), err != nil
}

func mustFenec(t *testing.T, env []string, args ...string) string {
	t.Helper()
	out, failed := fenecCmd(t, env, args...)
	if failed {
		t.Fatalf("fenec %s: %s", strings.Join(args, " "), out)
	}
	return out
}

// TestBackupUnderLoad: 16 writers and 2 claim/ack workers run while
// `fenec backup` copies the database; the copy, restored with `fenec
// restore` and served, holds every write answered before the backup
// began, and each batch whole or not at all. It logs the claims' p99
// while the backup ran.
func TestBackupUnderLoad(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	const token = "operator-token-for-the-backup-test"
	p, c := start(t, "--file", filepath.Join(dir, "live.db"), "--token", token)
	c.Token = token
	c.MustQuery("create collection items (n int @unique, pad text)")
	c.MustQuery("create collection pairs (n int @unique)")
	c.MustQuery("create collection jobs (run_at timestamp @sorted, owner text, pad text)")
	// Some bulk, so that the copy takes many steps (of 64 pages): 10 MB
	// or so, some forty steps.
	pad := strings.Repeat("x", 1000)
	for range 5 {
		docs := make([]map[string]any, 2000)
		for i := range docs {
			docs[i] = map[string]any{"run_at": 0, "pad": pad}
		}
		c.MustQuery("put jobs $1", docs)
	}

	var (
		stop   atomic.Bool
		next   atomic.Int64
		mu     sync.Mutex
		acked  []ackedAt // writes answered, and when
		claims []claimAt
		wg     sync.WaitGroup
	)
	deadline := time.Now().Add(60 * time.Second)
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cl := &apitest.Client{T: t, Base: c.Base, Token: token}
			for !stop.Load() && time.Now().Before(deadline) {
				n := next.Add(1)
				// Two collections in one batch: the copy holds both or neither.
				r, err := cl.Do("POST", "/batch", map[string]any{"statements": []map[string]any{
					{"query": "insert items {n: $1, pad: $2}", "params": []any{n, "p"}},
					{"query": "insert pairs {n: $1}", "params": []any{n}},
				}}, nil)
				if err != nil || r.Status != 200 {
					t.Errorf("write %d: %v %v", n, err, r)
					return
				}
				mu.Lock()
				acked = append(acked, ackedAt{n, time.Now()})
				mu.Unlock()
			}
		}()
	}
	for w := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cl := &apitest.Client{T: t, Base: c.Base, Token: token}
			owner := fmt.Sprintf("w%d", w)
			for !stop.Load() && time.Now().Before(deadline) {
				began := time.Now()
				r, err := cl.Query("set jobs {owner: $1, run_at: now() + 30000} where run_at <= now() order run_at limit 10 returning id", owner)
				took := time.Since(began)
				if err != nil || r.Status != 200 {
					t.Errorf("claim: %v %v", err, r)
					return
				}
				mu.Lock()
				claims = append(claims, claimAt{began, took})
				mu.Unlock()
				var got []struct{ ID int64 }
				r.JSON(t, &got)
				for _, j := range got {
					cl.MustQuery("del jobs where id = $1 and owner = $2 require 1", j.ID, owner)
				}
			}
		}()
	}
	defer func() { stop.Store(true); wg.Wait() }()
	// The backup begins once the load runs.
	loadFrom := time.Now()
	for (next.Load() < 500 || time.Since(loadFrom) < time.Second) && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	backupFile := filepath.Join(dir, "backup.db")
	began := time.Now()
	out := mustFenec(t, []string{"FENEC_TOKEN=" + token}, "backup", "--from", c.Base, "--to", backupFile)
	ended := time.Now()
	stop.Store(true)
	wg.Wait()
	t.Logf("%s", strings.TrimSpace(out))
	if !strings.Contains(out, "integrity ok") || !strings.Contains(out, "Fenec-Seq") {
		t.Fatalf("fenec backup said %q", out)
	}

	var during, earlier []time.Duration
	var before []int64
	for _, cl := range claims {
		if !cl.began.Before(began) && cl.began.Before(ended) {
			during = append(during, cl.took)
		} else if cl.began.Before(began) {
			earlier = append(earlier, cl.took)
		}
	}
	// The writes answered in each half second around the backup.
	var timeline []string
	for from := began.Add(-time.Second); from.Before(ended.Add(time.Second)); from = from.Add(500 * time.Millisecond) {
		n := 0
		for _, a := range acked {
			if !a.at.Before(from) && a.at.Before(from.Add(500*time.Millisecond)) {
				n++
			}
		}
		timeline = append(timeline, fmt.Sprint(n))
	}
	t.Logf("writes answered per 0.5 s, from 1 s before the backup to 1 s after: %s", strings.Join(timeline, " "))
	slices.Sort(earlier)
	if len(earlier) > 0 {
		t.Logf("before the backup: %d claims, p50 %v, p99 %v", len(earlier), earlier[len(earlier)/2], earlier[len(earlier)*99/100])
	}
	for _, a := range acked {
		if a.at.Before(began) {
			before = append(before, a.n)
		}
	}
	slices.Sort(during)
	if len(during) > 0 {
		t.Logf("backup took %v; %d writes answered before it began; %d claims during it, p50 %v, p99 %v, max %v",
			ended.Sub(began).Round(time.Millisecond), len(before), len(during), during[len(during)/2], during[len(during)*99/100], during[len(during)-1])
	}
	p.Stop(10 * time.Second)

	restored := filepath.Join(dir, "restored.db")
	mustFenec(t, nil, "restore", backupFile, "--to", restored)
	_, rc := start(t, "--file", restored)
	items, pairs := ns(t, rc, "items"), ns(t, rc, "pairs")
	if !slices.Equal(items, pairs) {
		t.Fatalf("the copy holds %d items and %d pairs: a batch was copied in part", len(items), len(pairs))
	}
	for _, n := range before {
		if _, ok := slices.BinarySearch(items, n); !ok {
			t.Fatalf("write %d was answered before the backup began but is not in the copy (%d items)", n, len(items))
		}
	}
	t.Logf("the copy holds %d of the batches (%d answered before it began)", len(items), len(before))
}

type ackedAt struct {
	n  int64
	at time.Time
}

type claimAt struct {
	began time.Time
	took  time.Duration
}

// ns returns the sorted n of every document of coll.
func ns(t *testing.T, c *apitest.Client, coll string) []int64 {
	t.Helper()
	var rows []struct{ N int64 }
	c.MustQuery("get "+coll+" select n").JSON(t, &rows)
	out := make([]int64, len(rows))
	for i, r := range rows {
		out[i] = r.N
	}
	slices.Sort(out)
	return out
}

// TestRestoreRefuses: fenec restore changes nothing when the backup is not
// sound, when the target is in use, or when it exists without --force;
// with --force it replaces the file and drops the old log and WAL.
func TestRestoreRefuses(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	live := filepath.Join(dir, "live.db")
	p, c := start(t, "--file", live)
	c.MustQuery("create collection a (n int)")
	c.MustQuery("put a {n: 1}")
	backup := filepath.Join(dir, "b.db")
	mustFenec(t, nil, "backup", "--from", c.Base, "--to", backup)
	c.MustQuery("put a {n: 2}")

	if out, failed := fenecCmd(t, nil, "restore", backup, "--to", live, "--force"); !failed || !strings.Contains(out, "in use") {
		t.Fatalf("restore over a served file: %s", out)
	}
	p.Stop(10 * time.Second)
	if out, failed := fenecCmd(t, nil, "restore", backup, "--to", live); !failed || !strings.Contains(out, "--force") {
		t.Fatalf("restore over an existing file: %s", out)
	}
	bad := filepath.Join(dir, "bad.db")
	raw, _ := os.ReadFile(backup)
	for i := 4096; i < 4096+64; i++ {
		raw[i] = 0xff // the second page's B-tree header, damaged
	}
	os.WriteFile(bad, raw, 0o644)
	if out, failed := fenecCmd(t, nil, "restore", bad, "--to", filepath.Join(dir, "new.db")); !failed || !strings.Contains(out, "not a sound backup") {
		t.Fatalf("restore of a damaged backup: %s", out)
	}
	if _, err := os.Stat(filepath.Join(dir, "new.db")); err == nil {
		t.Fatal("a damaged backup was restored")
	}
	// The live file still holds both writes; forced, it holds the backup's one.
	p, c = start(t, "--file", live)
	if got := ns(t, c, "a"); len(got) != 2 {
		t.Fatalf("after the refusals the file holds %v", got)
	}
	p.Stop(10 * time.Second)
	mustFenec(t, nil, "restore", backup, "--to", live, "--force")
	if left, _ := filepath.Glob(live + "-*"); len(left) > 0 {
		t.Fatalf("left beside the restored file: %v", left)
	}
	_, c = start(t, "--file", live)
	if got := ns(t, c, "a"); !slices.Equal(got, []int64{1}) {
		t.Fatalf("restored with --force, the file holds %v, want the backup's [1]", got)
	}
}

// TestExportImportRoundTrip: a database with every field type (and nulls,
// a kept id gap, an empty collection) exported and imported into a new
// server answers every `get` byte for byte as the first; imported again,
// every chunk is replayed and nothing changes.
func TestExportImportRoundTrip(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	_, a := start(t, "--file", filepath.Join(dir, "a.db"))
	_, b := start(t, "--file", filepath.Join(dir, "b.db"))
	a.MustQuery("create collection t (j json, ts timestamp @sorted, g geo @geo, n int @hash, s text @unique, f float, b bool)")
	a.MustQuery("create collection empty (x int @sorted)")
	a.MustQuery("create collection many (n int)")
	// Sent as raw JSON: the numbers reach the server as written.
	r, err := a.Do("POST", "/query", `{"query": "put t $1", "params": [[
		{"j": {"a": [1, 2.50, "x", null, 12345678901234567890, 1e300, {"deep": {"k": true}}]}, "ts": "2026-01-05T08:00:00.123Z", "g": [-0.1276, 51.5072], "n": 9007199254740991, "s": "é\u0000\n\u2028\"", "f": 1.0, "b": true},
		{"id": 10, "j": "text in json", "f": 1e300, "b": false},
		{"j": null, "n": null},
		{"j": 0.1, "f": 0.30000000000000004, "n": -9223372036854775808, "ts": 0, "g": [180, -90], "s": ""},
		{"j": [], "ts": "9999-12-31T23:59:59.999Z", "f": -0.0},
		{"id": 100000, "s": "past a window of ids with none"}
	]]}`, nil)
	if err != nil || r.Status != 200 {
		t.Fatalf("%v %v", err, r)
	}
	a.MustQuery("del t where id = 11") // a gap in the ids
	many := make([]map[string]any, 5000)
	for i := range many {
		many[i] = map[string]any{"n": i}
	}
	a.MustQuery("put many $1", many)

	export := filepath.Join(dir, "export.jsonl")
	mustFenec(t, nil, "export", "--from", a.Base, "--out", export)
	out := mustFenec(t, nil, "import", "--to", b.Base, export)
	if !strings.Contains(out, "5005 documents in 5 chunks (0 replayed") {
		t.Fatalf("fenec import said %q", out)
	}
	same := func(what string) {
		t.Helper()
		ca, cb := a.MustQuery("get t"), b.MustQuery("get t")
		if string(ca.Body) != string(cb.Body) {
			t.Fatalf("%s: get t answers\n%s\nthere, and\n%s\nhere", what, ca.Body, cb.Body)
		}
		for _, q := range []string{"get many", "get empty", "get t select id where ts >= 0 order ts", "get t count"} {
			if x, y := a.MustQuery(q).Body, b.MustQuery(q).Body; string(x) != string(y) {
				t.Fatalf("%s: %s differs: %.300s against %.300s", what, q, x, y)
			}
		}
		ra, _ := a.Do("GET", "/collections", nil, nil)
		rb, _ := b.Do("GET", "/collections", nil, nil)
		if string(ra.Body) != string(rb.Body) {
			t.Fatalf("%s: the collections differ:\n%s\n%s", what, ra.Body, rb.Body)
		}
	}
	same("imported")
	seq := b.MustQuery("put many {n: -1}").Header.Get("Fenec-Seq")
	b.MustQuery("del many where n = -1")
	out = mustFenec(t, nil, "import", "--to", b.Base, export)
	if !strings.Contains(out, "in 5 chunks (5 replayed") {
		t.Fatalf("imported again, fenec import said %q: want every chunk replayed", out)
	}
	after := b.MustQuery("put many {n: -2}").Header.Get("Fenec-Seq")
	b.MustQuery("del many where n = -2")
	if fmt.Sprint(atoi(t, after)-atoi(t, seq)) != "2" {
		t.Fatalf("Fenec-Seq %s before the second import, %s after: it wrote", seq, after)
	}
	same("imported twice")
	// One collection alone, to stdout.
	one := mustFenec(t, nil, "export", "--from", a.Base, "--collection", "empty")
	if strings.TrimSpace(one) != `{"collection":"empty","fields":[{"name":"x","type":"int","index":"sorted"}]}` {
		t.Fatalf("export --collection empty: %q", one)
	}
}

func atoi(t *testing.T, s string) int {
	t.Helper()
	var n int
	if _, err := fmt.Sscan(s, &n); err != nil {
		t.Fatalf("%q: %v", s, err)
	}
	return n
}

// TestImportKilledMidway: an import killed partway through (SIGKILL) and
// run again ends with the same documents as one that ran whole: the
// chunks the server took are replayed under their keys, the rest written.
func TestImportKilledMidway(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	_, a := start(t, "--file", filepath.Join(dir, "a.db"))
	_, b := start(t, "--file", filepath.Join(dir, "b.db"))
	a.MustQuery("create collection many (n int @unique, s text)")
	const total = 40000 // 20 chunks
	for i := 0; i < total; i += 4000 {
		docs := make([]map[string]any, 4000)
		for j := range docs {
			docs[j] = map[string]any{"n": i + j, "s": strings.Repeat("s", 50)}
		}
		a.MustQuery("put many $1", docs)
	}
	export := filepath.Join(dir, "export.jsonl")
	mustFenec(t, nil, "export", "--from", a.Base, "--out", export)

	cmd := exec.Command(bin, "import", "--to", b.Base, export)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// Killed once some chunks are in, and not all.
	count := func() int {
		var cs struct {
			Collections []struct{ Documents int }
		}
		r, err := b.Do("GET", "/collections", nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		r.JSON(t, &cs)
		if len(cs.Collections) == 0 {
			return 0
		}
		return cs.Collections[0].Documents
	}
	deadline := time.Now().Add(60 * time.Second)
	n := 0
	for n = count(); n == 0 && time.Now().Before(deadline); n = count() {
		time.Sleep(2 * time.Millisecond)
	}
	cmd.Process.Kill()
	cmd.Wait()
	n = count()
	if n == 0 || n >= total {
		t.Fatalf("the import was killed with %d documents of %d in: want some, not all", n, total)
	}
	out := mustFenec(t, nil, "import", "--to", b.Base, export)
	if !strings.Contains(out, "20 chunks") || strings.Contains(out, "(0 replayed") {
		t.Fatalf("run again after %d documents, fenec import said %q: want some of its 20 chunks replayed", n, out)
	}
	t.Logf("killed with %d documents in; run again: %s", n, strings.TrimSpace(out))
	if x, y := a.MustQuery("get many").Body, b.MustQuery("get many").Body; string(x) != string(y) {
		t.Fatalf("after the import was run again the documents differ (%d and %d bytes)", len(x), len(y))
	}
}
