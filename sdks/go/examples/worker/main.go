// Command worker is an example Fenec queue worker: it claims jobs from the
// collection jobs, ten at a time and each for 30 seconds, holding its claim
// at the server until there is a job; sends each job's email; and acks it
// or sends it back with a backoff. It is the worker of docs/queues.md in Go.
//
//	FENEC_URL=http://127.0.0.1:8080 FENEC_TOKEN=... go run ./examples/worker
//
// The collection it works on:
//
//	create collection jobs (payload json, run_at timestamp @sorted, owner text, attempts int, error text)
package main

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/fenecdb/fenec/sdks/go"
)

func main() {
	url := os.Getenv("FENEC_URL")
	if url == "" {
		url = "http://127.0.0.1:8080"
	}
	db, err := fenecdb.New(url, fenecdb.WithToken(os.Getenv("FENEC_TOKEN")))
	if err != nil {
		log.Fatal(err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	host, _ := os.Hostname()
	w := newWorker(db, fmt.Sprintf("w-%s-%d", host, os.Getpid()), send)
	if err := w.run(ctx); err != nil && !errors.Is(err, context.Canceled) {
		log.Fatal(err)
	}
}

// send does a job's work: here, it only logs the address.
func send(_ context.Context, to string) error {
	log.Printf("sending to %s", to)
	return nil
}

// job is a claimed row of jobs, as the worker reads it.
type job struct {
	ID      int64 `json:"id"`
	Payload struct {
		To string `json:"to"`
	} `json:"payload"`
	Attempts int `json:"attempts"`
}

// worker claims and runs jobs.
type worker struct {
	jobs   fenecdb.Collection // acks and failures
	claims fenecdb.Collection // the claim, held at the server up to 30 s
	me     string
	send   func(ctx context.Context, to string) error
}

func newWorker(db *fenecdb.DB, me string, send func(context.Context, string) error) *worker {
	return &worker{
		jobs:   db.From("jobs"),
		claims: db.Wait(30 * time.Second).From("jobs").WhereRaw(fenecdb.Raw("run_at <= now()")).Order("run_at").Limit(10),
		me:     me,
		send:   send,
	}
}

// run claims and runs jobs until ctx is done. A claim gone wrong is logged
// and tried again a second later.
func (w *worker) run(ctx context.Context) error {
	for n := 1; ; n++ {
		// One owner per claim, so two claims of one job by this worker
		// are told apart.
		owner := fmt.Sprintf("%s:%d", w.me, n)
		claimed, err := w.claims.Update(ctx, fenecdb.D(
			"owner", owner,
			"run_at", fenecdb.Expr("now() + ?", 30000),
			"attempts", fenecdb.Inc(1),
		), fenecdb.Returning("*"))
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			log.Printf("claiming: %v", err)
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(time.Second):
			}
			continue
		}
		for _, row := range claimed.Rows {
			var j job
			if err := row.Decode(&j); err != nil {
				return err
			}
			w.runJob(ctx, j, owner)
		}
	}
}

// runJob sends one job, then acks it, or sends it back to run again after
// 2^attempts seconds. Either requires the row to be still ours: a 412
// means our lease lapsed and another claim took the job.
func (w *worker) runJob(ctx context.Context, j job, owner string) {
	mine := w.jobs.Where("id", j.ID).Where("owner", owner)
	if err := w.send(ctx, j.Payload.To); err != nil {
		backoff := 1000 * (1 << j.Attempts)
		_, err = mine.Update(ctx, fenecdb.D(
			"owner", nil,
			"run_at", fenecdb.Expr("now() + ?", backoff),
		), fenecdb.Require(1))
		if err != nil {
			log.Printf("job %d: sending it back: %v", j.ID, err)
		}
		return
	}
	if _, err := mine.Delete(ctx, fenecdb.Require(1)); err != nil {
		log.Printf("job %d: acking: %v", j.ID, err)
	}
}
