package httpapi

import (
	"strings"
	"testing"
	"time"
)

// TestLoneServerHasNoCluster: a server started without --node-id answers
// the cluster's routes 404, and Fenec-After reads its own writes at once
// and refuses at once, 400, a change number it never made or out of range.
func TestLoneServerHasNoCluster(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, ":memory:", nil)
	for _, rq := range []struct {
		method, path string
		body         any
	}{
		{"GET", "/_cluster", nil},
		{"POST", "/_cluster/members", map[string]any{"id": "n2", "raft_address": "127.0.0.1:7001"}},
		{"POST", "/_cluster/remove", map[string]any{"id": "n2"}},
		{"POST", "/_cluster/leader", map[string]any{}},
	} {
		r, err := ts.c.Do(rq.method, rq.path, rq.body, nil)
		if err != nil || r.Status != 404 || !strings.Contains(string(r.Body), "not a cluster node") {
			t.Errorf("%s %s on a lone server: %v %v", rq.method, rq.path, err, r)
		}
	}
	ts.c.MustQuery("create collection notes (s text)")
	seq := ts.c.MustQuery(`put notes {s: "a"}`).Header.Get("Fenec-Seq")
	r, err := ts.c.Do("POST", "/query", map[string]any{"query": "get notes count"}, map[string]string{"Fenec-After": seq})
	if err != nil || r.Status != 200 || !strings.Contains(string(r.Body), `"count":1`) {
		t.Fatalf("Fenec-After %s: %v %v", seq, err, r)
	}
	start := time.Now()
	r, err = ts.c.Do("POST", "/query", map[string]any{"query": "get notes count"}, map[string]string{"Fenec-After": "1000"})
	if err != nil || r.Status != 400 || !strings.Contains(string(r.Body), "last write is "+seq) {
		t.Fatalf("Fenec-After past the last write: %v %v, want 400 naming the last write", err, r)
	}
	if took := time.Since(start); took > time.Second {
		t.Errorf("a lone server answered a write it never made after %v, want at once", took)
	}
	for _, bad := range []string{"-1", "9007199254740992", "9223372036854775808", "x", "", " "} {
		r, err = ts.c.Do("POST", "/batch", map[string]any{"statements": []any{map[string]any{"query": "get notes count"}}}, map[string]string{"Fenec-After": bad})
		if err != nil || r.Status != 400 {
			t.Fatalf("Fenec-After %s: %v %v, want 400", bad, err, r)
		}
	}
}
