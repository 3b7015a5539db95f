package main

// -mode memory: what a backlog costs in memory (docs/benchmarks.md, "Memory
// per job"). Three measurements, one run:
//
//  1. The breakdown, in process: the engine opened on ":memory:" and filled
//     with n jobs once per schema, each schema adding one structure to the
//     one before (a bare document, the scalar fields, the JSON payload, the
//     @sorted index of the queue page, then an @hash, an @unique and an @geo
//     field); the Go heap in use after a collection, less the heap before,
//     divided by n, is the bytes per job; each line's difference with the
//     one before is that structure's share. Then half the jobs are deleted
//     and the heap read again.
//  2. A real `fenec serve` on a file: filled with n jobs of the queue page's
//     shape over HTTP (peak RSS while loading), restarted (time to serving,
//     RSS after, peak RSS while loading the file), half drained (RSS), and
//     the Go heap against the RSS — the collector's headroom.
//  3. Redis: the same jobs, as the JSON strings a BullMQ-style list holds,
//     RPUSHed into one list: used_memory and RSS.

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/fenecdb/fenec/server/engine"
)

// memPayload returns job j's payload as the queue page's jobs carry it: ~60
// bytes of JSON (its other fields are in memLayers).
func memPayload(j job) map[string]any {
	return map[string]any{"to": j.to(), "template": "welcome", "locale": "en"}
}

// A memLayer is one schema of the breakdown and what one job holds under it.
type memLayer struct {
	name   string
	schema string
	doc    func(j job) map[string]any
}

var memLayers = []memLayer{
	{"a document holding one int (the row, its id, the id map)", "(attempts int)",
		func(j job) map[string]any { return map[string]any{"attempts": 0} }},
	{"+ run_at, owner (null), error (null)", "(run_at timestamp, owner text, attempts int, error text)",
		func(j job) map[string]any { return map[string]any{"run_at": j.runAt.UnixMilli(), "attempts": 0} }},
	{"+ a ~60-byte JSON payload", "(payload json, run_at timestamp, owner text, attempts int, error text)",
		func(j job) map[string]any {
			return map[string]any{"payload": memPayload(j), "run_at": j.runAt.UnixMilli(), "attempts": 0}
		}},
	{"+ run_at @sorted (the queue page's jobs)", "(payload json, run_at timestamp @sorted, owner text, attempts int, error text)",
		func(j job) map[string]any {
			return map[string]any{"payload": memPayload(j), "run_at": j.runAt.UnixMilli(), "attempts": 0}
		}},
	{"+ queue text @hash (one of 8 values)", "(payload json, run_at timestamp @sorted, owner text, attempts int, error text, queue text @hash)",
		func(j job) map[string]any {
			return map[string]any{"payload": memPayload(j), "run_at": j.runAt.UnixMilli(), "attempts": 0, "queue": "q" + strconv.FormatInt(j.seq%8, 10)}
		}},
	{"+ key text @unique (one per job)", "(payload json, run_at timestamp @sorted, owner text, attempts int, error text, queue text @hash, key text @unique)",
		func(j job) map[string]any {
			return map[string]any{"payload": memPayload(j), "run_at": j.runAt.UnixMilli(), "attempts": 0, "queue": "q" + strconv.FormatInt(j.seq%8, 10), "key": "k" + strconv.FormatInt(j.seq, 10)}
		}},
	{"+ at geo @geo", "(payload json, run_at timestamp @sorted, owner text, attempts int, error text, queue text @hash, key text @unique, at geo @geo)",
		func(j job) map[string]any {
			return map[string]any{"payload": memPayload(j), "run_at": j.runAt.UnixMilli(), "attempts": 0, "queue": "q" + strconv.FormatInt(j.seq%8, 10), "key": "k" + strconv.FormatInt(j.seq, 10),
				"at": []any{float64(j.seq%360) - 180, float64(j.seq%170) - 85}}
		}},
}

// heapInUse returns the Go heap's live bytes after two collections (the
// second sweeps what the first's finalizers freed).
func heapInUse() int64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return int64(m.HeapAlloc)
}

type memLine struct {
	name     string
	perJob   float64 // bytes of Go heap per job
	share    float64 // perJob less the line before's
	afterDel float64 // bytes of Go heap per job left, after half were deleted (0: not measured)
}

