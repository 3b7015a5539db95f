package fenecdb_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"maps"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/fenecdb/fenec/sdks/go"
	"github.com/fenecdb/fenec/sdks/go/internal/fenectest"
)

// faultsFail returns an OnError that fails the test on anything but a
// failed attempt or a dead letter (which a test's handler makes).
func faultsFail(t testing.TB) func(error) {
	return func(err error) {
		var we *fenecdb.WorkerError
		if errors.As(err, &we) && (we.Step == fenecdb.StepHandler || we.Step == fenecdb.StepDeadLetter) {
			return
		}
		t.Errorf("fault: %v", err)
	}
}

// queue starts a server on the system clock (a worker lives in real time)
// with n ready jobs, ids 1..n.
func queue(t testing.TB, n int, flags ...string) (*fenecdb.Client, *fenectest.Server) {
	t.Helper()
	srv := fenectest.StartServer(t, append([]string{"--file", ":memory:"}, flags...)...)
	db := connect(t, srv.URL)
	mustQuery(t, db, jobsSchema)
	fill(t, db, n)
	return db, srv
}

func fill(t testing.TB, db *fenecdb.Client, n int) {
	t.Helper()
	for i := 0; i < n; i += 500 {
		docs := make([]fenecdb.Doc, 0, 500)
		for j := i; j < min(i+500, n); j++ {
			docs = append(docs, fenecdb.D("payload", map[string]any{"n": j + 1}, "run_at", fenecdb.Expr("now()"), "attempts", 0))
		}
		if _, err := db.From("jobs").InsertMany(context.Background(), docs); err != nil {
			t.Fatal(err)
		}
	}
}

func fast(int) time.Duration { return 10 * time.Millisecond }

func newWorker(t testing.TB, db *fenecdb.Client, h fenecdb.Handler, o fenecdb.WorkerOptions) *fenecdb.Worker {
	t.Helper()
	if o.Backoff == nil {
		o.Backoff = fast
	}
	if o.OnError == nil {
		o.OnError = func(err error) { t.Logf("fault: %v", err) }
	}
	w, err := fenecdb.NewWorker(db.From("jobs"), h, o)
	if err != nil {
		t.Fatal(err)
	}
	return w
}

// start runs w until the answered stop is called (or the test ends),
// which waits for Run.
func start(t testing.TB, w *fenecdb.Worker) (stop func() error) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	stop = sync.OnceValue(func() error {
		cancel()
		if err := <-done; !errors.Is(err, context.Canceled) {
			return err
		}
		return nil
	})
	t.Cleanup(func() { stop() })
	return stop
}

