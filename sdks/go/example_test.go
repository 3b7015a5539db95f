package fenecdb_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"os/signal"
	"time"

	"github.com/fenecdb/fenec/sdks/go"
)

// A claim: take up to 10 ready jobs, leased for 30 s, rendered as every
// Fenec SDK renders it.
func ExampleQuery_RenderUpdate() {
	db, _ := fenecdb.Connect("http://127.0.0.1:8080")
	claim := db.From("jobs").WhereRaw(fenecdb.Raw("run_at <= now()")).Order("run_at").Limit(10)
	s, err := claim.RenderUpdate(fenecdb.D(
		"owner", "w-1:1",
		"run_at", fenecdb.Expr("now() + ?", 30000),
		"attempts", fenecdb.Inc(1),
	), fenecdb.Returning("*"))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(s.Query)
	fmt.Println(s.Params)
	// Output:
	// set jobs {owner: $1, run_at: now() + $2, attempts: coalesce(attempts, 0) + $3} where run_at <= now() order run_at limit 10 returning *
	// [w-1:1 30000 1]
}

// Conditions join with and; a slice is one parameter of in.
func ExampleQuery_WhereOp() {
	db, _ := fenecdb.Connect("http://127.0.0.1:8080")
	s, _ := db.From("jobs").WhereOp("id", "in", []int64{42, 43}).Where("owner", nil).RenderRows()
	fmt.Println(s.Query)
	fmt.Println(s.Params)
	// Output:
	// get jobs where id in $1 and owner is null
	// [[42 43]]
}

// Raw writes a condition in FenecQL, its values as ? marks.
func ExampleRaw() {
	db, _ := fenecdb.Connect("http://127.0.0.1:8080")
	s, _ := db.From("couriers").WhereRaw(fenecdb.Raw("zone = ? or rating >= ?", "north", 4.5)).Limit(5).RenderRows()
	fmt.Println(s.Query)
	fmt.Println(s.Params)
	// Output:
	// get couriers where zone = $1 or rating >= $2 limit 5
	// [north 4.5]
}

// Connect to one server, with a token and retries of faults; every write
// is then sent under an idempotency key, so it applies once.
func ExampleConnect() {
	db, err := fenecdb.Connect("http://127.0.0.1:8080",
		fenecdb.WithToken(os.Getenv("FENEC_TOKEN")),
		fenecdb.WithTimeout(10*time.Second),
		fenecdb.WithRetries(3),
	)
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()
	if _, err := db.From("jobs").Insert(context.Background(), fenecdb.D("run_at", time.Now(), "attempts", 0)); err != nil {
		var e *fenecdb.Error
		if errors.As(err, &e) && e.Retryable {
			log.Printf("not sent after the retries (key %s): %v", e.IdempotencyKey, err)
		}
		log.Fatal(err)
	}
}

// A worker of a queue, stopped by Ctrl-C (its running handlers get the
// grace period to finish).
func ExampleNewWorker() {
	db, err := fenecdb.Connect("http://127.0.0.1:8080")
	if err != nil {
		log.Fatal(err)
	}
	w, err := fenecdb.NewWorker(db.From("jobs"), func(ctx context.Context, job fenecdb.Job) error {
		log.Printf("job %d, attempt %d", job.ID, job.Attempts)
		return nil // acked; an error fails it, to run again after a backoff
	}, fenecdb.WorkerOptions{Concurrency: 10})
	if err != nil {
		log.Fatal(err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := w.Run(ctx); err != nil && !errors.Is(err, context.Canceled) {
		log.Fatal(err)
	}
}

// Run every ready job, then return: for scripts and tests.
func ExampleWorker_RunUntilEmpty() {
	db, err := fenecdb.Connect("http://127.0.0.1:8080")
	if err != nil {
		log.Fatal(err)
	}
	w, err := fenecdb.NewWorker(db.From("jobs"), func(ctx context.Context, job fenecdb.Job) error {
		return nil
	}, fenecdb.WorkerOptions{})
	if err != nil {
		log.Fatal(err)
	}
	if err := w.RunUntilEmpty(context.Background()); err != nil {
		log.Fatal(err)
	}
}

// Structs in and out, through their json tags.
func ExampleRowsAs() {
	type Job struct {
		ID       int64          `json:"id,omitempty"` // omitted: the server numbers it
		Payload  map[string]any `json:"payload"`
		RunAt    time.Time      `json:"run_at"`
		Attempts int            `json:"attempts"`
	}
	db, err := fenecdb.Connect("http://127.0.0.1:8080")
	if err != nil {
		log.Fatal(err)
	}
	ctx := context.Background()
	if _, err := db.From("jobs").Insert(ctx, Job{Payload: map[string]any{"to": "ada"}, RunAt: time.Now()}); err != nil {
		log.Fatal(err)
	}
	jobs, err := fenecdb.RowsAs[Job](ctx, db.From("jobs").Order("run_at").Limit(10))
	if err != nil {
		log.Fatal(err)
	}
	for _, j := range jobs {
		fmt.Println(j.ID, j.RunAt)
	}
	if _, err := fenecdb.FirstAs[Job](ctx, db.From("jobs").Where("id", 0)); errors.Is(err, fenecdb.ErrNoRows) {
		fmt.Println("no job 0")
	}
}
