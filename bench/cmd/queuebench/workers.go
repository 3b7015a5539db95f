package main

// `make worker-bench` (-mode workers): each SDK's worker beside a plain
// HTTP loop, on the default (durable) server, as a user meets them. Every
// worker is a program of its own under bench/workers/, using its SDK from
// this checkout as the SDK's README says; this command starts one server
// per run, puts the jobs, starts the program, and times it from the
// moment the program says it is ready until `get jobs count` is 0.

import (
	"bufio"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// workerJobsSchema is docs/workers.md's queue.
const workerJobsSchema = `create collection jobs (payload json, run_at timestamp @sorted, owner text, attempts int, error text)`

// workerConfig is a -mode workers run's settings.
type workerConfig struct {
	bin      string
	dir      string // bench/workers
	systems  []string
	conc     []int
	jobs     int           // put before each run
	limit    time.Duration // each run's bound: it stops then, whatever is left
	rounds   int
	command  string // what made the run, for the results' header
	note     string
	out      string
	tmp      string
	selfPath string // this program, run again as the plain loop
}

// workerSystems are the programs a run can measure, in the order they are
// run in a round's first turn (later turns rotate it).
var workerSystems = []string{"plain", "go", "js", "python", "python-async", "kotlin"}

// systemCommand returns the command that runs one system at concurrency c
// against url; each prints "ready" when it is about to work, and stops
// (gracefully, as its README says) when its stdin is closed.
func (cfg *workerConfig) systemCommand(system, url string, c int) *exec.Cmd {
	cs := strconv.Itoa(c)
	d := cfg.dir
	switch system {
	case "plain":
		return exec.Command(cfg.selfPath, "-mode", "plainloop", "-url", url, "-concurrency", cs)
	case "go":
		return exec.Command(filepath.Join(d, "go", "worker"), url, cs)
	case "js":
		return exec.Command("node", filepath.Join(d, "js", "worker.mjs"), url, cs)
	case "python":
		return exec.Command(filepath.Join(d, "python", ".venv", "bin", "python"), filepath.Join(d, "python", "worker.py"), url, cs, "threads")
	case "python-async":
		return exec.Command(filepath.Join(d, "python", ".venv", "bin", "python"), filepath.Join(d, "python", "worker.py"), url, cs, "asyncio")
	case "kotlin":
		cp, _ := os.ReadFile(filepath.Join(d, "kotlin", "target", "cp.txt"))
		return exec.Command("java", "-cp", filepath.Join(d, "kotlin", "target", "classes")+":"+strings.TrimSpace(string(cp)), "MainKt", url, cs)
	}
	return nil
}

// systemName is the line's name in the table.
var systemName = map[string]string{
	"plain":        "plain HTTP loop (Go net/http): claim ≤ 10, one `del … id in $1 and owner = $2`",
	"go":           "Go `NewWorker`",
	"js":           "JS `worker()`",
	"python":       "Python `Worker` (threads)",
	"python-async": "Python `AsyncWorker`",
	"kotlin":       "Kotlin `Worker`",
}

// workerRun is one system's run at one concurrency.
type workerRun struct {
	system    string
	conc      int
	done      int // jobs gone from the queue
	elapsed   time.Duration
	clientCPU time.Duration
	serverCPU time.Duration
	fsyncs    float64
	requests  float64 // POST /query and /batch answered
	err       error
}

func (r workerRun) perJob(d time.Duration) float64 {
	if r.done == 0 {
		return math.NaN()
	}
	return float64(d.Microseconds()) / float64(r.done)
}

func runWorkerBench(cfg *workerConfig) error {
	_, err := cfg.run()
	return err
}

// run measures every system at every concurrency, prints the table and,
// with cfg.out, writes it into workers.md there.
func (cfg *workerConfig) run() ([]workerRun, error) {
	var runs []workerRun
	for _, c := range cfg.conc {
		for round := range cfg.rounds {
			for _, sys := range rotate(cfg.systems, round) {
				r := cfg.runOne(sys, c)
				if r.err != nil {
					fmt.Fprintf(os.Stderr, "queuebench: %s at %d: %v\n", sys, c, r.err)
				} else {
					fmt.Fprintf(os.Stderr, "queuebench: %s at %d: %d jobs in %s, %.0f jobs/s\n", sys, c, r.done, r.elapsed.Round(time.Millisecond), float64(r.done)/r.elapsed.Seconds())
				}
				runs = append(runs, r)
			}
		}
	}
	md := cfg.workersMarkdown(runs)
	fmt.Print(md)
	if cfg.out == "" {
		return runs, nil
	}
	if err := os.MkdirAll(cfg.out, 0o755); err != nil {
		return runs, err
	}
	return runs, os.WriteFile(filepath.Join(cfg.out, "workers.md"), []byte(md), 0o644)
}

// runOne starts a server on a fresh file, puts the jobs, and runs one
// system until the queue is empty or the run's time is up.
func (cfg *workerConfig) runOne(sys string, c int) (r workerRun) {
	r = workerRun{system: sys, conc: c}
	dir, err := os.MkdirTemp(cfg.tmp, "workerbench")
	if err != nil {
		r.err = err
		return r
	}
	defer os.RemoveAll(dir)
	s, err := startServer(cfg.bin, "--file", filepath.Join(dir, "jobs.db"))
	if err != nil {
		r.err = err
		return r
	}
	defer s.stop()
	s.must(workerJobsSchema)
	for left := cfg.jobs; left > 0; left -= loadBatch {
		docs := make([]any, min(left, loadBatch))
		for i, j := range newJobs(len(docs)) {
			docs[i] = fenecDoc(j)
		}
		s.must(putJobs, docs)
	}
	cmd := cfg.systemCommand(sys, s.url, c)
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		r.err = err
		return r
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		r.err = err
		return r
	}
	if err := cmd.Start(); err != nil {
		r.err = fmt.Errorf("starting %s: %w (built by make worker-bench?)", cmd, err)
		return r
	}
	exited := make(chan struct{})
	var once sync.Once
	finish := func() {
		once.Do(func() {
			stdin.Close()
			select {
			case <-exited:
			case <-time.After(40 * time.Second):
				cmd.Process.Kill()
				<-exited
			}
		})
	}
	ready := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(out)
		said := false
		for sc.Scan() {
			if !said && strings.TrimSpace(sc.Text()) == "ready" {
				said = true
				close(ready)
			}
		}
		if !said {
			close(ready)
		}
		cmd.Wait()
		close(exited)
	}()
	defer finish()
	select {
	case <-ready:
	case <-time.After(2 * time.Minute):
		r.err = fmt.Errorf("%s did not say ready in 2 minutes", sys)
		return r
	}
	select {
	case <-exited:
		r.err = fmt.Errorf("%s exited before its run: %v", sys, cmd.ProcessState)
		return r
	default:
	}
	pid := cmd.Process.Pid
	client0, server0, start := procCPU(pid), s.cpu(), time.Now()
	m0, _ := s.metrics()
	left, polls := cfg.jobs, 0
	for deadline := start.Add(cfg.limit); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		rows, err := s.query(`get jobs count`, nil, 0)
		polls++
		if err != nil {
			r.err = err
			return r
		}
		if left = countOf(rows); left == 0 {
			break
		}
	}
	r.elapsed = time.Since(start)
	r.clientCPU, r.serverCPU = procCPU(pid)-client0, s.cpu()-server0
	m1, _ := s.metrics()
	r.fsyncs = m1["fenec_store_fsyncs_total"] - m0["fenec_store_fsyncs_total"]
	r.requests = m1["posts"] - m0["posts"] - float64(polls) // the program's alone
	r.done = cfg.jobs - left
	finish()
	if st := cmd.ProcessState; st != nil && !st.Success() {
		fmt.Fprintf(os.Stderr, "queuebench: %s at %d stopped with %v\n", sys, c, st)
	}
	return r
}

