// -mode memory -evict-memory <size>: the same file of queue jobs served
// with every row in memory and under --memory (rows evicted to the file,
// docs/operations.md "Memory"): the restart, the memory after it, and 16
// durable workers' claims and acks on each.

package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"
	"time"

	"github.com/fenecdb/fenec/server/engine"
	"github.com/fenecdb/fenec/server/fenecql"
	"github.com/fenecdb/fenec/server/store"
)

// evictRun is one server's figures on the file.
type evictRun struct {
	args                 []string
	restart              time.Duration
	peak, after, heap    float64 // VmHWM, RSS and the Go heap's live bytes after the restart
	resident, evicted    float64 // rows
	jobsPerSec           float64
	claimP50, claimP99   time.Duration
	diskReads, afterRun  float64 // rows read back over the run; RSS after it
	indexBytes, resBytes float64 // fenec_resident_bytes after the restart
}

// evictFill writes n jobs of the queue page's shape (memLayers[3]) into a
// new file through the engine in this process, with --sync off: the file,
// not this process, is what is measured. The engine evicts the rows it has
// written past fillMemory: 50 million jobs held whole would take ~8 GB of
// live heap, twice that with the collector's room, beside the servers.
func evictFill(file string, n int) error {
	db, err := engine.Open(engine.Options{File: file, Sync: store.SyncMode{Kind: store.SyncOff}, MemoryLimit: fillMemory})
	if err != nil {
		return err
	}
	ctx := context.Background()
	l := memLayers[3]
	if _, err := db.Exec(ctx, "create collection jobs "+l.schema, nil); err != nil {
		db.Close()
		return err
	}
	for i, batch := range top(0, n) {
		docs := make([]any, len(batch))
		for k, j := range batch {
			docs[k] = l.doc(j)
		}
		v, err := fenecql.FromGo(docs)
		if err != nil {
			db.Close()
			return err
		}
		if _, err := db.Exec(ctx, putJobs, []fenecql.Value{v}); err != nil {
			db.Close()
			return err
		}
		// The engine's own sweep (once a second, a bounded share of rows)
		// falls behind a fill this fast: sweep here too, and wait for the
		// folds that let rows go, so that at most fillResident rows are
		// held.
		for i%20 == 19 && db.Footprints()[0].Rows > fillResident {
			if db.Evict() == 0 {
				time.Sleep(100 * time.Millisecond)
			}
		}
	}
	return db.Close()
}

// fillMemory is evictFill's memory limit (under the indexes alone of a
// large fill: every row that may go does), fillResident the rows it holds
// at most.
const (
	fillMemory   = 256 << 20
	fillResident = 2_000_000
)

// evictServe restarts a server on file with args, measures it, and drives
// 16 workers' claims and acks for d.
func evictServe(bin, file string, d time.Duration, args ...string) (evictRun, error) {
	r := evictRun{args: args}
	t0 := time.Now()
	s, err := startServer(bin, append([]string{"--file", file, "--sync", "always"}, args...)...)
	if err != nil {
		return r, err
	}
	defer s.stop()
	if _, err := s.query(countAll, nil, 0); err != nil {
		return r, err
	}
	r.restart = time.Since(t0)
	pid := s.cmd.Process.Pid
	// The sweep reads the queue's head back within a second.
	time.Sleep(2 * time.Second)
	if err := quiet(pid); err != nil {
		return r, err
	}
	r.peak, r.after = float64(vmHWM(pid)), float64(s.rss())
	r.heap, _ = s.metric("go_memstats_heap_alloc_bytes")
	r.resident, _ = s.metric(`fenec_resident_rows{collection="jobs"}`)
	r.evicted, _ = s.metric(`fenec_evicted_rows{collection="jobs"}`)
	r.resBytes, _ = s.metric(`fenec_resident_bytes{collection="jobs"}`)
	reads0, _ := s.metric("fenec_disk_reads_total")
	t, err := drive(&httpQueue{s: s}, 16, d)
	if err != nil {
		return r, err
	}
	r.jobsPerSec = float64(t.jobs) / t.took.Seconds()
	r.claimP50, r.claimP99 = pctl(t.claims, 0.50), pctl(t.claims, 0.99)
	reads1, _ := s.metric("fenec_disk_reads_total")
	r.diskReads = reads1 - reads0
	r.afterRun = float64(s.rss())
	return r, nil
}