func count(t testing.TB, db *fenecdb.Client, where string, args ...any) int64 {
	t.Helper()
	q := db.From("jobs")
	if where != "" {
		q = q.WhereRaw(fenecdb.Raw(where, args...))
	}
	n, err := q.Count(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestWorkerRunsEveryJobOnce: 1 000 jobs, two workers of concurrency 8, a
// seeded tenth of the jobs failing their first run and one job failing
// always: every other job's handler succeeds exactly once, the always
// failing job is a dead letter after MaxAttempts runs, nothing is left
// leased.
func TestWorkerRunsEveryJobOnce(t *testing.T) {
	const n = 1000
	db, _ := queue(t, n)
	rng := rand.New(rand.NewPCG(11, 42))
	failFirst := map[int64]bool{}
	for len(failFirst) < n/10 {
		failFirst[rng.Int64N(n)+1] = true
	}
	const doomed = 7
	var mu sync.Mutex
	ok := map[int64]int{}
	runs := map[int64]int64{}
	handler := func(ctx context.Context, job fenecdb.Job) error {
		mu.Lock()
		defer mu.Unlock()
		runs[job.ID]++
		if job.ID == doomed || (failFirst[job.ID] && job.Attempts == 1) {
			return fmt.Errorf("job %d failed attempt %d", job.ID, job.Attempts)
		}
		ok[job.ID]++
		return nil
	}
	opts := fenecdb.WorkerOptions{Concurrency: 8, OnError: faultsFail(t)}
	opts.OwnerPrefix = "a"
	stopA := start(t, newWorker(t, db, handler, opts))
	opts.OwnerPrefix = "b"
	stopB := start(t, newWorker(t, db, handler, opts))
	eventually(t, "the queue to drain", func() bool { return count(t, db, "") == 1 && count(t, db, "run_at is null") == 1 })
	if err := stopA(); err != nil {
		t.Fatal(err)
	}
	if err := stopB(); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	for id := int64(1); id <= n; id++ {
		want := 1
		if id == doomed {
			want = 0
		}
		if ok[id] != want {
			t.Errorf("job %d succeeded %d times, want %d", id, ok[id], want)
		}
	}
	if runs[doomed] != 5 {
		t.Errorf("the doomed job ran %d times, want MaxAttempts = 5", runs[doomed])
	}
	dead, err := db.From("jobs").Where("id", doomed).First(context.Background())
	if err != nil || dead == nil || dead.Get("attempts") != int64(5) || dead.Get("owner") != nil || dead.Get("run_at") != nil ||
		dead.Get("error") != "job 7 failed attempt 5" {
		t.Fatalf("the dead letter: %v %v", dead, err)
	}
	if leased := count(t, db, "owner is not null"); leased != 0 {
		t.Fatalf("%d jobs left leased", leased)
	}
}

// TestWorkerExtendsTheLease: a handler running 2.5 times the lease has its
// lease extended, and runs once though a second worker claims meanwhile.
func TestWorkerExtendsTheLease(t *testing.T) {
	db, _ := queue(t, 1)
	var runs atomic.Int32
	slow := func(ctx context.Context, job fenecdb.Job) error {
		runs.Add(1)
		select {
		case <-time.After(2500 * time.Millisecond):
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	opts := fenecdb.WorkerOptions{Lease: time.Second, Wait: 200 * time.Millisecond}
	stopA := start(t, newWorker(t, db, slow, opts))
	stopB := start(t, newWorker(t, db, slow, opts))
	eventually(t, "the job to be acked", func() bool { return count(t, db, "") == 0 })
	stopA()
	stopB()
	if runs.Load() != 1 {
		t.Fatalf("the job ran %d times, want 1", runs.Load())
	}
}

// TestWorkerLostLease: a job whose owner is moved while it runs has its
// handler cancelled at the next extension's 412, and is neither acked nor
// failed.
func TestWorkerLostLease(t *testing.T) {
	db, _ := queue(t, 1)
	started := make(chan struct{})
	cancelled := make(chan error, 1)
	h := func(ctx context.Context, job fenecdb.Job) error {
		close(started)
		<-ctx.Done()
		cancelled <- ctx.Err()
		return errors.New("cancelled")
	}
	reported := make(chan error, 10)
	stop := start(t, newWorker(t, db, h, fenecdb.WorkerOptions{Lease: time.Second, Wait: 200 * time.Millisecond,
		OnError: func(err error) { reported <- err }}))
	defer stop()
	<-started
	mustQuery(t, db, "set jobs {owner: 'thief'} where id = 1")
	select {
	case <-cancelled:
	case <-time.After(5 * time.Second):
		t.Fatal("the handler was not cancelled")
	}
	var we *fenecdb.WorkerError
	if err := <-reported; !errors.As(err, &we) || we.Step != fenecdb.StepLostLease || we.JobID != 1 || !strings.Contains(err.Error(), "lease was lost") {
		t.Fatalf("reported %v, want the lost lease of job 1", err)
	}
	time.Sleep(300 * time.Millisecond) // time for a wrong ack or fail to land
	row, err := db.From("jobs").Where("id", 1).First(context.Background())
	if err != nil || row == nil || row.Get("owner") != "thief" || row.Get("error") != nil || row.Get("attempts") != int64(1) {
		t.Fatalf("the job after its lease was lost: %v %v", row, err)
	}
}

// TestWorkerStop: a stopped worker's running handlers finish, and what it
// holds goes back at once: another worker takes the rest within 200 ms of
// the stop (the lease is 30 s). A handler still running after the grace
// period is cancelled and its job released, its attempt uncounted.
func TestWorkerStop(t *testing.T) {
	db, _ := queue(t, 40)
	var finished atomic.Int32
	var startedA atomic.Int32
	slow := func(ctx context.Context, job fenecdb.Job) error {
		startedA.Add(1)
		time.Sleep(300 * time.Millisecond)
		finished.Add(1)
		return nil
	}
	stopA := start(t, newWorker(t, db, slow, fenecdb.WorkerOptions{Concurrency: 8, OwnerPrefix: "a"}))
	eventually(t, "worker a to start jobs", func() bool { return startedA.Load() > 0 })
	if err := stopA(); err != nil {
		t.Fatal(err)
	}
	stopped := time.Now()
	if got := startedA.Load(); finished.Load() != got {
		t.Fatalf("%d handlers started, %d finished", got, finished.Load())
	}
	if n := count(t, db, "owner is not null"); n != 0 {
		t.Fatalf("%d jobs left leased by the stopped worker", n)
	}
	first := make(chan time.Time, 1)
	stopB := start(t, newWorker(t, db, func(ctx context.Context, job fenecdb.Job) error {
		select {
		case first <- time.Now():
		default:
		}
		return nil
	}, fenecdb.WorkerOptions{Concurrency: 8, OwnerPrefix: "b"}))
	if d := (<-first).Sub(stopped); d > 200*time.Millisecond {
		t.Errorf("worker b started a job %v after the stop, want within 200ms", d)
	}
	eventually(t, "worker b to drain the queue", func() bool { return count(t, db, "") == 0 })
	stopB()

	// The grace period.
	fill(t, db, 1)
	running := make(chan struct{})
	stuck := func(ctx context.Context, job fenecdb.Job) error {
		close(running)
		<-ctx.Done()
		return ctx.Err()
	}
	stopC := start(t, newWorker(t, db, stuck, fenecdb.WorkerOptions{Grace: 200 * time.Millisecond}))
	<-running
	begun := time.Now()
	if err := stopC(); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(begun); d < 200*time.Millisecond || d > 5*time.Second {
		t.Fatalf("the stop took %v, want the grace period of 200ms", d)
	}
	row, err := db.From("jobs").First(context.Background())
	if err != nil || row == nil || row.Get("owner") != nil || row.Get("attempts") != int64(0) || row.Get("error") != nil {
		t.Fatalf("the job cancelled at the stop: %v %v; want it released", row, err)
	}
}

// TestWorkerSurvivesARestart: the server stopped for 2 s and started again
// on the same file mid-run: the worker carries on, reports the faults, and
// every job is run (at least once) and acked.
func TestWorkerSurvivesARestart(t *testing.T) {
	file := filepath.Join(t.TempDir(), "fenec.db")
	srv := fenectest.StartServer(t, "--file", file)
	db := connect(t, srv.URL, fenecdb.WithTimeout(3*time.Second))
	mustQuery(t, db, jobsSchema)
	const n = 300
	fill(t, db, n)
	var mu sync.Mutex
	done := map[int64]bool{}
	var faults atomic.Int32
	h := func(ctx context.Context, job fenecdb.Job) error {
		time.Sleep(5 * time.Millisecond)
		mu.Lock()
		done[job.ID] = true
		mu.Unlock()
		return nil
	}
	stop := start(t, newWorker(t, db, h, fenecdb.WorkerOptions{Wait: time.Second, Backoff: func(int) time.Duration { return 100 * time.Millisecond },
		OnError: func(err error) {
			faults.Add(1)
			if !errors.Is(err, fenecdb.ErrNetwork) && !errors.Is(err, fenecdb.ErrTimeout) && !strings.Contains(err.Error(), "unavailable") {
				t.Errorf("an unexpected fault: %v", err)
			}
		}}))
	eventually(t, "a third of the jobs to run", func() bool { mu.Lock(); defer mu.Unlock(); return len(done) >= n/3 })
	srv.Stop()
	time.Sleep(2 * time.Second)
	srv.Restart()
	eventually(t, "the queue to drain", func() bool { return count(t, db, "") == 0 })
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(done) != n {
		t.Fatalf("%d of %d jobs ran", len(done), n)
	}
	if faults.Load() == 0 {
		t.Fatal("no fault reported while the server was down")
	}
}

// TestWorkerRefusesAQueueOfOtherTypes: a collection whose attempts is not
// an int stops the worker with an error naming it, and the job it claimed
// goes back.
func TestWorkerRefusesAQueueOfOtherTypes(t *testing.T) {
	srv := fenectest.StartServer(t, "--file", ":memory:")
	db := connect(t, srv.URL)
	mustQuery(t, db, "create collection jobs (run_at timestamp @sorted, owner text, attempts float, error text)")
	mustQuery(t, db, "put jobs {run_at: now(), attempts: 0}")
	w := newWorker(t, db, func(context.Context, fenecdb.Job) error { t.Error("a job ran"); return nil }, fenecdb.WorkerOptions{})
	done := make(chan error, 1)
	go func() { done <- w.Run(context.Background()) }()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "attempts") {
			t.Fatalf("got %v, want an error naming attempts", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the worker did not stop")
	}
	if n := count(t, db, "owner is null and attempts = 0"); n != 1 {
		t.Fatal("the job claimed was not released")
	}
}

// TestNewWorkerRefusesBadOptions: invalid options fail at construction.
func TestNewWorkerRefusesBadOptions(t *testing.T) {
	db := connect(t, "http://127.0.0.1:1")
	h := func(context.Context, fenecdb.Job) error { return nil }
	for _, tc := range []struct {
		coll fenecdb.Query
		o    fenecdb.WorkerOptions
		want string
	}{
		{db.From("jobs"), fenecdb.WorkerOptions{Wait: time.Minute}, "Wait"},
		{db.From("jobs"), fenecdb.WorkerOptions{Lease: time.Millisecond}, "Lease"},
		{db.From("jobs"), fenecdb.WorkerOptions{Concurrency: -1}, "Concurrency"},
		{db.From("jobs").Where("queue", "mail"), fenecdb.WorkerOptions{}, "WorkerOptions.Where"},
		{db.From("jobs"), fenecdb.WorkerOptions{Where: fenecdb.Raw("queue = $1")}, "?"},
	} {
		if _, err := fenecdb.NewWorker(tc.coll, h, tc.o); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: got %v, want an error naming %s", tc.o, err, tc.want)
		}
	}
}

// cpuTime returns the CPU time (user and system) this process has used:
// the client's alone, the server being a process of its own.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkWorker measures jobs/s through one worker of concurrency 10 with
// an empty handler (go test -run '^$' -bench Worker -benchtime 5000x).
func BenchmarkWorker(b *testing.B) {
	db, _ := queue(b, b.N)
	var done atomic.Int64
	w, err := fenecdb.NewWorker(db.From("jobs"), func(context.Context, fenecdb.Job) error { done.Add(1); return nil }, fenecdb.WorkerOptions{})
	if err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	before := cpuTime()
	stop := start(b, w)
	for done.Load() < int64(b.N) {
		time.Sleep(time.Millisecond)
	}
	stop()
	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "jobs/s")
	b.ReportMetric(float64((cpuTime()-before).Microseconds())/float64(b.N), "cpu-µs/job")
}

// recorder is a reverse proxy in front of a real server: it records the
// statements sent through it and, while hold is open, keeps the answer of
// every claim that took jobs until the client gives the request up.
type recorder struct {
	mu      sync.Mutex
	queries []string
	params  []string // each statement's parameters, as JSON
	batched []bool   // each statement's: sent in a /batch
	// requests is each request's statements' indexes in queries, and
	// waits each one's Fenec-Wait header.
	requests [][]int
	waits    []string
	hold     atomic.Bool
	held     chan struct{} // a claim's answer is being kept
	// refuseAck, while set, answers the next /batch that begins with an
	// ack as the server answers a refusal of its first statement (403,
	// "at": 0), and is cleared: the server never sees that /batch, as a
	// refused /batch leaves no trace (docs/http.md).
	refuseAck atomic.Bool
	// failAck is refuseAck with a fault's answer (503, no "at").
	failAck atomic.Bool
	// claiming counts the claims in flight, mostClaiming the most at once.
	claiming, mostClaiming atomic.Int32
}

func proxy(t *testing.T, target string) (*recorder, string) {
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	rp := httputil.NewSingleHostReverseProxy(u)
	rp.ErrorLog = log.New(io.Discard, "", 0) // a request given up is expected
	rec := &recorder{held: make(chan struct{}, 100)}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		type statement struct {
			Query  string
			Params json.RawMessage
		}
		var q struct {
			statement
			Statements []statement
		}
		json.Unmarshal(body, &q)
		sts := q.Statements
		if q.Query != "" {
			sts = []statement{q.statement}
		}
		last := ""
		if len(sts) > 0 {
			rec.mu.Lock()
			var req []int
			for _, st := range sts {
				req = append(req, len(rec.queries))
				rec.queries = append(rec.queries, st.Query)
				rec.params = append(rec.params, string(st.Params))
				rec.batched = append(rec.batched, q.Statements != nil)
			}
			rec.requests = append(rec.requests, req)
			rec.waits = append(rec.waits, r.Header.Get("Fenec-Wait"))
			rec.mu.Unlock()
			last = sts[len(sts)-1].Query
		}
		if len(q.Statements) > 1 && strings.HasPrefix(q.Statements[0].Query, "del jobs") {
			switch {
			case rec.refuseAck.CompareAndSwap(true, false):
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(http.StatusForbidden)
				w.Write([]byte(`{"error":"the token's policy refuses del on jobs","code":"forbidden","at":0}`))
				return
			case rec.failAck.CompareAndSwap(true, false):
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(http.StatusServiceUnavailable)
				w.Write([]byte(`{"error":"the request was given up","code":"unavailable"}`))
				return
			}
		}
		if strings.HasSuffix(last, "returning *") {
			n := rec.claiming.Add(1)
			defer rec.claiming.Add(-1)
			for m := rec.mostClaiming.Load(); n > m && !rec.mostClaiming.CompareAndSwap(m, n); m = rec.mostClaiming.Load() {
			}
		}
		answer := httptest.NewRecorder()
		rp.ServeHTTP(answer, r)
		if rec.hold.Load() && strings.HasSuffix(last, "returning *") && answer.Body.Len() > 2 {
			rec.held <- struct{}{}
			<-r.Context().Done()
			return
		}
		maps.Copy(w.Header(), answer.Header())
		w.WriteHeader(answer.Code)
		w.Write(answer.Body.Bytes())
	}))
	t.Cleanup(srv.Close)
	return rec, srv.URL
}

