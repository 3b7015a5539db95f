package store

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"
)

// TestCommitWaitDuringFolds measures what a fold costs the commits that
// wait meanwhile: writers that wait for each unit, as requests do, commit
// puts at full speed under sync always with the server's thresholds, for
// FENEC_FOLD_BENCH_SECONDS (default 20) — long enough for the log to reach
// its fold age and be folded while the writes go on. It logs the commit
// waits (p50/p99/max), the fold chunks' hold on the connection and the
// log's size, and fails when the log is not kept folded (its size stays
// under the fold threshold plus what two fold ages of writing add). Run it
// with (FENEC_FOLD_BENCH_1MB=1: in the 1 MB chunks of before the row
// bound; FENEC_FOLD_BENCH_RATE=n: n commits a second, each timed from
// when it was due, instead of the 4 writers)
//
//	cd server && FENEC_FOLD_BENCH=1 go test ./store -run TestCommitWaitDuringFolds -v
func TestCommitWaitDuringFolds(t *testing.T) {
	if os.Getenv("FENEC_FOLD_BENCH") == "" {
		t.Skip("a measurement: set FENEC_FOLD_BENCH=1")
	}
	secs := 20
	if v := os.Getenv("FENEC_FOLD_BENCH_SECONDS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n <= 0 {
			t.Fatalf("FENEC_FOLD_BENCH_SECONDS=%q: want a positive number", v)
		}
		secs = n
	}
	run := time.Duration(secs) * time.Second
	tune := defaultTuning
	if os.Getenv("FENEC_FOLD_BENCH_1MB") != "" {
		// The chunks before they were bounded in rows, for comparison.
		tune.foldChunk, tune.foldRows = 1<<20, 0
	}
	var fmu sync.Mutex
	var folds []time.Duration
	tune.onFold = func(d time.Duration) {
		fmu.Lock()
		folds = append(folds, d)
		fmu.Unlock()
	}
	// The groups' writes to SQLite and syncs: what a checkpoint costs
	// shows here, where a fold's hold does not.
	var wmu sync.Mutex
	var writes []time.Duration
	onCommit := func(e Event) {
		wmu.Lock()
		writes = append(writes, e.Wrote)
		wmu.Unlock()
	}
	_, _, _, s := load(t, filepath.Join(t.TempDir(), "f.db"), Options{}, tune)
	s.Subscribe(onCommit)
	defer s.Close()
	if err := s.Commit(1, []Change{{Op: OpCreate, Coll: "jobs", ID: 1}})(); err != nil {
		t.Fatal(err)
	}

	// A job queue's writes: a new job, and updates of recent ones (claims,
	// completions), 300-byte documents.
	body := make([]byte, 300)
	const writers = 4
	var mu sync.Mutex
	seq := uint64(1)
	waits := make([][]time.Duration, writers)
	stop := time.Now().Add(run)
	var maxLog int64
	var samples []string
	done := make(chan struct{})
	go func() {
		defer close(done)
		for tick := time.NewTicker(time.Second); time.Now().Before(stop); <-tick.C {
			st := s.Stats()
			maxLog = max(maxLog, st.LogBytes)
			samples = append(samples, fmt.Sprintf("%.1f", float64(st.LogBytes)/(1<<20)))
		}
	}()
	rate := 0
	if v := os.Getenv("FENEC_FOLD_BENCH_RATE"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n <= 0 {
			t.Fatalf("FENEC_FOLD_BENCH_RATE=%q: want a positive number of commits a second", v)
		}
		rate = n
	}
	var wg sync.WaitGroup
	if rate > 0 {
		// Open loop: a commit every 1/rate s, each timed from when it was
		// due, so that a stall counts for every commit due during it (as
		// for requests that keep coming), not only for the writers'.
		var rmu sync.Mutex
		start := time.Now()
		for i := 0; ; i++ {
			due := start.Add(time.Duration(i) * time.Second / time.Duration(rate))
			if due.After(stop) {
				break
			}
			time.Sleep(time.Until(due))
			seq++
			id := int64(seq)
			if seq%2 == 0 {
				id = max(2, id-100)
			}
			wait := s.Commit(seq, []Change{{Op: OpPut, Coll: "jobs", ID: id, Body: body}})
			wg.Go(func() {
				if err := wait(); err != nil {
					t.Error(err)
				}
				d := time.Since(due)
				rmu.Lock()
				waits[0] = append(waits[0], d)
				rmu.Unlock()
			})
		}
	}
	for w := range writers {
		if rate > 0 {
			break
		}
		wg.Go(func() {
			for time.Now().Before(stop) {
				mu.Lock()
				seq++
				id := int64(seq)
				if seq%2 == 0 {
					id = max(2, id-100)
				}
				start := time.Now()
				wait := s.Commit(seq, []Change{{Op: OpPut, Coll: "jobs", ID: id, Body: body}})
				mu.Unlock()
				if err := wait(); err != nil {
					t.Error(err)
					return
				}
				waits[w] = append(waits[w], time.Since(start))
			}
		})
	}
	wg.Wait()
	<-done
	st := s.Stats()
	all := slices.Concat(waits...)
	slices.Sort(all)
	fmu.Lock()
	fs := slices.Clone(folds)
	fmu.Unlock()
	slices.Sort(fs)
	pct := func(d []time.Duration, p float64) time.Duration {
		if len(d) == 0 {
			return 0
		}
		return d[min(len(d)-1, int(float64(len(d))*p))]
	}
	ms := func(d time.Duration) string { return fmt.Sprintf("%.2f ms", float64(d.Microseconds())/1000) }
	var over int
	for _, d := range all {
		if d > 10*time.Millisecond {
			over++
		}
	}
	load := fmt.Sprintf("%d writers", writers)
	if rate > 0 {
		load = fmt.Sprintf("%d a second", rate)
	}
	t.Logf("%d commits in %v (%s, %d fsyncs): wait p50 %s, p99 %s, p99.9 %s, max %s; %d over 10 ms",
		len(all), run, load, st.Fsyncs, ms(pct(all, .5)), ms(pct(all, .99)), ms(pct(all, .999)), ms(pct(all, 1)), over)
	wmu.Lock()
	ws := slices.Clone(writes)
	wmu.Unlock()
	slices.Sort(ws)
	t.Logf("%d group writes (write and sync): p50 %s, p99 %s, max %s", len(ws), ms(pct(ws, .5)), ms(pct(ws, .99)), ms(pct(ws, 1)))
	var total time.Duration
	for _, d := range fs {
		total += d
	}
	t.Logf("%d fold transactions: hold p50 %s, p99 %s, max %s, total %s", len(fs), ms(pct(fs, .5)), ms(pct(fs, .99)), ms(pct(fs, 1)), ms(total))
	t.Logf("unfolded log each second (MB): %v; max %.1f MB, at the end %.1f MB", samples, float64(maxLog)/(1<<20), float64(st.LogBytes)/(1<<20))
	// Kept folded: never more than the threshold plus what two fold ages
	// of this run's writing add.
	perSec := float64(len(all)) * float64(len(body)+30) / run.Seconds()
	if bound := float64(tune.foldBytes) + perSec*2*tune.foldAge.Seconds(); float64(maxLog) > bound {
		t.Errorf("the unfolded log reached %.1f MB, over the %.1f MB it should stay under", float64(maxLog)/(1<<20), bound/(1<<20))
	}
}

