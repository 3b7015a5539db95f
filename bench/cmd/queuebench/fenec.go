package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/fenecdb/fenec/server/engine"
	"github.com/fenecdb/fenec/server/fenecql"
	"github.com/fenecdb/fenec/server/httpapi/gen"
)

// The queue page's statements: the one-statement claim of ten, and the
// three a client sends without returning — read the ready page, set those
// jobs only where they are still ready, read back which ones it won. Acks
// are wake.go's ackOne, one a job.
const (
	claimTen = `set jobs {owner: $1, run_at: now() + 30000, attempts: attempts + 1} where run_at <= now() order run_at limit 10 returning *`
	readPage = `get jobs select id where run_at <= now() order run_at limit 10`
	casPage  = `set jobs {owner: $1, run_at: now() + 30000, attempts: attempts + 1} where id in $2 and run_at <= now()`
	readBack = `get jobs where id in $2 and owner = $1`
	countAll = `get jobs count`
	putJobs  = `put jobs $1`
)

// loadBatch is how many jobs one put (or COPY, or RPUSH) enqueues while
// filling a queue.
const loadBatch = 5000

// jobSeq numbers every job the benchmark makes, so no two are equal (a
// Redis list removes a job by its value).
var jobSeq atomic.Int64

// A job is one job as every system enqueues it: a payload naming who to
// write to, and a ready time.
type job struct {
	seq   int64
	runAt time.Time
}

func (j job) to() string { return "u" + strconv.FormatInt(j.seq, 10) + "@example.com" }

// newJobs returns n jobs ready a second or more ago, each later than the
// one before, so claims take them in the order they were made.
func newJobs(n int) []job {
	base := time.Now().Add(-time.Second - time.Duration(n)*time.Millisecond)
	out := make([]job, n)
	for i := range out {
		out[i] = job{seq: jobSeq.Add(1), runAt: base.Add(time.Duration(i) * time.Millisecond)}
	}
	return out
}

// fenecDoc is a job as a document for `put jobs $1`.
func fenecDoc(j job) map[string]any {
	return map[string]any{"payload": map[string]any{"to": j.to()}, "run_at": j.runAt.UnixMilli(), "attempts": 0}
}

// top returns the jobs fill must add to a queue holding have: the rest of
// n, in batches of loadBatch. They are made as one run, so their ready
// times follow their order across the batches too, as in a queue filled
// over time: batches made each on its own started at the same time, and
// their jobs' ready times interleaved, so claims took jobs put thousands
// apart (ids and documents far apart in memory, a cost no queue filled
// in order pays).
func top(have, n int) [][]job {
	var out [][]job
	for jobs := newJobs(max(n-have, 0)); len(jobs) > 0; jobs = jobs[min(len(jobs), loadBatch):] {
		out = append(out, jobs[:min(len(jobs), loadBatch)])
	}
	return out
}

// owner is a worker's token for one claim, so a read-back tells its jobs
// from those of its own earlier claims.
func owner(worker int, claim *int) string {
	*claim++
	return "w" + strconv.Itoa(worker) + ":" + strconv.Itoa(*claim)
}

// engineQueue is Fenec in process: the engine called directly, no HTTP.
type engineQueue struct {
	db    *engine.DB
	three bool // claim in three statements, not one
}

func (q *engineQueue) exec(stmt string, params ...any) (*engine.Result, error) {
	vs := make([]fenecql.Value, len(params))
	for i, p := range params {
		v, err := fenecql.FromGo(p)
		if err != nil {
			return nil, err
		}
		vs[i] = v
	}
	return q.db.Exec(context.Background(), stmt, vs)
}

func (q *engineQueue) fill(n int) error {
	r, err := q.exec(countAll)
	if err != nil {
		return err
	}
	for _, batch := range top(int(r.Rows[0][0].Int()), n) {
		docs := make([]any, len(batch))
		for i, j := range batch {
			docs[i] = fenecDoc(j)
		}
		if _, err := q.exec(putJobs, docs); err != nil {
			return err
		}
	}
	return nil
}

// settle waits for this process, which holds the engine and its store,
// to go idle.
func (q *engineQueue) settle() error { return quiet(os.Getpid()) }

func (q *engineQueue) serverPID() int { return 0 }

func (q *engineQueue) worker(i int) (worker, error) { return &engineWorker{q: q, id: i}, nil }

type engineWorker struct {
	q      *engineQueue
	id     int
	claims int
}

func (w *engineWorker) close() {}

func (w *engineWorker) step(ctx context.Context) (time.Duration, int, int, error) {
	me := owner(w.id, &w.claims)
	start := time.Now()
	var ids []any
	read := 0
	if w.q.three {
		page, err := w.q.exec(readPage)
		if err != nil || len(page.Rows) == 0 {
			return 0, 0, 0, err
		}
		read = len(page.Rows)
		ids = make([]any, read)
		for i, row := range page.Rows {
			ids[i] = row[0].Int()
		}
		if _, err := w.q.exec(casPage, me, ids); err != nil {
			return 0, 0, 0, err
		}
		won, err := w.q.exec(readBack, me, ids)
		if err != nil {
			return 0, 0, 0, err
		}
		ids = ids[:0]
		for _, row := range won.Rows {
			ids = append(ids, row[0].Int())
		}
	} else {
		r, err := w.q.exec(claimTen, me)
		if err != nil {
			return 0, 0, 0, err
		}
		read = len(r.Rows)
		for _, row := range r.Rows {
			ids = append(ids, row[0].Int())
		}
	}
	took := time.Since(start)
	for _, id := range ids {
		if _, err := w.q.exec(ackOne, id, me); err != nil {
			return 0, 0, 0, err
		}
	}
	return took, read, len(ids), nil
}

