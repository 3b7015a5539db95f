// Command worker is `make worker-bench`'s Go worker: fenecdb.NewWorker on
// the collection jobs with a handler that does nothing, at the concurrency
// given. It prints "ready" as it starts the worker and stops it
// gracefully (cancelling Run's context) when its stdin is closed.
//
//	worker URL CONCURRENCY
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"os"
	"strconv"

	fenecdb "github.com/fenecdb/fenec/sdks/go"
)

func main() {
	if len(os.Args) != 3 {
		log.Fatal("usage: worker URL CONCURRENCY")
	}
	c, err := strconv.Atoi(os.Args[2])
	if err != nil {
		log.Fatal(err)
	}
	db, err := fenecdb.Connect(os.Args[1])
	if err != nil {
		log.Fatal(err)
	}
	w, err := fenecdb.NewWorker(db.From("jobs"), func(context.Context, fenecdb.Job) error { return nil },
		fenecdb.WorkerOptions{Concurrency: c})
	if err != nil {
		log.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	go func() {
		io.Copy(io.Discard, os.Stdin)
		stop()
	}()
	fmt.Println("ready")
	if err := w.Run(ctx); err != nil && !errors.Is(err, context.Canceled) {
		log.Fatal(err)
	}
}
