package main

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/fenecdb/fenec/server/engine"
	"github.com/fenecdb/fenec/server/fenecql"
	"github.com/fenecdb/fenec/server/httpapi/apitest"
	"github.com/fenecdb/fenec/server/store"
)

// memoryJobs is how many jobs TestMemoryLimits's file holds: their
// indexes (the id map, run_at @sorted, key @unique) take a few MiB.
const memoryJobs = 30000

// memoryFile writes a file of memoryJobs queue jobs, each with a @unique
// key, through the engine (faster than over HTTP).
func memoryFile(t *testing.T) string {
	t.Helper()
	file := filepath.Join(t.TempDir(), "m.db")
	db, err := engine.Open(engine.Options{File: file, Sync: store.SyncMode{Kind: store.SyncOff}})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := db.Exec(ctx, `create collection jobs (payload json, run_at timestamp @sorted, owner text, attempts int, error text, key text @unique)`, nil); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < memoryJobs; i += 1000 {
		var b strings.Builder
		b.WriteByte('[')
		for k := i; k < i+1000; k++ {
			if k > i {
				b.WriteByte(',')
			}
			fmt.Fprintf(&b, `{"payload": {"to": "u%d@example.com"}, "run_at": 0, "attempts": 0, "key": "k%d"}`, k, k)
		}
		b.WriteByte(']')
		v, err := fenecql.ParseJSON([]byte(b.String()))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := db.Exec(ctx, `put jobs $1`, []fenecql.Value{v}); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	return file
}

// metricValue returns a line's value of /_metrics, the line named by its
// name and labels as written ("fenec_resident_rows{collection=\"jobs\"}").
func metricValue(t *testing.T, c *apitest.Client, series string) float64 {
	t.Helper()
	return metricValues(t, c, series)[0]
}

// metricValues returns the values of several lines of one scrape: rows
// move between resident and evicted from one scrape to the next.
func metricValues(t *testing.T, c *apitest.Client, series ...string) []float64 {
	t.Helper()
	r, err := c.Do("GET", "/_metrics", nil, nil)
	if err != nil || r.Status != 200 {
		t.Fatalf("/_metrics: %v %v", err, r)
	}
	out := make([]float64, len(series))
	for i, name := range series {
		found := false
		for _, line := range strings.Split(string(r.Body), "\n") {
			if v, ok := strings.CutPrefix(line, name+" "); ok {
				f, err := strconv.ParseFloat(v, 64)
				if err != nil {
					t.Fatalf("%s: %v", line, err)
				}
				out[i], found = f, true
				break
			}
		}
		if !found {
			t.Fatalf("no %s in /_metrics", name)
		}
	}
	return out
}

// TestMemoryLimits: a --memory below what the file's indexes alone need is
// refused at start, with status 1 and a message that gives the figure
// needed; at the figure it names the server starts, with rows evicted to
// the file (the indexes alone take most of the limit), and although its
// live heap is past the limit, it serves claims and acks, reads evicted
// rows back, logs it, counts it in fenec_memory_over_limit_total and
// reports its rows, the evicted, their bytes and the reads from disk.
func TestMemoryLimits(t *testing.T) {
	t.Parallel()
	file := memoryFile(t)

	cmd := exec.Command(bin, "serve", "--http", "127.0.0.1:0", "--file", file, "--memory", "1MiB")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		ee, ok := err.(*exec.ExitError)
		if !ok || ee.ExitCode() != 1 {
			t.Fatalf("--memory 1MiB: %v, want exit status 1\n%s", err, stderr.String())
		}
	case <-time.After(60 * time.Second):
		cmd.Process.Kill()
		t.Fatal("--memory 1MiB: the server started")
	}
	msg := stderr.String()
	m := regexp.MustCompile(`fenec serve: --memory 1\.0MiB is less than the indexes of the loaded collections alone need: about ([0-9.]+)MiB \(jobs: 30000 documents, ([0-9.]+)MiB\); give --memory ([0-9]+)MiB or more\n`).FindStringSubmatch(msg)
	if m == nil {
		t.Fatalf("--memory 1MiB: %q, want it to name the figure needed", msg)
	}
	need, _ := strconv.ParseFloat(m[1], 64)
	// Between an id map entry and a kilobyte per job, for the id map and
	// two indexes.
	if lo, hi := float64(memoryJobs*24)/(1<<20), float64(memoryJobs*1024)/(1<<20); need < lo || need > hi {
		t.Errorf("the indexes of %d jobs need %.1f MiB, want between %.1f and %.1f", memoryJobs, need, lo, hi)
	}

	p, c := start(t, "--file", file, "--memory", m[3]+"MiB")
	// The watch looks at once: the rows alone are past the limit.
	for deadline := time.Now().Add(30 * time.Second); !strings.Contains(p.Log(), "the live heap is past --memory"); {
		if time.Now().After(deadline) {
			t.Fatalf("no log of the live heap past --memory %sMiB:\n%s", m[3], p.Log())
		}
		time.Sleep(20 * time.Millisecond)
	}
	if !strings.Contains(p.Log(), "largest_collection=jobs") {
		t.Errorf("the log does not name the largest collection:\n%s", p.Log())
	}
	if got := metricValue(t, c, "fenec_memory_over_limit_total"); got != 1 {
		t.Errorf("fenec_memory_over_limit_total %v, want 1 (once a minute at most)", got)
	}
	rows := metricValues(t, c, `fenec_resident_rows{collection="jobs"}`, `fenec_evicted_rows{collection="jobs"}`)
	resident, evicted := rows[0], rows[1]
	if resident+evicted != memoryJobs || evicted == 0 {
		t.Errorf("fenec_resident_rows %v, fenec_evicted_rows %v: want %d in all, some evicted", resident, evicted, memoryJobs)
	}
	if got := metricValue(t, c, "fenec_evictions_total"); got < evicted {
		t.Errorf("fenec_evictions_total %v, less than the %v rows evicted", got, evicted)
	}
	// A filter no index answers reads every row: the evicted from the file.
	r := c.MustQuery(`get jobs where attempts = 0 count`)
	if !strings.Contains(string(r.Body), fmt.Sprintf(`"count":%d`, memoryJobs)) {
		t.Errorf("count over evicted rows: %s", r.Body)
	}
	// (Not as many as evicted then: a head read back meanwhile is resident.)
	if got := metricValue(t, c, "fenec_disk_reads_total"); got == 0 {
		t.Errorf("fenec_disk_reads_total %v after a scan of %v evicted rows", got, evicted)
	}
	if got := metricValue(t, c, `fenec_resident_bytes{collection="jobs"}`); got < need*(1<<20) {
		t.Errorf("fenec_resident_bytes %v, less than the indexes alone (%.1f MiB)", got, need)
	}
	// Past the limit, claims and acks go on.
	for range 20 {
		r := c.MustQuery(`set jobs {owner: "w1", run_at: now() + 30000, attempts: attempts + 1} where run_at <= now() order run_at limit 1 returning id`)
		var ids []struct{ ID int64 }
		r.JSON(t, &ids)
		if len(ids) != 1 {
			t.Fatalf("claim: %s", r.Body)
		}
		c.MustQuery(`del jobs where id = $1 and owner = "w1" require 1`, ids[0].ID)
	}
	rows = metricValues(t, c, `fenec_resident_rows{collection="jobs"}`, `fenec_evicted_rows{collection="jobs"}`)
	resident, evicted = rows[0], rows[1]
	if resident+evicted != memoryJobs-20 {
		t.Errorf("fenec_resident_rows %v and fenec_evicted_rows %v after 20 acks, want %d in all", resident, evicted, memoryJobs-20)
	}
	// With FENEC_TEST_BIN built -race, the watch and the scrapes beside
	// the requests are checked too.
	if err := p.Stop(30 * time.Second); err != nil || strings.Contains(p.Log(), "DATA RACE") {
		t.Errorf("stopping: %v\n%s", err, p.Log())
	}
}
