package httpapi

import (
	"bufio"
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/fenecdb/fenec/server/engine"
	"github.com/fenecdb/fenec/server/internal/testwait"
	"github.com/fenecdb/fenec/server/store"
)

// benchServeEnv, when set, makes the test binary a server for the
// benchmarks below instead of running tests: a process of its own, so that
// its CPU time and allocations are the server's alone, not the client's.
const benchServeEnv = "FENEC_HTTPAPI_BENCH_SERVE"

func TestMain(m *testing.M) {
	if dir := os.Getenv(benchServeEnv); dir != "" {
		if err := benchServe(dir, os.Getenv("FENEC_HTTPAPI_BENCH_SYNC")); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	flag.Parse()
	// The parallel tests wait on connections, timeouts and held claims far
	// more than they compute.
	testwait.Parallel(4)
	os.Exit(m.Run())
}

// benchServe serves a database in dir on a loopback port it prints, until
// its standard input closes. It serves as fenec serve does: the same
// collector settings (TuneGC) and connection server (NewHTTPServer),
// so that its figures are the binary's.
func benchServe(dir, sync string) error {
	TuneGC(0)
	mode, err := store.ParseSync(sync)
	if err != nil {
		return err
	}
	m := NewMetrics()
	inbound := store.NewInbound(0)
	db, err := engine.Open(engine.Options{File: filepath.Join(dir, "bench.db"), Sync: mode, Inbound: inbound})
	if err != nil {
		return err
	}
	defer db.Close()
	db.Subscribe(m.Stored, engine.Stored)
	s, err := New(Config{DB: db, Metrics: m})
	if err != nil {
		return err
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	fmt.Println(l.Addr().String())
	// FENEC_HTTPAPI_BENCH_PROFILE names a file prefix for the server
	// process's profiles of the measured requests alone (measure signals
	// their start and end): <prefix>.cpu, and <prefix>.allocs0 and .allocs1
	// to compare (go tool pprof -diff_base).
	if prefix := os.Getenv("FENEC_HTTPAPI_BENCH_PROFILE"); prefix != "" {
		sig := make(chan os.Signal, 2)
		signal.Notify(sig, syscall.SIGUSR1)
		go func() {
			for i := 0; ; i++ {
				<-sig
				runtime.GC() // the profile is as of the last collection
				if out, err := os.Create(fmt.Sprintf("%s.allocs%d", prefix, i)); err == nil {
					_ = pprof.Lookup("allocs").WriteTo(out, 0)
					out.Close()
				}
				if i == 0 {
					if out, err := os.Create(prefix + ".cpu"); err == nil {
						_ = pprof.StartCPUProfile(out)
					}
				} else {
					pprof.StopCPUProfile()
				}
			}
		}()
	}
	go func() { _, _ = io.Copy(io.Discard, os.Stdin); l.Close() }()
	srv := NewHTTPServer(s, slog.New(slog.NewTextHandler(os.Stderr, nil)))
	// FENEC_HTTPAPI_BENCH_NOHOLD=1 serves without the count of requests
	// on their way, so the store's syncs never hold (store.Inbound): the
	// hold's effect, compared in one binary.
	if os.Getenv("FENEC_HTTPAPI_BENCH_NOHOLD") == "" {
		srv.CountInbound(inbound)
	}
	if err := srv.Serve(l); !strings.Contains(fmt.Sprint(err), "closed") {
		return err
	}
	return nil
}

// benchServer is a server process started by benchServe, and a client
// keeping its connection alive as a worker's would.
type benchServer struct {
	cmd  *exec.Cmd
	in   io.WriteCloser
	base string
	c    *http.Client
	// units is how many units (requests that write) an op makes, if
	// known: measureN then reports units/sync.
	units float64
}

func startBenchServer(b *testing.B, sync string) *benchServer {
	b.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	// As fenec serve runs (SchedEnv).
	cmd.Env, _ = SchedEnv(append(os.Environ(), benchServeEnv+"="+b.TempDir(), "FENEC_HTTPAPI_BENCH_SYNC="+sync))
	cmd.Stderr = os.Stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		b.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	addr, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		b.Fatalf("the server process: %v", err)
	}
	// One transport for every client of the benchmark, keeping as many
	// idle connections as it has workers, as queue-bench's clients do: each
	// worker's requests go over a connection it keeps.
	tr := &http.Transport{MaxIdleConnsPerHost: 64}
	s := &benchServer{cmd: cmd, in: in, base: "http://" + strings.TrimSpace(addr), c: &http.Client{Transport: tr}}
	b.Cleanup(func() {
		in.Close()
		_ = cmd.Wait()
	})
	return s
}

// post sends a body and returns the answer's body; any status but 200
// fails the benchmark.
func (s *benchServer) post(b *testing.B, path string, body []byte) []byte {
	out, err := s.send(path, body)
	if err != nil {
		b.Fatal(err)
	}
	return out
}

// send is post answering an error, for a goroutine of the benchmark's.
func (s *benchServer) send(path string, body []byte) ([]byte, error) {
	r, err := s.c.Post(s.base+path, "application/json", bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	out, err := io.ReadAll(r.Body)
	r.Body.Close()
	if err != nil || r.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s: %d %s %v", path, r.StatusCode, out, err)
	}
	return out, nil
}

func (s *benchServer) query(b *testing.B, q string, params ...any) []byte {
	m := map[string]any{"query": q}
	if len(params) > 0 {
		m["params"] = params
	}
	body, err := json.Marshal(m)
	if err != nil {
		b.Fatal(err)
	}
	return s.post(b, "/query", body)
}

// usageFold returns the server process's CPU time (/proc/<pid>/stat, user
// and system), its Go allocations so far (/_metrics' Go collector),
// fenec_store_unfolded_bytes (the store's log not yet folded into its
// tables) and fenec_store_fsyncs_total.
func (s *benchServer) usageFold(b *testing.B) (cpu time.Duration, mallocs, bytes, unfolded, fsyncs float64) {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", s.cmd.Process.Pid))
	if err != nil {
		b.Fatal(err)
	}
	f := strings.Fields(string(raw[strings.LastIndexByte(string(raw), ')')+2:]))
	utime, _ := strconv.ParseInt(f[11], 10, 64)
	stime, _ := strconv.ParseInt(f[12], 10, 64)
	cpu = time.Duration(utime+stime) * time.Second / 100 // USER_HZ
	r, err := s.c.Get(s.base + "/_metrics")
	if err != nil {
		b.Fatal(err)
	}
	defer r.Body.Close()
	sc := bufio.NewScanner(r.Body)
	for sc.Scan() {
		name, v, ok := strings.Cut(sc.Text(), " ")
		switch {
		case !ok:
		case name == "go_memstats_mallocs_total":
			mallocs, _ = strconv.ParseFloat(v, 64)
		case name == "go_memstats_alloc_bytes_total":
			bytes, _ = strconv.ParseFloat(v, 64)
		case name == "fenec_store_unfolded_bytes":
			unfolded, _ = strconv.ParseFloat(v, 64)
		case name == "fenec_store_fsyncs_total":
			fsyncs, _ = strconv.ParseFloat(v, 64)
		}
	}
	return cpu, mallocs, bytes, unfolded, fsyncs
}

// switches returns the server process's context switches so far, its
// threads' voluntary and involuntary ones summed (/proc/<pid>/task/*/status),
// or -1 where /proc does not tell. A thread that sleeps and wakes again
// (the runtime's monitor polling while a goroutine sits in fdatasync, an
// idle M woken for a ready goroutine) costs a switch each time: a count
// the load of a shared machine moves far less than CPU time
// (docs/benchmarks.md, "The durable path's CPU").
func (s *benchServer) switches() int64 {
	dir := fmt.Sprintf("/proc/%d/task", s.cmd.Process.Pid)
	tasks, err := os.ReadDir(dir)
	if err != nil {
		return -1
	}
	var n int64
	for _, t := range tasks {
		raw, err := os.ReadFile(filepath.Join(dir, t.Name(), "status"))
		if err != nil {
			continue // the thread exited meanwhile
		}
		for _, line := range strings.Split(string(raw), "\n") {
			if name, v, ok := strings.Cut(line, ":"); ok && strings.HasSuffix(name, "ctxt_switches") {
				k, _ := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
				n += k
			}
		}
	}
	return n
}

// benchFoldEnv, when set, has measureN wait for the store to fold its log
// before the measured requests, and again after them, reporting
// server-µs/op-folded: the server's CPU from the first request until the
// store has folded every change they made into its tables (which it
// does in the background, up to 10 s later), per op.
const benchFoldEnv = "FENEC_HTTPAPI_BENCH_FOLD"

// folded waits until the store's log is folded whole (3 minutes at most)
// and returns the server's CPU time then. It asks once a second: a scrape
// of /_metrics costs the server about 2 ms of CPU.
func (s *benchServer) folded(b *testing.B) time.Duration {
	for deadline := time.Now().Add(3 * time.Minute); ; time.Sleep(time.Second) {
		cpu, _, _, unfolded, _ := s.usageFold(b)
		if unfolded == 0 {
			return cpu
		}
		if time.Now().After(deadline) {
			b.Fatalf("the store still holds %.0f bytes of log to fold after 3 minutes", unfolded)
		}
	}
}

// measure runs n requests (one after the other, on one kept-alive
// connection) and reports the server's CPU and allocations per request:
// server-µs/op, server-allocs/op and server-B/op. -benchmem's own columns
// are the client's (the benchmark's process), not the server's.
func (s *benchServer) measure(b *testing.B, rows int, run func(i int)) {
	s.measureN(b, b.N, rows, run)
}

// measureN is measure with run called n times (benchQueue's one call runs
// every job), the figures still per b.N.
func (s *benchServer) measureN(b *testing.B, calls, rows int, run func(i int)) {
	profile := os.Getenv("FENEC_HTTPAPI_BENCH_PROFILE") != ""
	fold := os.Getenv(benchFoldEnv) != ""
	if fold {
		s.folded(b) // the fill's fold is not the measured requests'
	}
	cpu0, m0, b0, _, sync0 := s.usageFold(b)
	cs0 := s.switches()
	if profile {
		_ = s.cmd.Process.Signal(syscall.SIGUSR1)
		time.Sleep(100 * time.Millisecond)
	}
	b.ResetTimer()
	for i := 0; i < calls; i++ {
		run(i)
	}
	b.StopTimer()
	cs1 := s.switches()
	cpu1, m1, b1, _, sync1 := s.usageFold(b)
	if profile {
		_ = s.cmd.Process.Signal(syscall.SIGUSR1)
		time.Sleep(time.Second)
	}
	n := float64(b.N)
	b.ReportMetric(float64((cpu1-cpu0).Microseconds())/n, "server-µs/op")
	b.ReportMetric((m1-m0)/n, "server-allocs/op")
	b.ReportMetric((b1-b0)/n, "server-B/op")
	if cs0 >= 0 && cs1 >= 0 {
		b.ReportMetric(float64(cs1-cs0)/n, "server-cs/op")
	}
	if rows > 0 {
		b.ReportMetric((m1-m0)/n/float64(rows), "server-allocs/row")
	}
	if s.units > 0 && sync1 > sync0 {
		b.ReportMetric(s.units*n/(sync1-sync0), "units/sync")
	}
	if fold {
		b.ReportMetric(float64((s.folded(b)-cpu0).Microseconds())/n, "server-µs/op-folded")
	}
}

const benchJobs = `create collection jobs (payload json, run_at timestamp @sorted, owner text, attempts int, error text)`

// fillBench puts n ready jobs, oldest first, and waits until they are
// committed (each put is answered once durable).
func (s *benchServer) fillBench(b *testing.B, n int) {
	for i := 0; i < n; i += 2000 {
		docs := make([]any, 0, 2000)
		for k := i; k < n && k < i+2000; k++ {
			docs = append(docs, map[string]any{"payload": map[string]any{"to": fmt.Sprintf("u%d@example.com", k)},
				"run_at": time.Now().Add(-time.Hour).UnixMilli() + int64(k), "attempts": 0})
		}
		s.query(b, `put jobs $1`, docs)
	}
}

// BenchmarkHTTP is the whole HTTP path of the queue page's steps, from a
// real client over loopback to a server process of its own, under
// --sync always and off: a claim of ten returning its rows, a /batch acking ten
// jobs, and a put of one job. Its figures are the server's CPU time and
// allocations per request:
//
//	cd server && go test ./httpapi -run '^$' -bench BenchmarkHTTP -benchtime 3000x
func BenchmarkHTTP(b *testing.B) {
	for _, sync := range []string{"always", "off"} {
		b.Run("sync="+sync, func(b *testing.B) { benchHTTP(b, sync) })
	}
}

// BenchmarkHTTPQueue is the queue page's worker loop over HTTP, as
// queue-bench runs it: workers clients at once, each on a connection of
// its own, claiming ten jobs with returning and acking them in a /batch of
// ten deletes. An op is one job (b.N jobs in all); its figures are the
// server's CPU time and allocations per job:
//
//	cd server && go test ./httpapi -run '^$' -bench BenchmarkHTTPQueue -benchtime 20000x
//
// With FENEC_HTTPAPI_BENCH_FOLD=1 it also reports server-µs/op-folded, the
// CPU per job with the store's fold of the jobs' changes (benchFoldEnv).
// Under off the store writes no log until 64 MB of changes are queued, so
// nothing is folded and the two figures agree; sync=always shows the fold,
// and so does sync=250, queue-bench's relaxed server (--sync 250).
// units/sync is the requests that wrote (a claim and a /batch per ten
// jobs) over the syncs of the log made meanwhile.
func BenchmarkHTTPQueue(b *testing.B) {
	for _, sync := range []string{"always", "off", "250"} {
		for _, workers := range []int{1, 2, 4, 16} {
			b.Run(fmt.Sprintf("sync=%s/workers=%d", sync, workers), func(b *testing.B) { benchQueue(b, sync, workers) })
		}
	}
}

func benchQueue(b *testing.B, mode string, workers int) {
	const claim = `set jobs {owner: $1, run_at: now() + 30000, attempts: attempts + 1} where run_at <= now() order run_at limit 10 returning *`
	const ack = `del jobs where id = $1 and owner = $2 require 1`
	s := startBenchServer(b, mode)
	s.query(b, benchJobs)
	s.units = 0.2 // a claim and a /batch per ten jobs
	claims := (b.N + 9) / 10
	s.fillBench(b, claims*10)
	var next atomic.Int64
	var done sync.WaitGroup
	s.measureN(b, 1, 0, func(int) {
		for w := range workers {
			done.Add(1)
			go func() {
				defer done.Done()
				owner := fmt.Sprintf("w%d", w)
				body, _ := json.Marshal(map[string]any{"query": claim, "params": []any{owner}})
				for next.Add(1) <= int64(claims) {
					var rows []struct {
						ID int64 `json:"id"`
					}
					out, err := s.send("/query", body)
					if err == nil {
						err = json.Unmarshal(out, &rows)
					}
					if err != nil || len(rows) != 10 {
						b.Errorf("the claim took %d rows: %v", len(rows), err)
						return
					}
					stmts := make([]any, len(rows))
					for k, r := range rows {
						stmts[k] = map[string]any{"query": ack, "params": []any{r.ID, owner}}
					}
					batch, _ := json.Marshal(map[string]any{"statements": stmts})
					if _, err := s.send("/batch", batch); err != nil {
						b.Error(err)
						return
					}
				}
			}()
		}
		done.Wait()
	})
}

func benchHTTP(b *testing.B, sync string) {
	claim := `set jobs {owner: $1, run_at: now() + 30000, attempts: attempts + 1} where run_at <= now() order run_at limit 10 returning *`
	ack := `del jobs where id = $1 and owner = $2 require 1`

	b.Run("claim10", func(b *testing.B) {
		s := startBenchServer(b, sync)
		s.query(b, benchJobs)
		s.fillBench(b, b.N*10+10)
		body, _ := json.Marshal(map[string]any{"query": claim, "params": []any{"w1"}})
		s.measure(b, 10, func(int) {
			if out := s.post(b, "/query", body); bytes.Count(out, []byte(`"id"`)) != 10 {
				b.Fatalf("the claim took %s", out)
			}
		})
	})

	b.Run("batch-ack10", func(b *testing.B) {
		s := startBenchServer(b, sync)
		s.query(b, benchJobs)
		s.fillBench(b, b.N*10)
		// The jobs are claimed before the clock starts; acked while it runs.
		s.query(b, `set jobs {owner: "w1"}`)
		bodies := make([][]byte, b.N)
		for i := range bodies {
			stmts := make([]any, 10)
			for k := range stmts {
				stmts[k] = map[string]any{"query": ack, "params": []any{i*10 + k + 1, "w1"}}
			}
			bodies[i], _ = json.Marshal(map[string]any{"statements": stmts})
		}
		s.measure(b, 0, func(i int) { s.post(b, "/batch", bodies[i]) })
	})

	b.Run("put", func(b *testing.B) {
		s := startBenchServer(b, sync)
		s.query(b, benchJobs)
		body, _ := json.Marshal(map[string]any{"query": `put jobs {payload: {"to": $1}, run_at: now(), attempts: 0}`, "params": []any{"someone@example.com"}})
		s.measure(b, 0, func(int) { s.post(b, "/query", body) })
	})
}
