// Command queuebench is `make queue-bench`: it measures the figures the
// queue page (docs/queues.md) quotes, on this machine, and puts the peers a
// user would pick instead beside them in the same run, so each comparison
// is a ratio rather than two numbers from two days.
//
// Fenec is measured in process (the engine called directly: the claim's
// cost by queue size and index, workers claiming in one statement or in
// three) and against a real `fenec serve` it starts (workers over HTTP;
// put → a worker held by Fenec-Wait against polling; delayed jobs; idle
// held claims; the nearest of many held couriers). PostgreSQL (FOR UPDATE
// SKIP LOCKED, through pgx) and Redis (a reliable LMOVE/LREM queue, and
// BLPOP, through go-redis) are installed from Debian's packages when
// missing, started on loopback in a temporary directory and stopped at the
// end. Every system claims ten jobs at a time and acks each one, with the
// same worker counts, at two durabilities: every write on disk before it
// is answered, and on disk within a second.
//
// The figures are printed as markdown tables and, with -out, written to
// queue.md, queue.json (every number, and the wake latencies) and
// queue.png (jobs/s by workers; wake latency distribution).
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"
)

// A result is one system's measurement of one figure. Zero fields were not
// measured.
type result struct {
	JobsPerSec float64 `json:"jobs_per_s,omitempty"`
	P50        float64 `json:"p50_ms,omitempty"`
	P99        float64 `json:"p99_ms,omitempty"`
	Value      float64 `json:"value,omitempty"`
	Unit       string  `json:"unit,omitempty"`
	Note       string  `json:"note,omitempty"`
	// ServerCPU is the server's CPU time per job acked, in µs: its
	// processes' user and system time over the run (/proc/<pid>/stat),
	// divided by the jobs done.
	ServerCPU float64 `json:"server_cpu_us_per_job,omitempty"`
	// ServerCPUDrained is ServerCPU with the CPU the server spends after
	// the run on its work for it (Fenec: folding the run's log into the
	// tables, which the store defers by up to 10 s), until done.
	ServerCPUDrained float64 `json:"server_cpu_us_per_job_drained,omitempty"`
	// ClientCPU is the benchmark process's own CPU time per job acked, in
	// µs, over the run (getrusage): its workers' clients — Fenec's
	// net/http and encoding/json, pgx, go-redis — which share the
	// machine's cores with the server.
	ClientCPU float64 `json:"client_cpu_us_per_job,omitempty"`
	// Samples are a latency distribution in milliseconds, sorted, for the
	// chart.
	Samples []float64 `json:"samples_ms,omitempty"`
	// Rounds are the figures of each drive of a throughput cell, or of
	// each window of a wake figure, in the order taken (rounds.go): the
	// spread the report shows beside the median or the pool.
	Rounds []round `json:"rounds,omitempty"`
}

// A figure is one line of the table: Fenec's result and, where a peer does
// the same thing, the peers' from the same run.
type figure struct {
	Section    string  `json:"section"`
	Name       string  `json:"name"`
	Durability string  `json:"durability,omitempty"` // durable or relaxed, for runs over the network
	Workers    int     `json:"workers,omitempty"`
	Method     string  `json:"method,omitempty"` // oneStatement or threeStatements
	Fenec      *result `json:"fenec,omitempty"`
	Postgres   *result `json:"postgresql,omitempty"`
	Redis      *result `json:"redis,omitempty"`
}

// The table's sections, in the order they are measured.
const (
	secClaim   = "The claim's cost (in process, in memory)"
	secProcess = "Workers in process (a file at --sync 250)"
	secDurable = "Over the network, durable: Fenec --sync always over HTTP · PostgreSQL synchronous_commit=on · Redis appendfsync always"
	secRelaxed = "Over the network, relaxed: Fenec --sync 250 over HTTP · PostgreSQL synchronous_commit=off · Redis appendfsync everysec"
	secWait    = "Waiting for a job (Fenec --sync 250 over HTTP · Redis appendfsync everysec)"
	secHeld    = "Held claims (Fenec in memory over HTTP)"
)

const (
	oneStatement    = "one statement"
	threeStatements = "three statements"
)

// allParts are the parts of a run, in order.
var allParts = []string{"claim", "process", "http", "https", "postgres", "redis", "wake", "delayed", "idle", "couriers"}

