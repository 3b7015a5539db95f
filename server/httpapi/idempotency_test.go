package httpapi

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fenecdb/fenec/server/httpapi/apitest"
)

const claim = `{"query": "set jobs {owner: $1, run_at: now() + 30000} where run_at <= now() order run_at limit 2 returning id", "params": ["w1"]}`

func withJobs(t *testing.T, ts *testServer, n int) {
	t.Helper()
	ts.c.MustQuery("create collection if not exists jobs (n int, run_at timestamp @sorted, owner text)")
	for i := range n {
		ts.c.MustQuery("put jobs {n: $1, run_at: now()}", i)
	}
}

func send(t *testing.T, c *apitest.Client, path, body, key string) *apitest.Response {
	t.Helper()
	r, err := c.Do("POST", path, body, map[string]string{"Idempotency-Key": key})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// TestIdempotencyKey: docs/http.md's rules for a key, one case a row.
func TestIdempotencyKey(t *testing.T) {
	t.Parallel()
	const batch = `{"statements": [{"query": "put jobs {n: 100, run_at: now()}"}, {"query": "get jobs count"}]}`
	tests := []struct {
		name string
		run  func(t *testing.T, ts *testServer)
	}{
		{"the same request is answered the first answer and writes nothing", func(t *testing.T, ts *testServer) {
			first := send(t, ts.c, "/query", claim, "k")
			seq := ts.db.Seq()
			again := send(t, ts.c, "/query", claim, "k")
			if again.Status != 200 || string(again.Body) != string(first.Body) || again.Header.Get("Idempotent-Replayed") != "true" {
				t.Fatalf("retry: %d %v %s; first %s", again.Status, again.Header, again.Body, first.Body)
			}
			if first.Header.Get("Idempotent-Replayed") != "" {
				t.Error("the first answer says it is replayed")
			}
			if a, b := first.Header.Get("Fenec-Seq"), again.Header.Get("Fenec-Seq"); a == "" || a != b {
				t.Errorf("Fenec-Seq %q first, %q replayed", a, b)
			}
			if ts.db.Seq() != seq {
				t.Error("the retry wrote")
			}
		}},
		{"a batch too", func(t *testing.T, ts *testServer) {
			first := send(t, ts.c, "/batch", batch, "b")
			again := send(t, ts.c, "/batch", batch, "b")
			if string(again.Body) != string(first.Body) || again.Header.Get("Idempotent-Replayed") != "true" {
				t.Fatalf("retry %s, first %s", again.Body, first.Body)
			}
		}},
		{"the key with another request is 422", func(t *testing.T, ts *testServer) {
			send(t, ts.c, "/query", claim, "k")
			seq := ts.db.Seq()
			other := send(t, ts.c, "/query", `{"query": "del jobs"}`, "k")
			if other.Status != 422 || other.Code() != "key_reused" {
				t.Fatalf("%d %s", other.Status, other.Body)
			}
			if path := send(t, ts.c, "/batch", `{"statements": [`+claim+`]}`, "k"); path.Status != 422 {
				t.Errorf("the same statement on /batch: %d, want 422", path.Status)
			}
			if ts.db.Seq() != seq {
				t.Error("a 422 wrote")
			}
		}},
		{"the key with another token is 422", func(t *testing.T, ts *testServer) {
			send(t, ts.c, "/query", claim, "k")
			other := *ts.c
			other.Token = "someone else"
			if r := send(t, &other, "/query", claim, "k"); r.Status != 422 {
				t.Fatalf("%d %s", r.Status, r.Body)
			}
		}},
		{"a failed write keeps no key", func(t *testing.T, ts *testServer) {
			const unmet = `{"query": "del jobs where n = 99 require 1"}`
			if r := send(t, ts.c, "/query", unmet, "f"); r.Status != 412 {
				t.Fatalf("%d %s", r.Status, r.Body)
			}
			if ts.db.MetaLen() != 0 {
				t.Fatal("a key was kept")
			}
			ts.c.MustQuery("put jobs {n: 99, run_at: now()}")
			if r := send(t, ts.c, "/query", unmet, "f"); r.Status != 200 || r.Header.Get("Idempotent-Replayed") != "" {
				t.Fatalf("after the failure, the key is still taken: %d %v %s", r.Status, r.Header, r.Body)
			}
		}},
		{"a read with a key just runs", func(t *testing.T, ts *testServer) {
			const read = `{"query": "get jobs count"}`
			send(t, ts.c, "/query", read, "r")
			ts.c.MustQuery("put jobs {n: 7, run_at: now()}")
			if r := send(t, ts.c, "/query", read, "r"); string(r.Body) != "[{\"count\":4}]\n" || r.Header.Get("Idempotent-Replayed") != "" {
				t.Fatalf("%v %s", r.Header, r.Body)
			}
			if ts.db.MetaLen() != 0 {
				t.Error("a read kept a key")
			}
		}},
		{"a key expires after the TTL and is swept", func(t *testing.T, ts *testServer) {
			first := send(t, ts.c, "/query", claim, "e")
			ts.clock.Advance(time.Hour.Milliseconds() - 1)
			if r := send(t, ts.c, "/query", claim, "e"); r.Header.Get("Idempotent-Replayed") != "true" {
				t.Fatal("the key expired early")
			}
			ts.clock.Advance(1)
			sweepOnce(ts)
			if ts.db.MetaLen() != 0 {
				t.Fatal("the sweep kept an expired key")
			}
			if r := send(t, ts.c, "/query", claim, "e"); r.Header.Get("Idempotent-Replayed") != "" || string(r.Body) == string(first.Body) {
				t.Fatalf("an expired key replayed: %s", r.Body)
			}
		}},
		{"an expired key is not replayed, before any sweep", func(t *testing.T, ts *testServer) {
			first := send(t, ts.c, "/query", claim, "x")
			ts.clock.Advance(time.Hour.Milliseconds())
			if ts.db.MetaLen() != 1 {
				t.Fatal("the record went before the sweep: this case checks the lookup itself")
			}
			r := send(t, ts.c, "/query", claim, "x")
			if r.Header.Get("Idempotent-Replayed") != "" || string(r.Body) == string(first.Body) {
				t.Fatalf("an expired, unswept key replayed: %s", r.Body)
			}
		}},
		{"retries at once run the write once", func(t *testing.T, ts *testServer) {
			var wg sync.WaitGroup
			bodies := make([]string, 8)
			for i := range bodies {
				wg.Add(1)
				go func() {
					defer wg.Done()
					bodies[i] = string(send(t, ts.c, "/query", claim, "c").Body)
				}()
			}
			wg.Wait()
			for _, b := range bodies[1:] {
				if b != bodies[0] {
					t.Fatalf("answers differ: %q %q", b, bodies[0])
				}
			}
			if n := string(ts.c.MustQuery(`get jobs where owner = "w1" count`).Body); n != "[{\"count\":2}]\n" {
				t.Fatalf("owned: %s", n)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ts := newTestServer(t, ":memory:", func(c *Config) { c.IdempotencyTTL = time.Hour })
			withJobs(t, ts, 3)
			tt.run(t, ts)
		})
	}
}

// sweepOnce runs the sweeper's first pass and stops it.
func sweepOnce(ts *testServer) {
	ctx, cancel := contextDone()
	defer cancel()
	ts.SweepKeys(ctx, time.Hour)
}

// TestIdempotencyKeySurvivesRestart: a key is in the file with its write.
func TestIdempotencyKeySurvivesRestart(t *testing.T) {
	t.Parallel()
	file := t.TempDir() + "/keys.db"
	ts := newTestServer(t, file, nil)
	withJobs(t, ts, 3)
	first := send(t, ts.c, "/query", claim, "k")
	ts.db.Close()

	ts = newTestServer(t, file, nil)
	again := send(t, ts.c, "/query", claim, "k")
	if string(again.Body) != string(first.Body) || again.Header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("after a restart: %v %s, first %s", again.Header, again.Body, first.Body)
	}
}

// TestIdempotencyKeyLimit: past either cap a write under a new key is
// refused with key_limit and not run — nor is its retry — while held keys
// still replay; once keys expire, new ones are taken again.
func TestIdempotencyKeyLimit(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		keys  int
		bytes int64
	}{{"count", 2, 1 << 20}, {"bytes", 1000, 100}} {
		t.Run(tc.name, func(t *testing.T) {
			ts := newTestServer(t, ":memory:", func(c *Config) {
				c.IdempotencyTTL = time.Hour
				c.IdempotencyMaxKeys, c.IdempotencyMaxBytes = tc.keys, tc.bytes
			})
			withJobs(t, ts, 6)
			const put = `{"query": "put jobs {n: 100, run_at: now()}"}`
			count := func() string { return string(ts.c.MustQuery(`get jobs where n = 100 count`).Body) }
			k1 := send(t, ts.c, "/query", put, "k1")
			if k1.Status != 200 {
				t.Fatalf("k1: %d %s", k1.Status, k1.Body)
			}
			taken := 1
			if tc.name == "count" {
				if r := send(t, ts.c, "/query", put, "k2"); r.Status != 200 {
					t.Fatalf("k2: %d %s", r.Status, r.Body)
				}
				taken++
			}
			for try := range 2 {
				r := send(t, ts.c, "/query", put, "k3")
				if r.Status != 503 || r.Code() != "key_limit" || !strings.Contains(string(r.Body), "the write was not run") {
					t.Fatalf("try %d of a key past the cap: %d %s", try, r.Status, r.Body)
				}
			}
			if want := fmt.Sprintf(`[{"count":%d}]`+"\n", taken); count() != want {
				t.Fatalf("a refused key's write ran: %s, want %s", count(), want)
			}
			if r := send(t, ts.c, "/query", put, "k1"); r.Header.Get("Idempotent-Replayed") != "true" || string(r.Body) != string(k1.Body) {
				t.Fatalf("a held key no longer replays: %d %s", r.Status, r.Body)
			}
			ts.clock.Advance(time.Hour.Milliseconds())
			sweepOnce(ts)
			if r := send(t, ts.c, "/query", put, "k3"); r.Status != 200 || r.Header.Get("Idempotent-Replayed") != "" {
				t.Fatalf("k3 once older keys expired: %d %s", r.Status, r.Body)
			}
		})
	}
}

// TestIdempotencyKeyLimitLeavesChangesOut: the change stream's records
// of the changes it keeps are side records too, but bounded by
// --changes-retain*: they do not count toward the keys' caps.
func TestIdempotencyKeyLimitLeavesChangesOut(t *testing.T) {
	ts := newTestServer(t, ":memory:", func(c *Config) { c.IdempotencyMaxKeys = 3 })
	withJobs(t, ts, 1)
	if r, err := ts.c.Do("POST", "/_changes/ack", map[string]any{"consumer": "c", "position": 0}, nil); err != nil || r.Status != 200 {
		t.Fatalf("ack: %v %d %s", err, r.Status, r.Body)
	}
	withJobs(t, ts, 20)
	if n, _ := ts.changes.Records(); n != 20 {
		t.Fatalf("%d change records, want 20", n)
	}
	if r := send(t, ts.c, "/query", `{"query": "put jobs {n: 100, run_at: now()}"}`, "k1"); r.Status != 200 {
		t.Fatalf("a key with 20 change records held: %d %s", r.Status, r.Body)
	}
}