// TestWorkerStatementsAreGolden: every statement a worker sends is the
// text of a worker case of conformance/builder-golden.json (its limit
// aside: the free slots), and it sends each of them: claim, extend, ack,
// fail, dead letter, release, release of a claim given up.
func TestWorkerStatementsAreGolden(t *testing.T) {
	b, err := os.ReadFile("../../conformance/builder-golden.json")
	if err != nil {
		t.Fatal(err)
	}
	var file struct{ Cases []goldenCase }
	json.Unmarshal(b, &file)
	limit := regexp.MustCompile(`limit \d+`)
	golden := map[string]string{}
	for _, c := range file.Cases {
		if strings.HasPrefix(c.Name, "worker") {
			golden[limit.ReplaceAllString(c.Query, "limit N")] = c.Name
		}
	}
	db, srv := queue(t, 3)
	rec, url := proxy(t, srv.URL)
	through := connect(t, url)
	running := make(chan struct{}, 3)
	h := func(ctx context.Context, job fenecdb.Job) error {
		switch job.ID {
		case 1: // outlives an extension, then acked
			time.Sleep(700 * time.Millisecond)
			return nil
		case 2: // failed, then a dead letter
			return errors.New("smtp timeout")
		}
		running <- struct{}{} // runs until the grace period ends: released
		<-ctx.Done()
		return ctx.Err()
	}
	w, err := fenecdb.NewWorker(through.From("jobs"), h, fenecdb.WorkerOptions{Lease: time.Second, MaxAttempts: 2, Backoff: fast,
		Grace: 100 * time.Millisecond, OnError: faultsFail(t)})
	if err != nil {
		t.Fatal(err)
	}
	stop := start(t, w)
	<-running
	eventually(t, "jobs 1 and 2 to be settled", func() bool {
		return count(t, db, "id = 1") == 0 && count(t, db, "id = 2 and run_at is null") == 1
	})
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	seen := map[string]bool{}
	for _, q := range rec.queries {
		name, ok := golden[limit.ReplaceAllString(q, "limit N")]
		if !ok && !strings.HasPrefix(q, "get ") {
			t.Errorf("the worker sent %q, which no worker case of the golden file holds", q)
		}
		seen[name] = true
	}
	for _, name := range []string{"worker claim", "worker extend", "worker ack", "worker fail", "worker dead letter", "worker release", "worker release a given-up claim"} {
		if !seen[name] {
			t.Errorf("the worker never sent %q", name)
		}
	}
}