// runMemoryLimit is -mode memory with -evict-memory: a file of n jobs,
// served without and with --memory limit, rounds times each alternating.
func runMemoryLimit(bin, dir, note string, n int, out string, mo memOptions) error {
	tmp, err := os.MkdirTemp(dir, "fenec-memlimit-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	file := filepath.Join(tmp, "jobs.db")
	if mo.evictFile != "" {
		file = mo.evictFile
	}
	// With -evict-file, a file written before (by a run of the same -jobs)
	// is used as it is: at 50 million jobs the fill takes minutes.
	filledHow := "reused from -evict-file"
	if _, err := os.Stat(file); err != nil || mo.evictFile == "" {
		t0 := time.Now()
		if err := evictFill(file, n); err != nil {
			return err
		}
		filledHow = "written in process in " + time.Since(t0).Round(time.Second).String()
		// The fill's engine is garbage now: give its pages back before
		// the servers are measured beside this process.
		debug.FreeOSMemory()
	}
	st, err := os.Stat(file)
	if err != nil {
		return err
	}
	// Each run claims and acks jobs: a copy of the file per run keeps the
	// backlog the same.
	var runs []evictRun
	for round := 0; round < 2; round++ {
		for _, args := range [][]string{nil, {"--memory", mo.evict}} {
			f := filepath.Join(tmp, fmt.Sprintf("run-%d-%d.db", round, len(args)))
			if err := copyDB(file, f); err != nil {
				return err
			}
			r, err := evictServe(bin, f, mo.drive, args...)
			os.Remove(f)
			os.Remove(f + "-wal")
			if segs, _ := filepath.Glob(f + "-log-*"); len(segs) > 0 {
				for _, seg := range segs {
					os.Remove(seg)
				}
			}
			if err != nil {
				return err
			}
			fmt.Fprintf(os.Stderr, "memlimit: %v: %+v\n", args, r)
			runs = append(runs, r)
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "# Memory under --memory\n\n%s. %s jobs of the queue page's shape (a ~60-byte JSON payload, `run_at @sorted`, owner, attempts, error), all ready, in a %.1f GB file (%s).", time.Now().UTC().Format("2006-01-02"), count(n), float64(st.Size())/1e9, filledHow)
	if note != "" {
		fmt.Fprintf(&b, " %s", note)
	}
	fmt.Fprintf(&b, "\n\nMade by `queuebench -mode memory -jobs %d -evict-memory %s -evict-drive %s`: the file restarted by `fenec serve --sync always` without and with `--memory %s`, twice each, alternating, each on a fresh copy of the file; then 16 workers over HTTP claim ten (`%s`) and ack them in one `/batch`, for %s.\n\n", n, mo.evict, mo.drive, mo.evict, claimTen, mo.drive)
	b.WriteString("| server | restart to serving | peak RSS while loading | RSS after | Go heap live | rows resident / evicted | fenec_resident_bytes | claim+ack jobs/s (16 workers, durable) | claim p50 / p99 | rows read from the file in the run | RSS after the run |\n| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n")
	for _, r := range runs {
		name := "every row in memory"
		if len(r.args) > 0 {
			name = "`--memory " + mo.evict + "`"
		}
		fmt.Fprintf(&b, "| %s | %.1f s | %s | %s | %s | %.0f / %.0f | %s | %.0f | %s / %s | %.0f | %s |\n", name, r.restart.Seconds(),
			mbf(r.peak), mbf(r.after), mbf(r.heap), r.resident, r.evicted, mbf(r.resBytes), r.jobsPerSec, durMS(r.claimP50), durMS(r.claimP99), r.diskReads, mbf(r.afterRun))
	}
	fmt.Print(b.String())
	if out != "" {
		return os.WriteFile(filepath.Join(out, "memory-limit.md"), []byte(b.String()), 0o644)
	}
	return nil
}

func mbf(v float64) string { return fmt.Sprintf("%.0f MB", v/1e6) }

// copyDB copies a closed store's SQLite file and its WAL, if any (Close
// folds the log whole: no segment is left).
func copyDB(from, to string) error {
	for _, suffix := range []string{"", "-wal"} {
		if err := copyFile(from+suffix, to+suffix); err != nil && !(suffix != "" && os.IsNotExist(err)) {
			return err
		}
	}
	return nil
}

func copyFile(from, to string) error {
	in, err := os.Open(from)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.Create(to)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}