// countOf reads `get jobs count`'s answer, a number or rows of one.
func countOf(rows []map[string]any) int {
	for _, row := range rows {
		for _, v := range row {
			if n, err := strconv.Atoi(fmt.Sprint(v)); err == nil {
				return n
			}
		}
	}
	return -1
}

// metrics reads /_metrics: the fsync counter, and the POSTs answered
// (every route's, summed, as "posts").
func (s *server) metrics() (map[string]float64, error) {
	resp, err := s.http.Get(s.url + "/_metrics")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	m := map[string]float64{}
	for _, line := range strings.Split(string(b), "\n") {
		name, v, ok := strings.Cut(line, " ")
		if !ok || strings.HasPrefix(line, "#") {
			continue
		}
		f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
		if err != nil {
			continue
		}
		switch {
		case name == "fenec_store_fsyncs_total":
			m[name] = f
		case strings.HasPrefix(name, "fenec_http_requests_total{") && (strings.Contains(name, `route="/query"`) || strings.Contains(name, `route="/batch"`)):
			m["posts"] += f
		}
	}
	return m, nil
}

func (cfg *workerConfig) workersMarkdown(runs []workerRun) string {
	var b strings.Builder
	load, _ := os.ReadFile("/proc/loadavg")
	fmt.Fprintf(&b, "# Worker benchmark\n\n%s, on %s: %d cores, %.0f GiB, %s; load average before the run %s.  \n",
		time.Now().UTC().Format("2006-01-02 15:04 UTC"), cpuModel(), runtime.NumCPU(), memGiB(), osName(), strings.Join(strings.Fields(string(load))[:3], " "))
	fmt.Fprintf(&b, "Made by `%s` (fenec %s).  \n", cfg.command, fenecVersion())
	fmt.Fprintf(&b, "Each run: a fresh `fenec serve --file` (the default: every write synced before it is answered), %s jobs put first, then one program — a worker of its SDK from this checkout (bench/workers/), or the plain loop — timed from when it says it is ready until `get jobs count` is 0 (or %s). Systems alternate within each round; %s per concurrency; the median of the rounds is shown, the rounds beside it. Handlers do nothing.  \n",
		count(cfg.jobs), cfg.limit, plural(cfg.rounds, "round"))
	b.WriteString("Client CPU: the program's own process (user + system, /proc), over the run; server CPU: the server's; fsyncs: `fenec_store_fsyncs_total`; requests: POST /query and /batch answered.")
	if slices.Contains(cfg.systems, "js") {
		// V8 compiles its hot code while it runs, as a JVM does: cold, about a third of a 10 000-job run's client CPU.
		b.WriteString("  \nThe JS program warms V8 before it says it is ready (bench/workers/js): a worker of the same concurrency first runs rounds of 10 000 jobs of a collection of its own until a round's CPU per job is not 5 % under the best round's before it (at most a minute); `FENEC_BENCH_WARM=0` measures it cold.")
	}
	if slices.Contains(cfg.systems, "kotlin") {
		// A JVM compiles its hot code while it runs; a worker that has run a while is warm.
		b.WriteString("  \nThe Kotlin program warms its JVM before it says it is ready (bench/workers/kotlin): a worker of the same concurrency first runs rounds of 10 000 jobs of a collection of its own until a round spends under 2 % of its time in the JIT compiler (at most a minute), so the run measures a warm worker, not class loading and compiling; `FENEC_BENCH_WARM=0` measures it cold.")
	}
	b.WriteString("\n")
	if cfg.note != "" {
		fmt.Fprintf(&b, "\n%s\n", cfg.note)
	}
	for _, c := range cfg.conc {
		fmt.Fprintf(&b, "\n## Concurrency %d\n\n", c)
		b.WriteString("| worker | jobs/s | × plain | client CPU µs/job | server CPU µs/job | fsyncs/job | requests/job | rounds (jobs/s) |\n| --- | --- | --- | --- | --- | --- | --- | --- |\n")
		plain := medianOf(runs, "plain", c, func(r workerRun) float64 { return float64(r.done) / r.elapsed.Seconds() })
		for _, sys := range cfg.systems {
			var rs []workerRun
			var errs []string
			for _, r := range runs {
				if r.system == sys && r.conc == c {
					if r.err != nil {
						errs = append(errs, r.err.Error())
						continue
					}
					rs = append(rs, r)
				}
			}
			if len(rs) == 0 {
				fmt.Fprintf(&b, "| %s | failed: %s | | | | | | |\n", systemName[sys], strings.Join(errs, "; "))
				continue
			}
			jps := medianOf(rs, sys, c, func(r workerRun) float64 { return float64(r.done) / r.elapsed.Seconds() })
			var each []string
			for _, r := range rs {
				s := fmt.Sprintf("%.0f", float64(r.done)/r.elapsed.Seconds())
				if r.done < cfg.jobs {
					s += fmt.Sprintf(" (%d of %d jobs)", r.done, cfg.jobs)
				}
				each = append(each, s)
			}
			ratio := ""
			if plain > 0 {
				ratio = fmt.Sprintf("%.2f", jps/plain)
			}
			fmt.Fprintf(&b, "| %s | %.0f | %s | %.0f | %.0f | %.2f | %.2f | %s |\n", systemName[sys], jps, ratio,
				medianOf(rs, sys, c, func(r workerRun) float64 { return r.perJob(r.clientCPU) }),
				medianOf(rs, sys, c, func(r workerRun) float64 { return r.perJob(r.serverCPU) }),
				medianOf(rs, sys, c, func(r workerRun) float64 { return r.fsyncs / float64(max(r.done, 1)) }),
				medianOf(rs, sys, c, func(r workerRun) float64 { return r.requests / float64(max(r.done, 1)) }),
				strings.Join(each, ", "))
			if len(errs) > 0 {
				fmt.Fprintf(&b, "| %s: %d run(s) failed | %s | | | | | | |\n", systemName[sys], len(errs), strings.Join(errs, "; "))
			}
		}
	}
	return b.String()
}