// memBreakdown fills one in-process engine per layer with n jobs.
func memBreakdown(n int) ([]memLine, error) {
	var lines []memLine
	prev := 0.0
	for i, l := range memLayers {
		db, err := engine.Open(engine.Options{File: ":memory:"})
		if err != nil {
			return nil, err
		}
		q := &engineQueue{db: db}
		before := heapInUse()
		if _, err := q.exec("create collection jobs " + l.schema); err != nil {
			db.Close()
			return nil, fmt.Errorf("%s: %w", l.name, err)
		}
		for _, batch := range top(0, n) {
			docs := make([]any, len(batch))
			for k, j := range batch {
				docs[k] = l.doc(j)
			}
			if _, err := q.exec(putJobs, docs); err != nil {
				db.Close()
				return nil, fmt.Errorf("%s: %w", l.name, err)
			}
		}
		per := float64(heapInUse()-before) / float64(n)
		line := memLine{name: l.name, perJob: per, share: per - prev}
		if i == 0 {
			line.share = per
		}
		if i == 3 { // the queue page's jobs: drain half
			if _, err := q.exec(`del jobs where id % 2 = 0`); err != nil {
				db.Close()
				return nil, err
			}
			line.afterDel = float64(heapInUse()-before) / float64(n-n/2)
		}
		prev = per
		db.Close()
		lines = append(lines, line)
		fmt.Fprintf(os.Stderr, "memory: %s: %.0f bytes/job\n", l.name, per)
	}
	return lines, nil
}

// memServer is part 2: a real server on a file.
type memServer struct {
	peakLoad, afterLoad              int64 // RSS while and after filling over HTTP
	restart                          time.Duration
	peakRestart, afterRestart        int64
	afterDrain                       int64
	heapAfterRestart, heapSysRestart float64 // the Go heap's live and reserved bytes after the restart
	nextGC                           float64
	// restartCPU is the server's user+sys until it served: unlike
	// restart, the machine's other work does not change it.
	restartCPU time.Duration
	// restartLoad is the machine's load average (1 minute) when the
	// restart was timed.
	restartLoad string
	// Where the RSS after the restart goes: the Go heap's spans in use
	// less its live bytes (free slots in spans that also hold live
	// objects), the runtime's own (stacks, span and GC metadata), the
	// anonymous memory outside Go's accounting (SQLite's), and the pages
	// of the binary and libraries.
	spanFree, runtimeSys, otherAnon, fileRSS float64
}

// loadAvg returns the machine's load average over the last minute.
func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if f := strings.Fields(string(b)); err == nil && len(f) > 0 {
		return f[0]
	}
	return "?"
}

// smapsRollup returns pid's resident anonymous and file-backed bytes.
func smapsRollup(pid int) (anon, file int64) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/smaps_rollup", pid))
	if err != nil {
		return 0, 0
	}
	kb := func(v string) int64 {
		n, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
		return n * 1024
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "Anonymous:"); ok {
			anon = kb(v)
		}
		if v, ok := strings.CutPrefix(l, "Rss:"); ok {
			file += kb(v)
		}
	}
	return anon, file - anon
}

// stopped stops s and returns an error when it did not exit cleanly
// (killed after stop's wait): its file would then hold an unfolded log,
// and the restart would replay it, which is not what is measured.
func stopped(s *server) error {
	s.stop()
	if st := s.cmd.ProcessState; st == nil || !st.Success() {
		return fmt.Errorf("the server did not exit cleanly on SIGINT: %v", st)
	}
	return nil
}

// vmHWM returns the peak resident memory of pid (VmHWM), in bytes.
func vmHWM(pid int) int64 {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmHWM:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return kb * 1024
		}
	}
	return 0
}

// metric reads one unlabelled metric from the server's /_metrics.
func (s *server) metric(name string) (float64, error) {
	resp, err := s.http.Get(s.url + "/_metrics")
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), name+" "); ok {
			return strconv.ParseFloat(v, 64)
		}
	}
	return 0, fmt.Errorf("no %s in /_metrics", name)
}

