package httpapi

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/fenecdb/fenec/server/engine"
)

// TestQueueMetrics: at a manual clock, each queue's gauges in /_metrics
// are what FenecQL counts, after the queue page's statements put jobs in
// every state, and again after the clock moves a lease past its end; the
// claim and ack counters count the jobs claimed and deleted. The scrape is
// promlint clean (scrape).
func TestQueueMetrics(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, ":memory:", nil)
	c := ts.c
	c.MustQuery(`create collection jobs (payload json, run_at timestamp @sorted, owner text, attempts int, error text)`)
	c.MustQuery(`create collection mail (run_at timestamp, owner text)`) // no error field, no index: a queue still
	c.MustQuery(`create collection notes (body text)`)                   // no run_at: no queue
	c.MustQuery(`put jobs [{run_at: now() - 4000, attempts: 0}, {run_at: now() - 1000, attempts: 0}, {run_at: now(), attempts: 0}, {run_at: now(), attempts: 0}, {run_at: now(), attempts: 0}]`)
	c.MustQuery(`put jobs [{run_at: now() + 3600000, attempts: 0}, {run_at: null, attempts: 2}, {run_at: null, error: "boom", attempts: 5}]`)
	c.MustQuery(`put mail [{run_at: now() + 1000}, {run_at: null}]`)
	c.MustQuery(`set jobs {owner: "w1", run_at: now() + 30000, attempts: attempts + 1} where run_at <= now() order run_at limit 2`)
	c.MustQuery(`del jobs where owner = "w1" and id = 1 require 1`)
	c.MustQuery(`set jobs {owner: "w2", run_at: now() + 10000, attempts: attempts + 1} where run_at <= now() order run_at limit 1 returning id`)

	count := func(coll, where string) float64 {
		var rows []struct{ Count float64 }
		c.MustQuery("get "+coll+" where "+where+" count").JSON(t, &rows)
		return rows[0].Count
	}
	check := func(when string) {
		t.Helper()
		fams := scrape(t, ts)
		for _, q := range []struct{ coll, owner, err string }{
			{"jobs", "owner", "error"}, {"mail", "owner", ""},
		} {
			want := map[string]float64{
				"ready":   count(q.coll, "run_at <= now()"),
				"leased":  count(q.coll, "run_at > now() and owner is not null"),
				"delayed": count(q.coll, "run_at > now() and owner is null"),
				"dead":    0,
				"kept":    count(q.coll, "run_at is null"),
			}
			if q.err != "" {
				want["dead"] = count(q.coll, "run_at is null and error is not null")
				want["kept"] = count(q.coll, "run_at is null and error is null")
			}
			for state, n := range want {
				if got := value(fams, "fenec_queue_jobs", map[string]string{"queue": q.coll, "state": state}); got != n {
					t.Errorf("%s: %s %s: gauge %v, queries count %v", when, q.coll, state, got, n)
				}
			}
			var oldest []struct{ Age float64 }
			c.MustQuery("get "+q.coll+" select now() - run_at as age where run_at <= now() order run_at limit 1").JSON(t, &oldest)
			wantAge := 0.0
			if len(oldest) == 1 {
				wantAge = oldest[0].Age / 1000
			}
			if got := value(fams, "fenec_queue_oldest_ready_age_seconds", map[string]string{"queue": q.coll}); got != wantAge {
				t.Errorf("%s: %s oldest ready age %v s, queries say %v", when, q.coll, got, wantAge)
			}
		}
		if f := fams["fenec_queue_jobs"]; f == nil || len(f.Metric) != 10 {
			t.Errorf("%s: want 5 states of 2 queues, got %v", when, f)
		}
	}
	check("at the start")
	if got := value(scrape(t, ts), "fenec_queue_jobs", map[string]string{"queue": "jobs", "state": "leased"}); got != 2 {
		t.Errorf("leased %v, want 2: the claims did not lease", got)
	}
	ts.clock.Advance(15000) // w2's lease (10 s) lapses, w1's (30 s) holds, mail's delayed job comes due
	check("15 s later")
	fams := scrape(t, ts)
	if got := value(fams, "fenec_queue_jobs", map[string]string{"queue": "jobs", "state": "ready"}); got != 3 {
		t.Errorf("ready %v, want 3 after w2's lease lapsed", got)
	}
	if got := value(fams, "fenec_queue_oldest_ready_age_seconds", map[string]string{"queue": "jobs"}); got != 15 {
		t.Errorf("oldest ready age %v, want 15", got)
	}
	for _, tt := range []struct {
		name string
		want float64
	}{{"fenec_queue_claimed_total", 3}, {"fenec_queue_acked_total", 1}} {
		if got := value(fams, tt.name, map[string]string{"queue": "jobs"}); got != tt.want {
			t.Errorf("%s %v, want %v", tt.name, got, tt.want)
		}
	}
	// Dropped, a queue is gone from the gauges and the counters.
	c.MustQuery(`drop collection jobs`)
	for name, f := range scrape(t, ts) {
		for _, m := range f.Metric {
			for _, l := range m.Label {
				if l.GetName() == "queue" && l.GetValue() == "jobs" {
					t.Errorf("%s still has queue jobs after the drop", name)
				}
			}
		}
	}
}