// BenchmarkFold measures the fold alone: the CPU time (of the process,
// user and system) a fold of a queue's log takes per job, and the SQLite
// rows it changes per job. b.N jobs, put and folded first, are claimed ten
// to a unit (ten puts) and acknowledged ten to a unit (ten deletes), the
// acks eight claims behind, committed under sync always in groups of 16
// units (as 16 workers make); then the log is folded whole, in the
// server's chunks.
//
//	cd server && go test ./store -run '^$' -bench Fold -benchtime 100000x
func BenchmarkFold(b *testing.B) { benchFold(b, false, 16) }

// BenchmarkFoldFresh is BenchmarkFold with the jobs put after the last
// fold, as in a queue whose jobs are done within the fold's age: put,
// claimed and acked, a job is never written (TestFoldSkipsUnwritten).
func BenchmarkFoldFresh(b *testing.B) { benchFold(b, true, 16) }

// BenchmarkFoldRelaxed is BenchmarkFold with the groups a relaxed server
// (--sync 250) makes: every unit of an interval in one group, here 2 000
// units (10 000 jobs claimed and acked, a quarter second at 40 000 jobs/s).
// A group that big is a chunk of its own, written in parts of foldRows
// documents.
func BenchmarkFoldRelaxed(b *testing.B) { benchFold(b, false, 2000) }

