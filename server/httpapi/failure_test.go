package httpapi

import (
	"errors"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fenecdb/fenec/server/engine"
	"github.com/fenecdb/fenec/server/httpapi/apitest"
	"github.com/fenecdb/fenec/server/store"
)

// newFaultyServer is newTestServer over a file whose store's writes fail
// while *fail is set (the store's fault hook: SQLite and the engine run).
func newFaultyServer(t *testing.T, file string, fail *atomic.Bool) *testServer {
	t.Helper()
	return newTestServerOn(t, engine.Options{File: file, StoreFault: func(at string) error {
		if at == store.FaultCommit && fail.Load() {
			return errors.New("injected: database or disk is full")
		}
		return nil
	}}, nil)
}

// metric returns the value of one unlabelled metric in /_metrics.
func metric(t *testing.T, c *apitest.Client, name string) string {
	t.Helper()
	r, err := c.Do("GET", "/_metrics", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(r.Body), "\n") {
		if v, ok := strings.CutPrefix(line, name+" "); ok {
			return v
		}
	}
	t.Fatalf("no metric %s", name)
	return ""
}

// TestStoreFailureOverHTTP: a keyed /batch the store failed to write is
// answered 503, leaves no document and no key, and its retry is run again
// (never replayed) once the store works — which it does again by itself;
// /_health and the metrics say so meanwhile.
func TestStoreFailureOverHTTP(t *testing.T) {
	t.Parallel()
	var fail atomic.Bool
	ts := newFaultyServer(t, filepath.Join(t.TempDir(), "f.db"), &fail)
	withJobs(t, ts, 2)
	const batch = `{"statements": [{"query": "put jobs {n: 100, run_at: now()}"}, {"query": "put jobs {n: 101, run_at: now()}"}]}`
	count := func() string { return string(ts.c.MustQuery(`get jobs count`).Body) }
	health := func() *apitest.Response {
		r, err := ts.c.Do("GET", "/_health", nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	if r := health(); r.Status != 200 || string(r.Body) != `{"ok":true,"store":"ok"}`+"\n" {
		t.Fatalf("health before: %d %s", r.Status, r.Body)
	}

	fail.Store(true)
	for try := range 2 {
		r := send(t, ts.c, "/batch", batch, "b1")
		if r.Status != 503 || r.Code() != "unavailable" || r.Header.Get("Idempotent-Replayed") != "" {
			t.Fatalf("try %d on a failing store: %d %v %s", try, r.Status, r.Header, r.Body)
		}
		if n := count(); n != `[{"count":2}]`+"\n" {
			t.Fatalf("try %d: the refused batch is visible: %s", try, n)
		}
		if ts.db.MetaLen() != 0 {
			t.Fatalf("try %d: a refused batch kept its key", try)
		}
	}
	if r := health(); r.Status != 503 || string(r.Body) != `{"error":"store: injected: database or disk is full","ok":false,"store":"failed"}`+"\n" {
		t.Fatalf("health while failed: %d %s", r.Status, r.Body)
	}
	if up, n := metric(t, ts.c, "fenec_store_up"), metric(t, ts.c, "fenec_store_failures_total"); up != "0" || n != "1" {
		t.Fatalf("metrics while failed: up %s, failures %s", up, n)
	}

	fail.Store(false)
	for end := time.Now().Add(10 * time.Second); health().Status != 200; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatal("the store did not recover within 10 s")
		}
	}
	first := send(t, ts.c, "/batch", batch, "b1")
	if first.Status != 200 || first.Header.Get("Idempotent-Replayed") != "" || string(first.Body) != `{"results":[{"affected":1},{"affected":1}]}`+"\n" {
		t.Fatalf("the retry once the store works: %d %v %s", first.Status, first.Header, first.Body)
	}
	again := send(t, ts.c, "/batch", batch, "b1")
	if again.Header.Get("Idempotent-Replayed") != "true" || string(again.Body) != string(first.Body) || again.Header.Get("Fenec-Seq") != first.Header.Get("Fenec-Seq") {
		t.Fatalf("the next retry: %v %s", again.Header, again.Body)
	}
	if n := count(); n != `[{"count":4}]`+"\n" {
		t.Fatalf("after the retries: %s", n)
	}
	if up, n := metric(t, ts.c, "fenec_store_up"), metric(t, ts.c, "fenec_store_failures_total"); up != "1" || n != "1" {
		t.Fatalf("metrics after recovery: up %s, failures %s", up, n)
	}
}