func memServe(bin, dir string, n int, deadline time.Time) (*memServer, error) {
	file := filepath.Join(dir, "memory.db")
	s, err := startServer(bin, "--file", file)
	if err != nil {
		return nil, err
	}
	var out memServer
	l := memLayers[3]
	if _, err := s.query("create collection jobs "+l.schema, nil, 0); err != nil {
		s.stop()
		return nil, err
	}
	for _, batch := range top(0, n) {
		docs := make([]any, len(batch))
		for k, j := range batch {
			docs[k] = l.doc(j)
		}
		if _, err := s.query(putJobs, []any{docs}, 0); err != nil {
			s.stop()
			return nil, err
		}
		if time.Now().After(deadline) {
			s.stop()
			return nil, fmt.Errorf("filling the server took past -memory-limit")
		}
	}
	pid := s.cmd.Process.Pid
	if err := quiet(pid); err != nil {
		s.stop()
		return nil, err
	}
	out.peakLoad, out.afterLoad = vmHWM(pid), s.rss()
	if err := stopped(s); err != nil {
		return nil, err
	}

	t0 := time.Now()
	s, err = startServer(bin, "--file", file)
	if err != nil {
		return nil, err
	}
	defer s.stop()
	if _, err := s.query(countAll, nil, 0); err != nil {
		return nil, err
	}
	out.restart = time.Since(t0)
	out.restartCPU = s.cpu()
	out.restartLoad = loadAvg()
	pid = s.cmd.Process.Pid
	if err := quiet(pid); err != nil {
		return nil, err
	}
	out.peakRestart, out.afterRestart = vmHWM(pid), s.rss()
	out.heapAfterRestart, _ = s.metric("go_memstats_heap_alloc_bytes")
	out.heapSysRestart, _ = s.metric("go_memstats_heap_sys_bytes")
	out.nextGC, _ = s.metric("go_memstats_next_gc_bytes")
	inuse, _ := s.metric("go_memstats_heap_inuse_bytes")
	out.spanFree = inuse - out.heapAfterRestart
	for _, m := range []string{"go_memstats_stack_inuse_bytes", "go_memstats_mspan_inuse_bytes", "go_memstats_mcache_inuse_bytes", "go_memstats_gc_sys_bytes", "go_memstats_other_sys_bytes", "go_memstats_buck_hash_sys_bytes"} {
		v, _ := s.metric(m)
		out.runtimeSys += v
	}
	idle, _ := s.metric("go_memstats_heap_idle_bytes")
	released, _ := s.metric("go_memstats_heap_released_bytes")
	anon, fileRSS := smapsRollup(pid)
	out.fileRSS = float64(fileRSS)
	out.otherAnon = float64(anon) - inuse - (idle - released) - out.runtimeSys
	if _, err := s.query(`del jobs where id % 2 = 0`, nil, 0); err != nil {
		return nil, err
	}
	if err := quiet(pid); err != nil {
		return nil, err
	}
	out.afterDrain = s.rss()
	return &out, nil
}

// memRedis is part 3: the jobs as JSON strings in one Redis list.
func memRedis(dir string, n int, deadline time.Time) (usedMemory, rss int64, version string, err error) {
	r, err := startRedis(dir, "everysec")
	if err != nil {
		return 0, 0, "", err
	}
	defer r.stop()
	ctx := context.Background()
	pipe := r.rdb.Pipeline()
	for _, batch := range top(0, n) {
		vals := make([]any, len(batch))
		for k, j := range batch {
			vals[k] = `{"id":` + strconv.FormatInt(j.seq, 10) + `,"payload":{"to":"` + j.to() + `","template":"welcome","locale":"en"},"run_at":` +
				strconv.FormatInt(j.runAt.UnixMilli(), 10) + `,"attempts":0}`
		}
		pipe.RPush(ctx, "jobs", vals...)
		if pipe.Len() == 20 {
			if _, err := pipe.Exec(ctx); err != nil {
				return 0, 0, "", err
			}
			if time.Now().After(deadline) {
				return 0, 0, "", fmt.Errorf("filling Redis took past -memory-limit")
			}
		}
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return 0, 0, "", err
	}
	info, err := r.rdb.Info(ctx, "memory").Result()
	if err != nil {
		return 0, 0, "", err
	}
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "used_memory:"); ok {
			usedMemory, _ = strconv.ParseInt(v, 10, 64)
		}
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/statm", r.cmd.Process.Pid))
	if err == nil {
		if f := strings.Fields(string(b)); len(f) > 1 {
			pages, _ := strconv.ParseInt(f[1], 10, 64)
			rss = pages * int64(os.Getpagesize())
		}
	}
	return usedMemory, rss, r.version, nil
}

// memOptions are -mode memory's own flags.
type memOptions struct {
	// breakdown runs part 1; at ten million jobs its seven engines in
	// process take longer than the rest together, and the server's
	// figures are the ones asked for.
	breakdown bool
	// limit bounds the whole run: a fill still going past it fails.
	limit time.Duration
	// file is the results file's name in out.
	file string
	// evict, when set, is a --memory size: the run is runMemoryLimit's
	// instead (memlimit.go), its workers driven for drive.
	evict string
	drive time.Duration
	// evictFile, when set, is where the -evict-memory run's file is
	// written and kept, or taken from when it is there already.
	evictFile string
}