// config is a run's settings, from the flags.
type config struct {
	bin      string
	jobs     int
	workers  []int
	duration time.Duration // of one drive
	rounds   int           // drives a throughput cell, windows a wake figure
	samples  int
	parts    map[string]bool
	install  bool
	dir      string // where temporary directories go ("": the system's)
	note     string
}

func main() {
	var cfg config
	flag.StringVar(&cfg.bin, "fenec", "bin/fenec", "the fenec `binary` to benchmark")
	flag.IntVar(&cfg.jobs, "jobs", 1000000, "jobs in the queue")
	workers := flag.String("workers", "1,2,4,16", "comma-separated worker `counts`")
	flag.DurationVar(&cfg.duration, "duration", 2*time.Second, "how long each drive of a throughput cell claims (it stops sooner if the queue runs out)")
	flag.IntVar(&cfg.rounds, "rounds", 3, "`drives` of each throughput cell (the median is reported), and windows of the put → held worker figure")
	flag.IntVar(&cfg.samples, "samples", 300, "jobs put per wake measurement (per window of the held one)")
	only := flag.String("only", strings.Join(allParts, ","), "comma-separated `parts` to run: "+strings.Join(allParts, ", "))
	flag.BoolVar(&cfg.install, "install", true, "apt-get install PostgreSQL and Redis when they are missing")
	flag.StringVar(&cfg.dir, "tmp", "", "`directory` for the temporary files (default: the system's)")
	flag.StringVar(&cfg.note, "note", "", "a `remark` for the header, such as what else the machine was doing")
	out := flag.String("out", "", "write queue.md, queue.json and queue.png (-mode redis: redis.md) into this `directory`")
	mode := flag.String("mode", "queue", "`queue`: the queue's figures; redis: the recipes of docs/redis.md under load (recipes.go); changes: live queries and the change stream beside Redis Streams (changes.go); memory: memory per job beside Redis (memory.go); workers: each SDK's worker beside a plain HTTP loop (workers.go); plainloop: that loop alone, as the workers mode runs it")
	rc := recipes{}
	flag.IntVar(&rc.incClients, "inc-clients", 16, "-mode redis: `clients` incrementing one counter")
	flag.IntVar(&rc.incs, "incs", 10000, "-mode redis: increments `each` counter client sends")
	flag.IntVar(&rc.lockClients, "lock-clients", 100, "-mode redis: `clients` racing for the lock")
	flag.IntVar(&rc.lockRounds, "lock-rounds", 1000, "-mode redis: `rounds` of the lock race")
	flag.IntVar(&rc.lapses, "lapses", 5, "-mode redis: `times` the lock is left to lapse")
	flag.IntVar(&rc.rateClients, "rate-clients", 32, "-mode redis: `clients` asking the rate limit")
	flag.IntVar(&rc.rateLimit, "rate-limit", 50, "-mode redis: requests `allowed` per 1 s window")
	flag.DurationVar(&rc.rateFor, "rate-for", 5*time.Second, "-mode redis: how long the rate limit's clients ask")
	flag.IntVar(&rc.ttlRows, "ttl-rows", 1000000, "-mode redis: `documents` lapsing at once")
	docs := flag.String("docs", "", "replace the table between the queue-bench markers of this markdown `file`")
	wc := workerConfig{}
	flag.IntVar(&wc.jobs, "worker-jobs", 20000, "-mode workers: jobs put before each run")
	flag.DurationVar(&wc.limit, "worker-limit", time.Minute, "-mode workers: the longest one run may take (it is cut off then)")
	wconc := flag.String("worker-concurrency", "1,10,50", "-mode workers: comma-separated `concurrencies`")
	systems := flag.String("systems", strings.Join(workerSystems, ","), "-mode workers: comma-separated `programs`: "+strings.Join(workerSystems, ", "))
	flag.StringVar(&wc.dir, "worker-dir", "workers", "-mode workers: the `directory` of the worker programs, built")
	flag.StringVar(&wc.command, "command", "", "-mode workers: the `command` that made the run, for the header")
	url := flag.String("url", "", "-mode plainloop: the server's `URL`")
	conc := flag.Int("concurrency", 10, "-mode plainloop: jobs in flight")
	var cc changesConfig
	csubs := flag.String("change-subs", "1,100,1000", "-mode changes: comma-separated `counts` of live queries on one query")
	flag.IntVar(&cc.different, "change-different", 1000, "-mode changes: live queries each on its own query (0: none)")
	flag.IntVar(&cc.writes, "change-writes", 50, "-mode changes: puts timed per cell, one at a time")
	flag.IntVar(&cc.idle, "change-idle", 1000, "-mode changes: idle live queries for the memory figure")
	flag.IntVar(&cc.stream, "change-stream", 20000, "-mode changes: messages written then read through the change stream and through a Redis stream")
	flag.IntVar(&cc.batch, "change-batch", 100, "-mode changes: messages per write (rows per put, XADDs per pipeline)")
	flag.DurationVar(&cc.limit, "change-limit", time.Minute, "-mode changes: the longest any one loop may run")
	mo := memOptions{file: "memory.md"}
	flag.BoolVar(&mo.breakdown, "memory-breakdown", true, "-mode memory: measure the Go heap per structure in process (seven engines of -jobs each) before the server and Redis")
	flag.DurationVar(&mo.limit, "memory-limit", 30*time.Minute, "-mode memory: the longest the run may take; a fill still going past it fails the run")
	flag.StringVar(&mo.file, "memory-out", mo.file, "-mode memory: the results `file`'s name in -out")
	flag.StringVar(&mo.evict, "evict-memory", "", "-mode memory: a --memory `size` (1GiB): instead of the memory per job, the same file served with every row in memory and under that --memory (rows evicted to the file), into memory-limit.md")
	flag.DurationVar(&mo.drive, "evict-drive", 20*time.Second, "-mode memory with -evict-memory: how long 16 workers claim and ack on each server")
	flag.StringVar(&mo.evictFile, "evict-file", "", "-mode memory with -evict-memory: the `file` of jobs, kept after the run; used as it is when it exists (written by a run of the same -jobs), else written there")
	flag.Parse()
	fail := func(err error) {
		fmt.Fprintln(os.Stderr, "queuebench:", err)
		os.Exit(1)
	}
	var err error
	switch *mode {
	case "queue":
	case "plainloop":
		if err := plainLoop(*url, *conc); err != nil {
			fail(err)
		}
		return
	case "workers":
		wc.bin, wc.rounds, wc.note, wc.out, wc.tmp = cfg.bin, cfg.rounds, cfg.note, *out, cfg.dir
		if wc.conc, err = parseWorkers(*wconc); err != nil {
			fail(err)
		}
		for _, sys := range strings.Split(*systems, ",") {
			if !slices.Contains(workerSystems, sys) {
				fail(fmt.Errorf("-systems: unknown program %q", sys))
			}
			wc.systems = append(wc.systems, sys)
		}
		if wc.selfPath, err = os.Executable(); err != nil {
			fail(err)
		}
		if wc.command == "" {
			wc.command = strings.Join(os.Args, " ")
		}
		if err := runWorkerBench(&wc); err != nil {
			fail(err)
		}
		return
	case "redis":
		rc.bin, rc.dir, rc.install, rc.note = cfg.bin, cfg.dir, cfg.install, cfg.note
		if err := runRecipes(&rc, *out); err != nil {
			fail(err)
		}
		return
	case "changes":
		cc.bin, cc.dir, cc.install, cc.note = cfg.bin, cfg.dir, cfg.install, cfg.note
		if cc.subs, err = parseWorkers(*csubs); err != nil {
			fail(err)
		}
		if err := runChanges(&cc, *out); err != nil {
			fail(err)
		}
		return
	case "memory":
		if mo.evict != "" {
			if err := runMemoryLimit(cfg.bin, cfg.dir, cfg.note, cfg.jobs, *out, mo); err != nil {
				fail(err)
			}
			return
		}
		if err := runMemory(cfg.bin, cfg.dir, cfg.note, cfg.jobs, cfg.install, *out, mo); err != nil {
			fail(err)
		}
		return
	default:
		fail(fmt.Errorf("-mode: %q is not queue, redis, changes, memory, workers or plainloop", *mode))
	}
	if cfg.workers, err = parseWorkers(*workers); err != nil {
		fail(err)
	}
	if cfg.parts, err = parseParts(*only); err != nil {
		fail(err)
	}
	if cfg.rounds < 1 {
		fail(fmt.Errorf("-rounds: %d is not a count of drives", cfg.rounds))
	}
	rep, err := run(cfg)
	if err != nil {
		fail(err)
	}
	fmt.Print(rep.markdown(1))
	if *out != "" {
		if err := rep.write(*out); err != nil {
			fail(err)
		}
	}
	if *docs != "" {
		if err := rep.updateDocs(*docs); err != nil {
			fail(err)
		}
	}
}

