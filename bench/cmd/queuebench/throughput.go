package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// batchSize is the claim's page for every system: ten jobs a claim.
const batchSize = 10

// A queue is one system's job queue as the throughput runs drive it: Fenec
// in process or over HTTP, PostgreSQL, Redis.
type queue interface {
	// fill tops the queue up to n ready jobs, in big batches.
	fill(n int) error
	// settle waits for the work a fill left behind (a store writing it
	// out, an append-only file rewritten) to end, so a run is not charged
	// for its load.
	settle() error
	// worker returns the i-th worker: its own connection, where the system
	// has connections.
	worker(i int) (worker, error)
	// serverPID returns the server's process, whose CPU time (with its
	// children's) a run is charged; 0 when the queue runs in this process.
	serverPID() int
}

// A drainer is a queue whose server goes on working for a run after it
// (Fenec's store folding the run's log into its tables): drain waits until
// that work is done, and ok says whether it could tell.
type drainer interface {
	drain() (ok bool, err error)
}

// A worker takes one batch at a time and acks each job of it.
type worker interface {
	// step claims up to batchSize jobs and acks each one it won. It
	// answers how long the claim took (every statement or round trip of
	// it, not the acks), the jobs it read and the jobs it won: a claim in
	// three statements reads jobs another worker takes before it writes
	// them. read 0 is an empty queue.
	step(ctx context.Context) (claim time.Duration, read, won int, err error)
	close()
}

// A tally is what a number of workers did in a run.
type tally struct {
	jobs   int // acked
	read   int // read by claims, won or not
	took   time.Duration
	claims []time.Duration
	cpu    time.Duration // the server's CPU time over the run; 0: not measured
	// client is this process's own CPU time over the run, its workers'
	// clients' (HTTP and JSON, pgx, go-redis); 0: not measured (a queue
	// in this process, whose CPU is the server's too).
	client time.Duration
	// drained is cpu with the server's background work for the run
	// (drainer) until it ended; 0: not measured.
	drained time.Duration
}

// drive runs n workers of q for d, or until the queue is empty, and
// returns what they did, once the server's work for the run is done too
// (start, then finish).
func drive(q queue, n int, d time.Duration) (tally, error) {
	t, finish, err := start(q, n, d)
	if err != nil {
		return tally{}, err
	}
	err = finish()
	return *t, err
}

// start runs n workers of q for d, or until the queue is empty, and
// returns what they did. Each worker finishes the batch in hand, so no job
// is left leased for the next run. finish waits for the server's work for
// the run (drainer) and adds its CPU to the tally; until then the tally
// has no drained figure, and the server may be busy: a group (network.go)
// lets it fold while the next group's queues fill, rather than waiting.
func start(q queue, n int, d time.Duration) (t *tally, finish func() error, err error) {
	ws := make([]worker, n)
	for i := range ws {
		w, err := q.worker(i)
		if err != nil {
			for _, w := range ws[:i] {
				w.close()
			}
			return nil, nil, err
		}
		ws[i] = w
	}
	defer func() {
		for _, w := range ws {
			w.close()
		}
	}()
	var (
		mu    sync.Mutex
		total tally
		first error
		wg    sync.WaitGroup
	)
	ctx := context.Background()
	// The server's CPU is read once every worker holds its connection, as
	// a user's pool would, and again before any lets it go.
	pid := q.serverPID()
	var cpu0, client0 time.Duration
	stop := func() {}
	if pid > 0 {
		stop = profile(pid)
		cpu0 = treeCPU(pid)
		client0 = selfCPU()
	}
	began := time.Now()
	deadline := began.Add(d)
	for _, w := range ws {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var mine tally
			var err error
			for time.Now().Before(deadline) {
				var t time.Duration
				var read, won int
				t, read, won, err = w.step(ctx)
				if err != nil || read == 0 {
					break
				}
				mine.claims = append(mine.claims, t)
				mine.read += read
				mine.jobs += won
			}
			mu.Lock()
			defer mu.Unlock()
			total.jobs += mine.jobs
			total.read += mine.read
			total.claims = append(total.claims, mine.claims...)
			if err != nil && first == nil {
				first = err
			}
		}()
	}
	wg.Wait()
	total.took = time.Since(began)
	if pid > 0 {
		total.client = selfCPU() - client0
		total.cpu = treeCPU(pid) - cpu0
	}
	if first != nil {
		stop()
		return nil, nil, first
	}
	finish = func() error {
		defer stop()
		if d, ok := q.(drainer); ok && pid > 0 {
			done, err := d.drain()
			if err != nil {
				return err
			}
			if done {
				total.drained = treeCPU(pid) - cpu0
			}
		}
		return nil
	}
	return &total, finish, nil
}

// sweep measures q at each worker count in rounds: in each round, for
// each count in turn, it fills q to n jobs, lets it settle and drives it
// for d; each count's cell is then the rounds' drives (cell). Round after
// round rather than count after count, so a slow patch of the host is
// shared among the counts rather than landing on one.
func sweep(q queue, n int, workers []int, d time.Duration, rounds int, lossy bool) ([]*result, error) {
	ts := make([][]tally, len(workers))
	for range rounds {
		for i, w := range workers {
			if err := q.fill(n); err != nil {
				return nil, err
			}
			if err := q.settle(); err != nil {
				return nil, err
			}
			t, err := drive(q, w, d)
			if err != nil {
				return nil, err
			}
			ts[i] = append(ts[i], t)
		}
	}
	out := make([]*result, len(workers))
	for i := range workers {
		out[i] = cell(ts[i], lossy)
	}
	return out, nil
}

// profiles numbers the runs profile records.
var profiles atomic.Int64

// profile records the server's CPU with perf (its call graphs) over a run
// and the work it leaves (drain), when QUEUEBENCH_PERF names a directory:
// the n-th run's goes to perf-n-<pid>.data there. It returns the function
// that stops the recording. A developer sees where the server's CPU went
// at the run's scale, which a run of the Go benchmarks on a small queue
// does not show.
func profile(pid int) (stop func()) {
	dir := os.Getenv("QUEUEBENCH_PERF")
	if dir == "" {
		return func() {}
	}
	out := filepath.Join(dir, "perf-"+strconv.FormatInt(profiles.Add(1), 10)+"-"+strconv.Itoa(pid)+".data")
	cmd := exec.Command("perf", "record", "-g", "-q", "-o", out, "-p", strconv.Itoa(pid))
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		fmt.Fprintln(os.Stderr, "queuebench: perf:", err)
		return func() {}
	}
	time.Sleep(200 * time.Millisecond) // perf attaches before the run starts
	return func() {
		cmd.Process.Signal(syscall.SIGINT)
		cmd.Wait()
	}
}
