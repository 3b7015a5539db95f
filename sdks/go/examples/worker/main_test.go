package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/fenecdb/fenec/sdks/go"
	"github.com/fenecdb/fenec/sdks/go/internal/fenectest"
)

func TestMain(m *testing.M) { os.Exit(fenectest.Main(m)) }

func connect(t *testing.T) (*fenecdb.DB, string) {
	t.Helper()
	url := fenectest.Start(t)
	db, err := fenecdb.New(url)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Query(context.Background(), "create collection jobs (payload json, run_at timestamp @sorted, owner text, attempts int, error text)"); err != nil {
		t.Fatal(err)
	}
	return db, url
}

// deliveries counts what the workers sent, per address.
type deliveries struct {
	mu   sync.Mutex
	sent map[string]int
	all  chan struct{} // closed when every address has been sent to
	want int
}

func (d *deliveries) send(_ context.Context, to string) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.sent[to]++
	if len(d.sent) == d.want {
		close(d.all)
	}
	return nil
}

// TestWorkersDrainQueue starts four workers on an empty queue, their claims
// held at the server, then puts 500 jobs: every job is sent once and acked
// (the queue ends empty).
func TestWorkersDrainQueue(t *testing.T) {
	const jobs = 500
	db, url := connect(t)
	d := &deliveries{sent: map[string]int{}, all: make(chan struct{}), want: jobs}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for i := range 4 {
		wg.Go(func() { errs <- newWorker(db, fmt.Sprintf("w%d", i), d.send).run(ctx) })
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		n, err := fenectest.HeldClaims(url)
		if err != nil {
			t.Fatal(err)
		}
		if n == 4 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d claims held, want the 4 workers'", n)
		}
	}
	for i := 0; i < jobs; i += 50 {
		batch := make([]fenecdb.Doc, 50)
		for j := range batch {
			batch[j] = fenecdb.D(
				"payload", fenecdb.D("to", fmt.Sprintf("user%d@example.com", i+j)),
				"run_at", fenecdb.Expr("now()"),
				"attempts", 0,
			)
		}
		if _, err := db.From("jobs").InsertMany(ctx, batch); err != nil {
			t.Fatal(err)
		}
	}
	select {
	case <-d.all:
	case <-time.After(60 * time.Second):
		t.Fatalf("sent to %d of %d addresses in 60 s", len(d.sent), jobs)
	}
	// The last acks follow the last sends: wait for the queue to empty.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		n, err := db.From("jobs").Count(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d jobs were never acked", n)
		}
	}
	cancel()
	wg.Wait()
	close(errs)
	for err := range errs {
		if !errors.Is(err, context.Canceled) {
			t.Errorf("a worker stopped with %v", err)
		}
	}
	for to, n := range d.sent {
		if n != 1 {
			t.Errorf("%s was sent %d times", to, n)
		}
	}
}

// TestWorkerBacksOff: a job whose send fails goes back with a backoff of
// 2^attempts seconds, and is run again once the clock passes it.
func TestWorkerBacksOff(t *testing.T) {
	db, url := connect(t)
	ctx, cancel := context.WithCancel(context.Background())
	tries := make(chan int, 2)
	n := 0
	bounce := func(context.Context, string) error {
		n++
		tries <- n
		if n == 1 {
			return errors.New("smtp timeout")
		}
		return nil
	}
	stopped := make(chan error, 1)
	go func() { stopped <- newWorker(db, "w1", bounce).run(ctx) }()
	defer func() {
		cancel()
		if err := <-stopped; !errors.Is(err, context.Canceled) {
			t.Errorf("the worker stopped with %v", err)
		}
	}()
	if _, err := db.Query(ctx, `put jobs {payload: {"to": "ada@example.com"}, run_at: now(), attempts: 0}`); err != nil {
		t.Fatal(err)
	}
	<-tries
	// Sent back: no owner, due 2 s on (attempts 1).
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		row, err := db.From("jobs").Select("owner", "attempts").First(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if row.Get("owner") == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the failed job was not sent back: %v", row.Values)
		}
	}
	if err := fenectest.Advance(url, 2000); err != nil {
		t.Fatal(err)
	}
	select {
	case <-tries:
	case <-time.After(40 * time.Second):
		t.Fatal("the job was not run again once due")
	}
}
