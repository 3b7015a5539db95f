package fenecdb_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fenecdb/fenec/sdks/go"
	"github.com/fenecdb/fenec/sdks/go/internal/fenectest"
)

// TestCluster runs the SDK against three real `fenec serve` nodes
// (docs/cluster.md) by the rules of docs/sdks.md, "Several nodes", in
// order on one cluster: a follower listed first, a held claim across a
// leadership transfer, the leader SIGKILLed.
func TestCluster(t *testing.T) {
	const token = "cluster-secret"
	c := fenectest.StartCluster(t, 3, token)
	ctx := context.Background()
	queries := func(nd *fenectest.Node) float64 {
		return c.Metric(nd, `fenec_http_requests_total{route="/query"`)
	}
	urls := func(nds ...*fenectest.Node) string {
		var us []string
		for _, nd := range nds {
			us = append(us, nd.URL)
		}
		return strings.Join(us, ",")
	}

	t.Run("a follower listed first", func(t *testing.T) {
		lead := c.Leader(10 * time.Second)
		fs := c.Followers(lead)
		if status, b := c.Do(lead, "POST", "/query", map[string]any{"query": jobsSchema}); status != 200 {
			t.Fatalf("%s: %d %s", jobsSchema, status, b)
		}
		// An insert through one follower, a claim through the other:
		// each sent there once, refused unrun, followed to the leader.
		// The counts before (the fixture's own probes may have gone to a
		// node that led for a moment as the cluster started).
		b0, b1 := queries(fs[0]), queries(fs[1])
		putter := connect(t, urls(fs[0], lead, fs[1]), fenecdb.WithToken(token), fenecdb.WithTimeout(10*time.Second))
		claimer := connect(t, urls(fs[1], fs[0], lead), fenecdb.WithToken(token), fenecdb.WithTimeout(10*time.Second))
		if _, err := putter.From("jobs").Insert(ctx, fenecdb.D("payload", "first", "run_at", fenecdb.Expr("now()"), "attempts", 0)); err != nil {
			t.Fatal(err)
		}
		res, err := claim(ctx, claimer.From("jobs"), "w1")
		if err != nil || len(res.Rows) != 1 {
			t.Fatalf("the claim through a follower: %v %+v", err, res)
		}
		if putter.Node() != lead.URL || claimer.Node() != lead.URL || claimer.Wait(time.Second).Node() != lead.URL {
			t.Fatalf("the clients' current nodes are %s and %s, want the leader %s", putter.Node(), claimer.Node(), lead.URL)
		}
		f0, f1, l := queries(fs[0]), queries(fs[1]), queries(lead)
		if f0 != b0+1 || f1 != b1+1 {
			t.Fatalf("the followers were sent %v and %v /query, want one each (refused, followed)", f0-b0, f1-b1)
		}
		// Every later call goes straight to the leader, reads included.
		for i := range 3 {
			if _, err := putter.From("jobs").Insert(ctx, fenecdb.D("payload", i, "run_at", fenecdb.Expr("now() + 60000"), "attempts", 0)); err != nil {
				t.Fatal(err)
			}
			if n, err := claimer.From("jobs").Count(ctx); err != nil || n != int64(2+i) {
				t.Fatalf("count: %v %v, want %d", n, err, 2+i)
			}
		}
		if n0, n1, nl := queries(fs[0]), queries(fs[1]), queries(lead); n0 != f0 || n1 != f1 || nl != l+6 {
			t.Fatalf("after 6 more calls: the followers were sent %v and %v /query (before: %v, %v), the leader %v (before %v)", n0, n1, f0, f1, nl, l)
		}
	})

	t.Run("a held claim across a transfer", func(t *testing.T) {
		lead := c.Leader(10 * time.Second)
		fs := c.Followers(lead)
		db := connect(t, urls(lead, fs[0], fs[1]), fenecdb.WithToken(token), fenecdb.WithTimeout(10*time.Second))
		got := make(chan fenecdb.Result, 1)
		errc := make(chan error, 1)
		go func() {
			res, err := db.Wait(15*time.Second).From("jobs").WhereRaw(fenecdb.Raw("run_at <= now()")).Limit(1).
				Update(ctx, fenecdb.D("owner", "held"), fenecdb.Returning("payload"))
			got <- res
			errc <- err
		}()
		held := func(nd *fenectest.Node) bool { return c.Metric(nd, "fenec_held_claims ") == 1 }
		eventually(t, "the claim to be held on the leader", func() bool { return held(lead) })
		moved := time.Now()
		if status, b := c.Do(lead, "POST", "/_cluster/leader", map[string]any{}); status != 200 {
			t.Fatalf("POST /_cluster/leader: %d %s", status, b)
		}
		next := c.Leader(10 * time.Second)
		if next == lead {
			t.Fatalf("%s still leads after the transfer", lead.ID)
		}
		eventually(t, "the claim to be held on the new leader", func() bool {
			select {
			case err := <-errc:
				t.Fatalf("the held claim ended: %v %+v", err, <-got)
			default:
			}
			return held(next)
		})
		t.Logf("the held claim was held again on the new leader %v after the transfer was asked", time.Since(moved).Round(time.Millisecond))
		if status, b := c.Do(next, "POST", "/query", map[string]any{"query": "put jobs {payload: 'after the transfer', run_at: now(), attempts: 0}"}); status != 200 {
			t.Fatalf("put: %d %s", status, b)
		}
		select {
		case res := <-got:
			if err := <-errc; err != nil {
				t.Fatal(err)
			}
			if len(res.Rows) != 1 || res.Rows[0].Get("payload") != "after the transfer" {
				t.Fatalf("the held claim took %+v, want the job put after the transfer", res.Rows)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("the held claim was not answered within 5 s of the put")
		}
	})

	t.Run("the leader killed", func(t *testing.T) {
		lead := c.Leader(10 * time.Second)
		fs := c.Followers(lead)
		db := connect(t, urls(lead, fs[0], fs[1]), fenecdb.WithToken(token), fenecdb.WithTimeout(10*time.Second))
		// A worker on a queue of its own runs through the kill
		// (docs/workers.md: its back-off covers what the rules leave to
		// the caller).
		// The queue is made through the worker's client, which so follows
		// the leader before NewWorker reads the schema (a follower may not
		// have applied it yet).
		var mu sync.Mutex
		ran := map[string]bool{}
		wdb := connect(t, urls(fs[0], fs[1], lead), fenecdb.WithToken(token), fenecdb.WithTimeout(10*time.Second))
		mustQuery(t, wdb, strings.Replace(jobsSchema, "jobs", "tasks", 1))
		w, err := fenecdb.NewWorker(wdb.From("tasks"), func(_ context.Context, j fenecdb.Job) error {
			mu.Lock()
			ran[fmt.Sprint(j.Row.Get("payload"))] = true
			mu.Unlock()
			return nil
		}, fenecdb.WorkerOptions{Concurrency: 2, Lease: 2 * time.Second, Backoff: fast, OnError: func(err error) { t.Logf("worker fault: %v", err) }})
		if err != nil {
			t.Fatal(err)
		}
		stopWorker := start(t, w)
		putTask := func(nd *fenectest.Node, name string) {
			if status, b := c.Do(nd, "POST", "/query", map[string]any{"query": "put tasks {payload: $1, run_at: now(), attempts: 0}", "params": []any{name}}); status != 200 {
				t.Fatalf("put %s: %d %s", name, status, b)
			}
		}
		ranAll := func(names ...string) func() bool {
			return func() bool {
				mu.Lock()
				defer mu.Unlock()
				for _, n := range names {
					if !ran[n] {
						return false
					}
				}
				return true
			}
		}
		putTask(lead, "before")
		eventually(t, "the worker to run a task before the kill", ranAll("before"))

		before, err := db.From("jobs").Count(ctx)
		if err != nil {
			t.Fatal(err)
		}
		// A follower's read is what it has applied (docs/cluster.md): let
		// both apply every write first.
		eventually(t, "the followers to apply every write", func() bool {
			return c.Metric(fs[0], `fenec_documents{collection="jobs"}`) == float64(before) &&
				c.Metric(fs[1], `fenec_documents{collection="jobs"}`) == float64(before)
		})
		lead.Kill()
		killed := time.Now()
		// The client's kept-alive connection to the leader may not have
		// seen the kill's FIN yet: a call sent on it then is lost after it
		// was sent (EOF), which the rules answer as is. net/http itself
		// sends a request with an Idempotency-Key again on a new
		// connection then (its isReplayable), whose dial is refused: rule
		// 3. So both calls go under keys, as a write should.
		n, err := db.From("jobs").Count(ctx, fenecdb.IdempotencyKey("read-after-kill"))
		read := time.Since(killed)
		if err != nil || n != before {
			t.Fatalf("the read after the kill: %v %v, want %d", n, err, before)
		}
		if _, err := db.From("jobs").Insert(ctx, fenecdb.D("payload", "after the kill", "run_at", fenecdb.Expr("now()"), "attempts", 0),
			fenecdb.IdempotencyKey("insert-after-kill")); err != nil {
			t.Fatalf("the insert after the kill (%v after it): %v", time.Since(killed), err)
		}
		write := time.Since(killed)
		t.Logf("after the leader's SIGKILL: a read answered in %v, an insert in %v", read.Round(time.Millisecond), write.Round(time.Millisecond))
		if write > 5*time.Second {
			t.Errorf("the insert took %v after the kill, want under 5 s", write)
		}
		next := c.Leader(10 * time.Second)
		if n := c.Metric(next, `fenec_documents{collection="jobs"}`); n != float64(before+1) {
			t.Fatalf("the new leader %s holds %v jobs, want %d", next.ID, n, before+1)
		}
		putTask(next, "after")
		eventually(t, "the worker to run a task put after the kill", ranAll("before", "after"))
		eventually(t, "the worker to ack every task", func() bool { return c.Metric(next, `fenec_documents{collection="tasks"}`) == 0 })
		if err := stopWorker(); err != nil {
			t.Fatal(err)
		}
	})
}