// TestWorkerStopReleasesAGivenUpClaim: a claim whose answer (jobs taken)
// has not arrived when the worker stops is given up, and its owner's jobs
// released: another worker takes them within 200 ms, not after the lease.
func TestWorkerStopReleasesAGivenUpClaim(t *testing.T) {
	db, srv := queue(t, 5)
	rec, url := proxy(t, srv.URL)
	rec.hold.Store(true)
	a := newWorker(t, connect(t, url), func(context.Context, fenecdb.Job) error {
		t.Error("worker a ran a job whose claim answer it never got")
		return nil
	}, fenecdb.WorkerOptions{OwnerPrefix: "a"})
	stopA := start(t, a)
	<-rec.held
	if n := count(t, db, "owner is not null"); n != 5 {
		t.Fatalf("%d jobs taken by the held claim, want 5", n)
	}
	if err := stopA(); err != nil {
		t.Fatal(err)
	}
	stopped := time.Now()
	var ran atomic.Int32
	stopB := start(t, newWorker(t, db, func(context.Context, fenecdb.Job) error { ran.Add(1); return nil }, fenecdb.WorkerOptions{OwnerPrefix: "b"}))
	defer stopB()
	eventually(t, "worker b to run the five jobs", func() bool { return ran.Load() == 5 })
	if d := time.Since(stopped); d > 200*time.Millisecond {
		t.Errorf("worker b ran the released jobs %v after the stop, want within 200ms", d)
	}
	if n := count(t, db, "attempts != 1"); n != 0 {
		t.Errorf("%d jobs counted the run that did not happen", n)
	}
}