// runMemory is -mode memory: the three parts, printed as markdown and,
// with out, written to out/<file>.
func runMemory(bin, dir, note string, n int, install bool, out string, mo memOptions) error {
	deadline := time.Now().Add(mo.limit)
	if install {
		if err := ensureRedis(); err != nil {
			return err
		}
	}
	tmp, err := os.MkdirTemp(dir, "fenec-memory-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	var lines []memLine
	if mo.breakdown {
		if lines, err = memBreakdown(n); err != nil {
			return err
		}
	}
	srv, err := memServe(bin, tmp, n, deadline)
	if err != nil {
		return err
	}
	used, rrss, rver, err := memRedis(tmp, n, deadline)
	if err != nil {
		return err
	}
	var b strings.Builder
	fmt.Fprintf(&b, "# Memory per job\n\n%s. %s jobs of the queue page's shape (a ~60-byte JSON payload, `run_at @sorted`, owner, attempts, error).", time.Now().UTC().Format("2006-01-02"), count(n))
	if note != "" {
		fmt.Fprintf(&b, " %s", note)
	}
	cmd := fmt.Sprintf("queuebench -mode memory -jobs %d", n)
	if !mo.breakdown {
		cmd += " -memory-breakdown=false"
	}
	fmt.Fprintf(&b, "\n\nMade by `make memory-bench` (`%s`).\n\n", cmd)
	if len(lines) > 0 {
		writeBreakdown(&b, lines)
	}
	writeServer(&b, srv, used, rrss, rver)
	fmt.Print(b.String())
	if out != "" {
		return os.WriteFile(filepath.Join(out, mo.file), []byte(b.String()), 0o644)
	}
	return nil
}

func writeBreakdown(b *strings.Builder, lines []memLine) {
	b.WriteString("## The breakdown: Go heap per job, in process\n\nEach line's schema adds one structure to the line before's; the share is the difference. Live heap after two collections, less the heap before the collection was made, over the jobs.\n\n")
	b.WriteString("| schema | bytes/job | share |\n| --- | ---: | ---: |\n")
	for _, l := range lines {
		fmt.Fprintf(b, "| %s | %.0f | %.0f |\n", l.name, l.perJob, l.share)
	}
	for _, l := range lines {
		if l.afterDel != 0 {
			fmt.Fprintf(b, "\nAfter deleting half of the queue page's jobs: %.0f bytes of heap per job left (%.0f at the full queue).\n", l.afterDel, l.perJob)
		}
	}
	b.WriteString("\n")
}

func writeServer(b *strings.Builder, srv *memServer, used, rrss int64, rver string) {
	mb := func(b int64) string { return fmt.Sprintf("%.0f MB", float64(b)/1e6) }
	b.WriteString("## A server on a file, and Redis, in the same run\n\n| | Fenec | Redis " + rver + " |\n| --- | ---: | ---: |\n")
	fmt.Fprintf(b, "| peak RSS while loading over HTTP | %s | |\n", mb(srv.peakLoad))
	fmt.Fprintf(b, "| RSS after loading | %s | %s (used_memory %s) |\n", mb(srv.afterLoad), mb(rrss), mb(used))
	fmt.Fprintf(b, "| restart to serving (its CPU, user+sys; the load average then) | %.1f s (%.1f s; %s) | |\n", srv.restart.Seconds(), srv.restartCPU.Seconds(), srv.restartLoad)
	fmt.Fprintf(b, "| peak RSS while loading the file | %s (%.2f× Redis's used_memory) | |\n", mb(srv.peakRestart), float64(srv.peakRestart)/float64(used))
	fmt.Fprintf(b, "| RSS after a restart | %s (%.2f× Redis's used_memory) | |\n", mb(srv.afterRestart), float64(srv.afterRestart)/float64(used))
	fmt.Fprintf(b, "| Go heap live / reserved / next collection at, after a restart | %s / %s / %s | |\n", mb(int64(srv.heapAfterRestart)), mb(int64(srv.heapSysRestart)), mb(int64(srv.nextGC)))
	fmt.Fprintf(b, "| RSS after a restart past the live heap: free slots in the heap's spans / the runtime's (stacks, metadata) / other anonymous (SQLite) / the binary's pages | %s / %s / %s / %s | |\n",
		mb(int64(srv.spanFree)), mb(int64(srv.runtimeSys)), mb(int64(srv.otherAnon)), mb(int64(srv.fileRSS)))
	fmt.Fprintf(b, "| RSS after deleting half | %s | |\n", mb(srv.afterDrain))
}