// BenchmarkConsoleRefresh is the server's side of one refresh of the queue
// console over a queue of a million jobs (60% ready, 20% delayed, 10%
// leased, 10% dead), with the ready jobs' first page open:
//
//	go test ./httpapi -run '^$' -bench ConsoleRefresh -benchtime 20x
//
// An operator's refresh is metrics (GET /_metrics: the queue's gauges,
// kept by the engine, beside the Go and process collectors) and page (the
// first 51 ready jobs, walked in the run_at index); collections is asked
// every 10 s. A token held to a policy may not read /_metrics: its
// refresh is queries instead (the five counts and the oldest ready job in
// one /batch, each count reading the jobs of its state) and page.
func BenchmarkConsoleRefresh(b *testing.B) {
	db, err := engine.Open(engine.Options{File: ":memory:"})
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	s, err := New(Config{DB: db})
	if err != nil {
		b.Fatal(err)
	}
	hs := httptest.NewServer(s)
	defer hs.Close()
	ctx := b.Context()
	if _, err := db.Exec(ctx, `create collection jobs (payload json, run_at timestamp @sorted, owner text, attempts int, error text)`, nil); err != nil {
		b.Fatal(err)
	}
	for i := 0; i < 1000000; i += 10000 {
		var sb strings.Builder
		sb.WriteString("put jobs [")
		for k := i; k < i+10000; k++ {
			if k > i {
				sb.WriteString(",")
			}
			switch k % 10 {
			case 0, 1, 2, 3, 4, 5:
				fmt.Fprintf(&sb, `{payload: {"n": %d}, run_at: now() - %d, attempts: 0}`, k, k)
			case 6, 7:
				fmt.Fprintf(&sb, `{payload: {"n": %d}, run_at: now() + 60000, attempts: 0}`, k)
			case 8:
				fmt.Fprintf(&sb, `{payload: {"n": %d}, run_at: now() + 30000, owner: "w1", attempts: 1}`, k)
			default:
				fmt.Fprintf(&sb, `{payload: {"n": %d}, run_at: null, error: "boom", attempts: 5}`, k)
			}
		}
		sb.WriteString("]")
		if _, err := db.Exec(ctx, sb.String(), nil); err != nil {
			b.Fatal(err)
		}
	}
	hc := &http.Client{}
	post := func(path, body string) {
		resp, err := hc.Post(hs.URL+path, "application/json", strings.NewReader(body))
		if err != nil {
			b.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			b.Fatalf("%s %s: %d", path, body, resp.StatusCode)
		}
	}
	get := func(path string) {
		resp, err := hc.Get(hs.URL + path)
		if err != nil {
			b.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	const counts = `{"statements": [
		{"query": "get jobs where run_at <= now() count"},
		{"query": "get jobs where run_at > now() and owner is not null count"},
		{"query": "get jobs where run_at > now() and owner is null count"},
		{"query": "get jobs where run_at is null and error is not null count"},
		{"query": "get jobs where run_at is null and error is null count"},
		{"query": "get jobs select now() - run_at as age where run_at <= now() order run_at limit 1"}]}`
	const page = `{"query": "get jobs where run_at <= now() order run_at asc limit 51 offset 0"}`
	for _, bb := range []struct {
		name string
		do   func()
	}{
		{"metrics", func() { get("/_metrics") }},
		{"page", func() { post("/query", page) }},
		{"collections", func() { get("/collections") }},
		{"queries", func() { post("/batch", counts) }},
	} {
		b.Run(bb.name, func(b *testing.B) {
			for b.Loop() {
				bb.do()
			}
		})
	}
}