// TestDefaultBackoff: exponential from 1 s, capped at 1 h, full jitter.
func TestDefaultBackoff(t *testing.T) {
	for attempts, ceiling := range map[int]time.Duration{1: time.Second, 2: 2 * time.Second, 4: 8 * time.Second, 13: time.Hour, 1000: time.Hour} {
		var most time.Duration
		for range 200 {
			d := fenecdb.DefaultBackoff(attempts)
			if d < 0 || d > ceiling {
				t.Fatalf("DefaultBackoff(%d) = %v, want 0 to %v", attempts, d, ceiling)
			}
			most = max(most, d)
		}
		if most < ceiling/2 {
			t.Errorf("DefaultBackoff(%d) never passed %v in 200 draws: not a full jitter up to %v", attempts, most, ceiling)
		}
	}
}

// requests reads the server's fenec_http_requests_total for /query and
// status from its /_metrics: what the server counted, not what a client
// says it sent.
func requests(t testing.TB, url string, status int) int {
	t.Helper()
	resp, err := http.Get(url + "/_metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	m := regexp.MustCompile(fmt.Sprintf(`(?m)^fenec_http_requests_total\{route="/query",status="%d"\} (\d+)$`, status)).FindSubmatch(body)
	if m == nil {
		return 0
	}
	var n int
	fmt.Sscan(string(m[1]), &n)
	return n
}

// TestWorkerDoesNotRetryARefusal: a fail the server refuses with a 400 (the
// handler has made the error field an int) is reported once and not sent
// again: only faults are retried (docs/workers.md, "Faults").
func TestWorkerDoesNotRetryARefusal(t *testing.T) {
	db, srv := queue(t, 1)
	h := func(ctx context.Context, job fenecdb.Job) error {
		mustQuery(t, db, "drop collection jobs")
		mustQuery(t, db, strings.Replace(jobsSchema, "error text", "error int", 1))
		mustQuery(t, db, "put jobs {id: $1, owner: $2, attempts: 1}", job.ID, job.Owner)
		return errors.New("boom")
	}
	refused := make(chan error, 100)
	// One slot: no claim is in flight while the handler changes the collection.
	w := newWorker(t, db, h, fenecdb.WorkerOptions{Concurrency: 1, Wait: 100 * time.Millisecond, Grace: 500 * time.Millisecond,
		OnError: func(err error) {
			if errors.Is(err, fenecdb.ErrBadRequest) {
				refused <- err
			}
		}})
	stop := start(t, w)
	select {
	case err := <-refused:
		var we *fenecdb.WorkerError
		if !errors.As(err, &we) || we.Step != fenecdb.StepFail || we.JobID != 1 {
			t.Fatalf("reported %v, want the refused fail of job 1", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the refused fail was not reported")
	}
	// The stop waits for the fail to end: retried, it goes on for the grace.
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if n := requests(t, srv.URL, 400); n != 1 {
		t.Fatalf("the server answered %d requests with 400, want 1: the refused fail was sent again", n)
	}
}

// TestWorkerAbandonsAHandlerThatIgnoresCtx: a handler that ignores its
// cancelled context does not hold up the stop: a second past the grace Run
// returns an *AbandonedError naming its job, no release is sent, and the
// lease, no longer extended, lapses.
func TestWorkerAbandonsAHandlerThatIgnoresCtx(t *testing.T) {
	db, _ := queue(t, 1)
	running, release := make(chan struct{}), make(chan struct{})
	t.Cleanup(func() { close(release) })
	h := func(ctx context.Context, job fenecdb.Job) error {
		close(running)
		<-release // never heeds ctx
		return nil
	}
	w := newWorker(t, db, h, fenecdb.WorkerOptions{Lease: time.Second, Grace: 200 * time.Millisecond})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	<-running
	cancel()
	var err error
	select {
	case err = <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return: it waits for a handler that ignores its context")
	}
	var ab *fenecdb.AbandonedError
	if !errors.As(err, &ab) || !slices.Equal(ab.Jobs, []int64{1}) || !errors.Is(err, context.Canceled) {
		t.Fatalf("Run returned %v, want an AbandonedError of job 1 wrapping context.Canceled", err)
	}
	if !strings.Contains(err.Error(), "[1]") {
		t.Fatalf("the error %q does not name job 1", err)
	}
	if n := count(t, db, "owner is not null"); n != 1 {
		t.Fatalf("%d jobs leased after the stop, want the abandoned one, not released", n)
	}
	eventually(t, "the abandoned job's lease to lapse", func() bool { return count(t, db, "run_at <= now()") == 1 })
}
