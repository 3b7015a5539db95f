// Command worker is an example Fenec queue worker: it runs the jobs of the
// collection jobs with fenecdb.NewWorker — ten at a time, each leased for
// 30 seconds and extended while it runs, the claim held at the server
// while there is no job — and stops gracefully on SIGINT or SIGTERM. It is
// the worker of docs/workers.md in Go.
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
	"log"
	"os"
	"os/signal"
	"syscall"

	fenecdb "github.com/fenecdb/fenec/sdks/go"
)

func main() {
	url := os.Getenv("FENEC_URL")
	if url == "" {
		url = "http://127.0.0.1:8080"
	}
	db, err := fenecdb.Connect(url, fenecdb.WithToken(os.Getenv("FENEC_TOKEN")))
	if err != nil {
		log.Fatal(err)
	}
	w, err := fenecdb.NewWorker(db.From("jobs"), send, fenecdb.WorkerOptions{})
	if err != nil {
		log.Fatal(err)
	}
	// Cancelling the context stops the worker gracefully.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := w.Run(ctx); err != nil && !errors.Is(err, context.Canceled) {
		log.Fatal(err)
	}
}

// send does a job's work: here, it only logs the address.
func send(ctx context.Context, job fenecdb.Job) error {
	var j struct {
		Payload struct {
			To string `json:"to"`
		} `json:"payload"`
	}
	if err := job.Row.Decode(&j); err != nil {
		return err
	}
	log.Printf("job %d, attempt %d: sending to %s", job.ID, job.Attempts, j.Payload.To)
	return nil
}
