package httpapi

import (
	"testing"
)

// TestQueueMetrics: at a manual clock, each queue's gauges in /_metrics
// are what FenecQL counts, after the queue page's statements put jobs in
// every state, and again after the clock moves a lease past its end; the
// claim and ack counters count the jobs claimed and deleted. The scrape is
// promlint clean (scrape).
func TestQueueMetrics(t *testing.T) {
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
}