// httpQueue is Fenec over HTTP: each worker a client of a `fenec serve`,
// acking a batch's jobs in one /batch.
type httpQueue struct {
	s     *server
	three bool // claim in three round trips, not one
}

func (q *httpQueue) fill(n int) error {
	rows, err := q.s.query(countAll, nil, 0)
	if err != nil {
		return err
	}
	have, err := rows[0]["count"].(json.Number).Int64()
	if err != nil {
		return err
	}
	for _, batch := range top(int(have), n) {
		docs := make([]any, len(batch))
		for i, j := range batch {
			docs[i] = fenecDoc(j)
		}
		if _, err := q.s.query(putJobs, []any{docs}, 0); err != nil {
			return err
		}
	}
	return nil
}

// settle waits until the store has folded the fill's log into its tables
// (folded), then until the server is quiet. The store folds in the
// background once the log's oldest record is 10 s old or the log holds
// 32 MB (docs/architecture.md, The commit path), so a fill's last
// records are folded seconds after it, while the server looks idle: a run
// started then paid for folding up to 32 MB of the fill (at 1 000 000
// jobs, a third of the server's CPU in the run), as a PostgreSQL run would
// pay for its COPY's checkpoint but for its settle's CHECKPOINT. A binary
// without the metric is given 11 s instead. A log under minFold is left
// to fold when it will (a small queue's fill: its fold costs a run next
// to nothing, and waiting for it would cost the smoke test seconds).
func (q *httpQueue) settle() error {
	has, _, err := q.folded()
	if err != nil {
		return err
	}
	if !has {
		time.Sleep(11 * time.Second)
	}
	return quiet(q.s.cmd.Process.Pid)
}

// drain waits until the store has folded the run's own log (drainer); a
// run that left less than minFold is not measured so.
func (q *httpQueue) drain() (bool, error) {
	has, small, err := q.folded()
	return has && !small, err
}

// minFold is the least unfolded log folded waits for.
const minFold = 1 << 20

// folded waits until fenec_store_unfolded_bytes reads 0 (3 minutes at
// most), unless it reads less than minFold at first (small). has is false
// when the binary has no such metric.
func (q *httpQueue) folded() (has, small bool, err error) {
	deadline := time.Now().Add(3 * time.Minute)
	for first := true; ; first = false {
		n, has, err := q.s.unfolded()
		switch {
		case err != nil || !has:
			return has, false, err
		case n == 0:
			return true, false, nil
		case first && n < minFold:
			return true, true, nil
		case time.Now().After(deadline):
			return true, false, fmt.Errorf("the store still holds %.0f bytes of log to fold after 3 minutes", n)
		}
		// A scrape of /_metrics costs the server about 2 ms of CPU: once
		// a second keeps the waiting's share of a run's figure small.
		time.Sleep(time.Second)
	}
}

func (q *httpQueue) serverPID() int { return q.s.cmd.Process.Pid }

func (q *httpQueue) worker(i int) (worker, error) { return &httpWorker{q: q, id: i}, nil }

type httpWorker struct {
	q      *httpQueue
	id     int
	claims int
}

func (w *httpWorker) close() {}

// claimed is a row of a claim's answer, decoded as a Go worker would: into
// a struct, its payload left raw, as pgx scans PostgreSQL's row.
type claimed struct {
	ID       int64           `json:"id"`
	Payload  json.RawMessage `json:"payload"`
	RunAt    string          `json:"run_at"`
	Owner    string          `json:"owner"`
	Attempts int64           `json:"attempts"`
}

// rows sends one statement and decodes its answer.
func (w *httpWorker) rows(q string, params ...any) ([]claimed, error) {
	b, err := w.q.s.post("/query", statement(q, params...), 0)
	if err != nil {
		return nil, err
	}
	var rows []claimed
	return rows, json.Unmarshal(b, &rows)
}

func (w *httpWorker) step(context.Context) (time.Duration, int, int, error) {
	me := owner(w.id, &w.claims)
	start := time.Now()
	var won []claimed
	read := 0
	if w.q.three {
		page, err := w.rows(readPage)
		if err != nil || len(page) == 0 {
			return 0, 0, 0, err
		}
		read = len(page)
		ids := make([]int64, read)
		for i, row := range page {
			ids[i] = row.ID
		}
		if _, err := w.q.s.post("/query", statement(casPage, me, ids), 0); err != nil {
			return 0, 0, 0, err
		}
		if won, err = w.rows(readBack, me, ids); err != nil {
			return 0, 0, 0, err
		}
	} else {
		var err error
		if won, err = w.rows(claimTen, me); err != nil {
			return 0, 0, 0, err
		}
		read = len(won)
	}
	took := time.Since(start)
	if len(won) == 0 {
		return took, read, 0, nil
	}
	acks := make([]gen.QueryRequest, len(won))
	for i, row := range won {
		acks[i] = statement(ackOne, row.ID, me)
	}
	if err := w.q.s.batch(acks); err != nil {
		return 0, 0, 0, fmt.Errorf("acks: %w", err)
	}
	return took, read, len(won), nil
}
