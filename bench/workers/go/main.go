// Command worker is `make worker-bench`'s Go worker: fenecdb.NewWorker on
// the collection jobs with a handler that does nothing, at the concurrency
// given. It prints "ready" as it starts the worker and stops it
// gracefully (cancelling Run's context) when its stdin is closed. With
// FENEC_WORKER_CPUPROFILE set, it writes a CPU profile of its run (from
// "ready" to the stop) to that file, for go tool pprof.
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
	"runtime/pprof"
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
	if path := os.Getenv("FENEC_WORKER_CPUPROFILE"); path != "" {
		f, err := os.Create(path)
		if err != nil {
			log.Fatal(err)
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			log.Fatal(err)
		}
		defer f.Close()
		defer pprof.StopCPUProfile()
	}
	fmt.Println("ready")
	if err := w.Run(ctx); err != nil && !errors.Is(err, context.Canceled) {
		log.Print(err)
		os.Exit(1)
	}
}
