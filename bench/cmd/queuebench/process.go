package main

import (
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"github.com/fenecdb/fenec/server/engine"
	"github.com/fenecdb/fenec/server/store"
)

// claimBudget bounds each claim-cost measurement: as many claims as fit,
// up to claimSamples, and never fewer than minSamples. A claim that scans
// a million jobs takes tens of milliseconds, one over an index microseconds.
const (
	claimBudget  = 2 * time.Second
	claimSamples = 5000
	minSamples   = 5
)

// claimCost times the claim of ten in process, in memory (the engine's
// work alone), over a queue of 1 000 jobs and of n, with run_at @sorted and
// with no index; then, at n, over a queue of n leased or delayed jobs and
// three ready ones. Each line says how many rows the claim read, from
// explain.
func claimCost(n int) ([]figure, error) {
	var figs []figure
	for _, index := range []string{"@sorted", ""} {
		for _, size := range []int{1000, n} {
			db, err := engine.Open(engine.Options{File: ":memory:"})
			if err != nil {
				return nil, err
			}
			q := &engineQueue{db: db}
			fs, err := claimCostOf(q, index, size, size == n)
			db.Close()
			if err != nil {
				return nil, err
			}
			figs = append(figs, fs...)
		}
	}
	return figs, nil
}

func claimCostOf(q *engineQueue, index string, size int, leased bool) ([]figure, error) {
	if _, err := q.exec(strings.Replace(jobsSchema, " @sorted", " "+index, 1)); err != nil {
		return nil, err
	}
	if err := q.fill(size); err != nil {
		return nil, err
	}
	what := "no index"
	if index != "" {
		what = index + " run_at"
	}
	// Each claim's jobs are acked and as many new ones put, so the queue
	// keeps its size.
	steady, err := timeClaims(q, func(ids []any) error {
		if _, err := q.exec(`del jobs where id in $1`, ids); err != nil {
			return err
		}
		docs := make([]any, len(ids))
		for i, j := range newJobs(len(ids)) {
			docs[i] = fenecDoc(j)
		}
		_, err := q.exec(putJobs, docs)
		return err
	})
	if err != nil {
		return nil, err
	}
	figs := []figure{{Section: secClaim, Name: fmt.Sprintf("claim of 10, %s, %s ready jobs", what, count(size)), Fenec: steady}}
	if !leased {
		return figs, nil
	}
	// Half the jobs leased for an hour, half delayed an hour; three ready.
	if _, err := q.exec(`set jobs {owner: "gone", run_at: now() + 3600000} where id % 2 = 0`); err != nil {
		return nil, err
	}
	if _, err := q.exec(`set jobs {run_at: now() + 3600000} where id % 2 = 1`); err != nil {
		return nil, err
	}
	if _, err := q.exec(`put jobs [{run_at: now() - 1000, attempts: 0}, {run_at: now() - 1000, attempts: 0}, {run_at: now() - 1000, attempts: 0}]`); err != nil {
		return nil, err
	}
	// Each claim takes the three, which are then made ready again.
	three, err := timeClaims(q, func(ids []any) error {
		if len(ids) != 3 {
			return fmt.Errorf("the claim took %d jobs of the 3 ready", len(ids))
		}
		_, err := q.exec(`set jobs {owner: null, run_at: now() - 1000} where id in $1`, ids)
		return err
	})
	if err != nil {
		return nil, err
	}
	return append(figs, figure{Section: secClaim, Name: fmt.Sprintf("claim of 10, %s, %s leased or delayed jobs and 3 ready", what, count(size)), Fenec: three}), nil
}

// timeClaims claims ten as worker w0 until the budget is spent, handing
// each claim's ids to after (untimed), and returns the claim's p50 and p99
// and the rows it read.
func timeClaims(q *engineQueue, after func(ids []any) error) (*result, error) {
	r, err := q.exec("explain "+claimTen, "w0")
	if err != nil {
		return nil, err
	}
	read := r.Rows[0][0].Int()
	var times []time.Duration
	end := time.Now().Add(claimBudget)
	for len(times) < minSamples || (len(times) < claimSamples && time.Now().Before(end)) {
		start := time.Now()
		r, err := q.exec(claimTen, "w0")
		times = append(times, time.Since(start))
		if err != nil {
			return nil, err
		}
		ids := make([]any, len(r.Rows))
		for i, row := range r.Rows {
			ids[i] = row[0].Int()
		}
		if err := after(ids); err != nil {
			return nil, err
		}
	}
	p50, p99 := percentiles(times)
	return &result{P50: p50, P99: p99, Value: float64(read), Unit: "rows read", Note: count(len(times)) + " claims"}, nil
}

// inProcess drives workers in process over a file at --sync 250, claiming
// in one statement and then in three, each acking every job it won with a
// statement of its own.
func inProcess(dir string, n int, workers []int, d time.Duration, rounds int) ([]figure, error) {
	sync, err := store.ParseSync("250")
	if err != nil {
		return nil, err
	}
	db, err := engine.Open(engine.Options{File: filepath.Join(dir, "process.db"), Sync: sync})
	if err != nil {
		return nil, err
	}
	defer db.Close()
	one := &engineQueue{db: db}
	if _, err := one.exec(jobsSchema); err != nil {
		return nil, err
	}
	var figs []figure
	for _, q := range []*engineQueue{one, {db: db, three: true}} {
		rs, err := sweep(q, n, workers, d, rounds, q.three)
		if err != nil {
			return nil, err
		}
		how := "one statement"
		if q.three {
			how = "three statements"
		}
		for i, r := range rs {
			figs = append(figs, figure{Section: secProcess, Name: fmt.Sprintf("%s, claim in %s, ack each", plural(workers[i], "worker"), how), Workers: workers[i], Fenec: r})
		}
	}
	return figs, nil
}

// count writes a job count as the table does: 1 000 000.
func count(n int) string {
	s := fmt.Sprint(n)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + " " + s[i:]
	}
	return s
}

// plural writes n things: 1 worker, 16 workers.
func plural(n int, thing string) string {
	if n == 1 {
		return "1 " + thing
	}
	return count(n) + " " + thing + "s"
}
