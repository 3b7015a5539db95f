package cluster

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/fenecdb/fenec/server/httpapi"
	"github.com/fenecdb/fenec/server/httpapi/apitest"
)

// TestNoReplayOfAnUncommittedWrite: a write under an Idempotency-Key runs
// on a leader that can no longer reach a majority, so the log never
// commits it; it is answered 503 (outcome unknown) when the leader steps
// down. Until the leader has discarded the writes it did not commit, its
// memory still holds the key's record; the client's retry under the same
// key, sent to that node in that window, must not be answered the first
// answer as a replay: nothing committed it. Before, it was answered 200
// replayed — an acknowledged write the cluster then lost (an ack of a job
// answered ok, the job back once the discard ran, claimed and acked again:
// TestClusterFaults's "acked done 2 times").
func TestNoReplayOfAnUncommittedWrite(t *testing.T) {
	t.Parallel()
	// A long lease: the leader cut off from the others keeps its term long
	// enough for the write to be run and proposed, whatever the machine's
	// load.
	nodes := startNodesWith(t, 3, nil, Config{Heartbeat: 1500 * time.Millisecond, Election: 1500 * time.Millisecond, LeaderLease: 1500 * time.Millisecond})
	lead := leader(t, nodes)
	api, err := httpapi.New(httpapi.Config{DB: lead.db})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(api)
	defer srv.Close()
	c := &apitest.Client{T: t, Base: srv.URL, HTTP: &http.Client{Timeout: 30 * time.Second}}
	c.MustQuery("create collection jobs (n int, owner text)")
	c.MustQuery("put jobs {n: 1, owner: 'w'}")

	// The others stop: nothing the leader proposes from now on commits.
	for _, nd := range nodes {
		if nd != lead {
			nd.stop()
		}
	}
	// Hold the leader's discard (leaveOffice waits for sendMu), as a
	// loaded machine delays it: the window in which its memory still holds
	// what the log did not commit.
	lead.n.sendMu.RLock()
	held := true
	defer func() {
		if held {
			lead.n.sendMu.RUnlock()
		}
	}()
	ack := map[string]any{"query": "del jobs where n = 1 and owner = 'w' require 1"}
	key := map[string]string{"Idempotency-Key": "ack-1"}
	first, err := c.Do("POST", "/query", ack, key)
	if err != nil {
		t.Fatal(err)
	}
	if first.Status != http.StatusServiceUnavailable {
		t.Fatalf("the ack on a leader cut off from the others: %d %s, want 503 (not committed)", first.Status, first.Body)
	}
	// The leader has stepped down; its discard waits.
	for deadline := time.Now().Add(10 * time.Second); lead.n.Writable() == nil && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
	}
	if _, ok := lead.db.GetMeta("idem:ack-1"); !ok {
		t.Fatal("the leader's memory no longer holds the key's record: the test does not reach the window it is about")
	}
	again, err := c.Do("POST", "/query", ack, key)
	if err != nil {
		t.Fatal(err)
	}
	if again.Status == http.StatusOK {
		t.Fatalf("the ack retried under its key was answered 200 (replayed %q) %s, though the log never committed it",
			again.Header.Get("Idempotent-Replayed"), again.Body)
	}
	t.Logf("the retry before the discard: %d %s", again.Status, again.Body)
	if again.Status != http.StatusServiceUnavailable {
		t.Errorf("the ack retried under its key before the discard: %d %s, want 503 (outcome unknown)", again.Status, again.Body)
	}

	// The discard runs: the record goes with the write, and the job is
	// there still.
	lead.n.sendMu.RUnlock()
	held = false
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if _, ok := lead.db.GetMeta("idem:ack-1"); !ok {
			break
		}
	}
	if _, ok := lead.db.GetMeta("idem:ack-1"); ok {
		t.Fatal("the leader kept the record of a write the log never committed")
	}
	r, err := lead.db.Exec(context.Background(), "get jobs where n = 1 count", nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := string(r.AppendJSON(nil)); got != `[{"count":1}]` {
		t.Errorf("the job after the discard: %s, want it there", got)
	}
}
