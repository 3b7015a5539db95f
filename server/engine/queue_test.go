package engine

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/fenecdb/fenec/server/fenecql"
)

// queueCounts returns a queue's states counted by FenecQL, the reference
// the queueIndex is held to.
func queueCounts(t testing.TB, db *DB, coll string) QueueStats {
	t.Helper()
	n := func(where string) int {
		return int(mustExec(t, db, "get "+coll+" where "+where+" count").Rows[0][0].Int())
	}
	s := QueueStats{
		Name:    coll,
		Ready:   n("run_at <= now()"),
		Leased:  n("run_at > now() and owner is not null"),
		Delayed: n("run_at > now() and owner is null"),
		Dead:    n("run_at is null and error is not null"),
		Kept:    n("run_at is null and error is null"),
	}
	if r := mustExec(t, db, "get "+coll+" select run_at where run_at <= now() order run_at limit 1"); len(r.Rows) == 1 {
		s.OldestReadyMS = r.Rows[0][0].Int()
	}
	return s
}

// TestQueuesMatchQueries puts jobs in every state, claims, fails, acks and
// rolls back at random, and moves the clock; after every step each queue's
// counts are what FenecQL counts. A collection without a run_at timestamp
// is no queue.
// The counts of a queue whose run_at is @sorted are read from that index,
// and those of one without from a tree of their own: both are held to it.
func TestQueuesMatchQueries(t *testing.T) {
	for _, index := range []string{"@sorted", ""} {
		t.Run("run_at="+index, func(t *testing.T) { queuesMatchQueries(t, index) })
	}
}

func queuesMatchQueries(t *testing.T, index string) {
	db, clk := openMem(t)
	mustExec(t, db, `create collection jobs (payload json, run_at timestamp `+index+`, owner text, attempts int, error text)`)
	mustExec(t, db, `create collection plain (run_at timestamp, owner text, error text)`)
	mustExec(t, db, `create collection notes (run_at text, owner text)`)
	r := rand.New(rand.NewPCG(1, 2))
	steps := []string{
		`put jobs {run_at: now() - $1, attempts: 0}`,
		`put jobs {run_at: now() + $1, attempts: 0}`,
		`put jobs {run_at: null, error: "boom"}`,
		`put jobs {run_at: null}`,
		`put plain {run_at: now() + $1}`,
		`set jobs {owner: "w1", run_at: now() + $1, attempts: attempts + 1} where run_at <= now() order run_at limit 3`,
		`set jobs {owner: null, error: "x", run_at: case when attempts >= 2 then null else now() + $1 end} where owner is not null order id limit 2`,
		`set jobs {run_at: now(), attempts: 0, error: null} where run_at is null and error is not null order id limit 1`,
		`del jobs where owner is not null order id limit 1`,
		`del jobs where run_at is null order id desc limit 1`,
		`set jobs {run_at: null, owner: null} where owner is not null order id limit 1`,
		`set jobs {owner: "w2"} where run_at > now() and owner is null order id limit 1 require 5`, // often refused: undone
	}
	ran := 0
	for i := 0; i < 400; i++ {
		q := steps[r.IntN(len(steps))]
		if _, err := db.Exec(context.Background(), q, vals(int64(r.IntN(60000)))); err == nil {
			ran++
		}
		if r.IntN(4) == 0 {
			clk.Advance(int64(r.IntN(20000)))
		}
		got := db.Queues()
		if len(got) != 2 || got[0].Name != "jobs" || got[1].Name != "plain" {
			t.Fatalf("queues %+v", got)
		}
		for _, g := range got {
			if want := queueCounts(t, db, g.Name); g != want {
				t.Fatalf("step %d (%s): %+v, queries count %+v", i, q, g, want)
			}
		}
	}
	if ran < 300 {
		t.Errorf("only %d of 400 steps ran", ran)
	}
}

// BenchmarkQueues times db.Queues over a queue of a million jobs in every
// state: what /_metrics and the console pay a scrape.
func BenchmarkQueues(b *testing.B) {
	db, _ := openMem(b)
	mustExec(b, db, `create collection jobs (payload json, run_at timestamp @sorted, owner text, attempts int, error text)`)
	fill(b, db, "jobs", 1000000, func(i int) string {
		switch i % 10 {
		case 0, 1, 2, 3, 4, 5:
			return fmt.Sprintf(`{run_at: now() - %d, attempts: 0}`, i)
		case 6, 7:
			return `{run_at: now() + 60000, attempts: 0}`
		case 8:
			return `{run_at: now() + 30000, owner: "w1", attempts: 1}`
		}
		return `{run_at: null, error: "boom", attempts: 5}`
	})
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if s := db.Queues(); s[0].Ready != 600000 {
			b.Fatalf("%+v", s)
		}
	}
}

// TestQueuesWhileClaiming reads the counts while workers claim and ack
// (run it with -race): every look sees the jobs whole, each in one state,
// and the end is what FenecQL counts.
func TestQueuesWhileClaiming(t *testing.T) {
	db, _ := openMem(t)
	mustExec(t, db, `create collection jobs (payload json, run_at timestamp @sorted, owner text, attempts int, error text)`)
	const n = 2000
	fill(t, db, "jobs", n, func(i int) string { return fmt.Sprintf(`{run_at: now() - %d, attempts: 0}`, i) })
	done := make(chan struct{})
	errs := make(chan error, 8)
	for w := range 4 {
		go func() {
			defer func() { done <- struct{}{} }()
			for {
				r, err := db.Exec(context.Background(), `set jobs {owner: $1, run_at: now() + 30000, attempts: attempts + 1} where run_at <= now() order run_at limit 10 returning id`, vals(fmt.Sprintf("w%d", w)))
				if err != nil {
					errs <- err
					return
				}
				if len(r.Rows) == 0 {
					return
				}
				for _, row := range r.Rows[:len(r.Rows)/2] {
					if _, err := db.Exec(context.Background(), `del jobs where id = $1 require 1`, []fenecql.Value{row[0]}); err != nil {
						errs <- err
						return
					}
				}
			}
		}()
	}
	looking := true
	for finished := 0; finished < 4; {
		select {
		case <-done:
			finished++
		default:
			if looking {
				s := db.Queues()[0]
				if total := s.Ready + s.Leased + s.Delayed + s.Dead + s.Kept; total > n || s.Delayed != 0 || s.Dead != 0 || s.Kept != 0 {
					t.Errorf("a look mid-run: %+v", s)
					looking = false
				}
			}
		}
	}
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if got, want := db.Queues()[0], queueCounts(t, db, "jobs"); got != want || got.Ready != 0 || got.Leased+n/2 > n {
		t.Errorf("at the end %+v, queries count %+v", got, want)
	}
}