// medianOf returns the median of f over the runs of sys at c that did not fail.
func medianOf(runs []workerRun, sys string, c int, f func(workerRun) float64) float64 {
	var vs []float64
	for _, r := range runs {
		if r.system == sys && r.conc == c && r.err == nil {
			vs = append(vs, f(r))
		}
	}
	if len(vs) == 0 {
		return 0
	}
	sort.Float64s(vs)
	if len(vs)%2 == 1 {
		return vs[len(vs)/2]
	}
	return (vs[len(vs)/2-1] + vs[len(vs)/2]) / 2
}

// plainLoop is the plain HTTP loop as a program of its own (-mode
// plainloop), so its CPU is measured as the workers' is: ceil(c/10)
// loops, each claiming up to min(c, 10) jobs (held at the server while
// none is ready) and acking them in one statement, until stdin closes.
func plainLoop(url string, c int) error {
	s := newClientFor(url)
	loops, per := (c+9)/10, min(c, 10)
	var stop atomic.Bool
	var wg sync.WaitGroup
	fmt.Println("ready")
	for i := range loops {
		wg.Add(1)
		go func() {
			defer wg.Done()
			claim := fmt.Sprintf(`set jobs {owner: $1, run_at: now() + 30000, attempts: coalesce(attempts, 0) + 1} where run_at <= now() order run_at limit %d returning id`, per)
			for n := 1; !stop.Load(); n++ {
				owner := fmt.Sprintf("p%d:%d", i, n)
				rows, err := s.query(claim, []any{owner}, time.Second)
				if err != nil {
					fmt.Fprintln(os.Stderr, "plain loop:", err)
					time.Sleep(100 * time.Millisecond)
					continue
				}
				if len(rows) == 0 {
					continue
				}
				ids := make([]any, len(rows))
				for k, row := range rows {
					ids[k] = row["id"]
				}
				if _, err := s.query(`del jobs where id in $1 and owner = $2`, []any{ids, owner}, 0); err != nil {
					fmt.Fprintln(os.Stderr, "plain loop:", err)
				}
			}
		}()
	}
	io.Copy(io.Discard, os.Stdin)
	stop.Store(true)
	wg.Wait()
	return nil
}

// newClientFor is a client of a server this program did not start.
func newClientFor(url string) *server {
	return &server{url: url, http: &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 256}, Timeout: time.Minute}}
}