func parseWorkers(s string) ([]int, error) {
	var ws []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			return nil, fmt.Errorf("-workers: %q is not a worker count", f)
		}
		ws = append(ws, n)
	}
	sort.Ints(ws)
	return ws, nil
}

func parseParts(s string) (map[string]bool, error) {
	parts := map[string]bool{}
	for _, p := range strings.Split(s, ",") {
		p = strings.TrimSpace(p)
		known := false
		for _, a := range allParts {
			known = known || a == p
		}
		if !known {
			return nil, fmt.Errorf("-only: unknown part %q", p)
		}
		parts[p] = true
	}
	return parts, nil
}

// run measures the parts cfg asks for, in order, and returns the report.
func run(cfg config) (*report, error) {
	tmp, err := os.MkdirTemp(cfg.dir, "queuebench-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)
	if (cfg.parts["postgres"] || cfg.parts["redis"]) && cfg.install {
		if err := ensurePeers(); err != nil {
			return nil, err
		}
	}
	rep := newReport(cfg)
	step := func(what string, fn func() ([]figure, error)) error {
		start := time.Now()
		fmt.Fprintf(os.Stderr, "queuebench: %s…\n", what)
		figs, err := fn()
		if err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
		fmt.Fprintf(os.Stderr, "queuebench: %s took %.0f s\n", what, time.Since(start).Seconds())
		rep.Figures = append(rep.Figures, figs...)
		return nil
	}
	p := cfg.parts
	steps := []struct {
		on   bool
		what string
		fn   func() ([]figure, error)
	}{
		{p["claim"], "the claim's cost", func() ([]figure, error) { return claimCost(cfg.jobs) }},
		{p["process"], "workers in process", func() ([]figure, error) {
			return inProcess(tmp, cfg.jobs, cfg.workers, cfg.duration, cfg.rounds)
		}},
		{p["http"] || p["https"] || p["postgres"] || p["redis"], "workers over the network", func() ([]figure, error) {
			return network(&comparison{bin: cfg.bin, dir: tmp, jobs: cfg.jobs, workers: cfg.workers, duration: cfg.duration, rounds: cfg.rounds,
				fenec: p["http"], https: p["https"], postgres: p["postgres"], redis: p["redis"], versions: rep.Versions})
		}},
		{p["wake"], "put → waiting worker", func() ([]figure, error) {
			return wake(cfg.bin, tmp, cfg.samples, cfg.rounds, p["redis"], rep.Versions)
		}},
		{p["delayed"], "delayed jobs", func() ([]figure, error) { return delayed(cfg.bin, cfg.samples/3) }},
		{p["idle"], "idle held claims", func() ([]figure, error) { return idle(cfg.bin, 1000) }},
		{p["couriers"], "held couriers", func() ([]figure, error) { return couriers(cfg.bin, []int{10, 100, 1000}, 100) }},
	}
	for _, s := range steps {
		if !s.on {
			continue
		}
		if err := step(s.what, s.fn); err != nil {
			return nil, err
		}
	}
	rep.Targets = targets(rep.Figures, cfg.jobs)
	return rep, nil
}

// percentiles returns the median and 99th percentile in milliseconds,
// sorting d.
func percentiles(d []time.Duration) (p50, p99 float64) {
	if len(d) == 0 {
		return 0, 0
	}
	sort.Slice(d, func(i, j int) bool { return d[i] < d[j] })
	at := func(q float64) float64 {
		return float64(d[int(q*float64(len(d)-1))]) / float64(time.Millisecond)
	}
	return at(0.5), at(0.99)
}

// millis returns durations in milliseconds.
func millis(d []time.Duration) []float64 {
	out := make([]float64, len(d))
	for i, v := range d {
		out[i] = float64(v) / float64(time.Millisecond)
	}
	return out
}

// tempFile returns a fresh file name under dir.
func tempFile(dir, name string) string {
	return filepath.Join(dir, fmt.Sprintf("%s-%d.db", name, time.Now().UnixNano()))
}