func benchFold(b *testing.B, fresh bool, group int) {
	jobs := (b.N + 9) / 10 * 10
	path := filepath.Join(b.TempDir(), "f.db")
	body := func(state string, i int) []byte {
		return fmt.Appendf(nil, `{"queue":"q","state":%q,"payload":"job %08d of the benchmark's queue, a body of some 200 bytes as a job has","attempts":1,"lease":0}`, state, i)
	}
	var units [][]Change
	put := func() {
		for i := 0; i < jobs; i += 100 {
			var u []Change
			for j := i; j < min(i+100, jobs); j++ {
				u = append(u, Change{Op: OpPut, Coll: "jobs", ID: int64(j + 1), Body: body("ready", j)})
			}
			units = append(units, u)
		}
	}
	s, err := Open(path, Options{Sync: SyncMode{Kind: SyncOff}})
	if err != nil {
		b.Fatal(err)
	}
	if _, err := s.Load(func(Change) error { return nil }); err != nil {
		b.Fatal(err)
	}
	seq := uint64(1)
	s.Commit(seq, []Change{{Op: OpCreate, Coll: "jobs", ID: 1, Body: []byte("schema")}})
	if !fresh {
		put()
		for _, u := range units {
			seq++
			s.Commit(seq, u)
		}
		units = nil
	}
	if err := s.Close(); err != nil {
		b.Fatal(err)
	}

	tune := defaultTuning
	tune.foldBytes, tune.foldAge = 1<<40, time.Hour // no fold until asked
	s, err = open(path, Options{Sync: SyncMode{Kind: SyncAlways}}, tune)
	if err != nil {
		b.Fatal(err)
	}
	if _, err := s.Load(func(Change) error { return nil }); err != nil {
		b.Fatal(err)
	}
	if fresh {
		put()
	}
	claim := func(k int) {
		u := make([]Change, 10)
		for j := range u {
			u[j] = Change{Op: OpPut, Coll: "jobs", ID: int64(10*k + j + 1), Body: body("claimed", 10*k+j)}
		}
		units = append(units, u)
	}
	ack := func(k int) {
		u := make([]Change, 10)
		for j := range u {
			u[j] = Change{Op: OpDelete, Coll: "jobs", ID: int64(10*k + j + 1)}
		}
		units = append(units, u)
	}
	for k := range jobs / 10 {
		claim(k)
		if k >= 8 {
			ack(k - 8)
		}
	}
	for k := max(jobs/10-8, 0); k < jobs/10; k++ {
		ack(k)
	}
	var waits []func() error
	commitCPU0 := processCPU()
	for i, u := range units {
		seq++
		waits = append(waits, s.Commit(seq, u))
		if i%group == group-1 || i == len(units)-1 {
			for _, w := range waits {
				if err := w(); err != nil {
					b.Fatal(err)
				}
			}
			waits = waits[:0]
		}
	}
	// Every group is handed to the folds before its pipeline stage ends.
	s.mu.Lock()
	for s.writing || s.syncing || len(s.unsynced) > 0 {
		s.waitChange()
	}
	s.mu.Unlock()
	commitCPU := processCPU() - commitCPU0
	changed := func() int64 {
		var n int64
		if err := s.conn.QueryRowContext(context.Background(), `SELECT total_changes()`).Scan(&n); err != nil {
			b.Fatal(err)
		}
		return n
	}
	s.wmu.Lock()
	rows0, cpu0 := changed(), processCPU()
	b.ResetTimer()
	folds := 0
	for more := true; more; folds++ {
		if more, err = s.foldLog(); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	cpu, rows := processCPU()-cpu0, changed()-rows0
	s.wmu.Unlock()
	if err := s.Close(); err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(cpu.Microseconds())/float64(jobs), "fold-cpu-µs/job")
	b.ReportMetric(float64(rows)/float64(jobs), "rows/job")
	b.ReportMetric(float64(jobs)/float64(folds), "jobs/chunk")
	// The commits' CPU before the fold: the log's records written, and
	// their changes added to the chunks (foldSet.add).
	b.ReportMetric(float64(commitCPU.Microseconds())/float64(jobs), "commit-cpu-µs/job")
}
