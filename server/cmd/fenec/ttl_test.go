package main

import (
	"strconv"
	"strings"
	"testing"
	"time"
)

// storedDocs returns nd's fenec_documents for coll: the documents it
// stores, lapsed or not (-1: not read).
func storedDocs(c *testCluster, nd *clusterNode, coll string) float64 {
	return metric(c, nd, `fenec_documents{collection="`+coll+`"}`)
}

// metric returns the sample named (with its labels) in nd's /_metrics;
// -1: not read.
func metric(c *testCluster, nd *clusterNode, name string) float64 {
	r, err := c.client(nd).Do("GET", "/_metrics", nil, nil)
	if err != nil || r.Status != 200 {
		return -1
	}
	for _, line := range strings.Split(string(r.Body), "\n") {
		if v, ok := strings.CutPrefix(line, name+" "); ok {
			f, _ := strconv.ParseFloat(v, 64)
			return f
		}
	}
	return -1
}

// visibleDocs returns `get <coll> count` on nd.
func visibleDocs(c *testCluster, nd *clusterNode, coll string) int {
	c.t.Helper()
	r, err := c.client(nd).Do("POST", "/query", map[string]any{"query": "get " + coll + " count"}, nil)
	if err != nil || r.Status != 200 {
		c.t.Fatalf("count on %s: %v %v", nd.id, err, r)
	}
	var rows []struct{ Count int }
	r.JSON(c.t, &rows)
	return rows[0].Count
}

// TestClusterTTLSweep: lapsed documents are swept by the leader alone, and
// its deletes reach the followers through the log. Each node runs its own
// manual clock: the followers' are moved past the lapse first, and while
// they hide the lapsed rows from reads they keep storing them — they do
// not sweep — until the leader's clock is moved too and its sweep
// arrives.
func TestClusterTTLSweep(t *testing.T) {
	t.Parallel()
	c := newCluster(t, 3, "--clock", "manual")
	c.write("create-s", "create collection s (k int, seen timestamp @ttl(30s))")
	docs := make([]map[string]any, 40)
	for i := range docs {
		docs[i] = map[string]any{"k": i}
	}
	c.write("put-s", "put s $1", docs)
	c.write("stamp-s", "set s {seen: now()}")
	c.converge(20 * time.Second)

	var lead *clusterNode
	for try := 0; ; try++ {
		lead = c.leader(15 * time.Second)
		for _, nd := range c.nodes {
			if nd != lead {
				if r, err := c.client(nd).Do("POST", "/_clock", map[string]any{"advance_ms": 60000}, nil); err != nil || r.Status != 200 {
					t.Fatalf("moving %s's clock: %v %v", nd.id, err, r)
				}
			}
		}
		// Three of the followers' sweep intervals (1 s): a sweep of their
		// own would have shown by then.
		time.Sleep(3500 * time.Millisecond)
		if c.leader(15*time.Second) == lead {
			break
		}
		if try == 2 {
			t.Skip("the leadership kept moving on this loaded machine")
		}
		// A follower that took the lead sweeps rightly; start again.
		t.Logf("leadership moved from %s; trying again", lead.id)
	}
	for _, nd := range c.nodes {
		if nd == lead {
			if got := visibleDocs(c, nd, "s"); got != 40 {
				t.Fatalf("the leader's clock has not moved, yet it answers %d of 40 rows", got)
			}
			continue
		}
		if got := visibleDocs(c, nd, "s"); got != 0 {
			t.Fatalf("%s's clock is past the lapse, yet it answers %d rows", nd.id, got)
		}
		if got := storedDocs(c, nd, "s"); got != 40 {
			t.Fatalf("%s stores %v documents: a follower swept on its own", nd.id, got)
		}
	}

	if r, err := c.client(lead).Do("POST", "/_clock", map[string]any{"advance_ms": 60000}, nil); err != nil || r.Status != 200 {
		t.Fatalf("moving the leader's clock: %v %v", err, r)
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		all := true
		for _, nd := range c.nodes {
			all = all && storedDocs(c, nd, "s") == 0
		}
		if all {
			break
		}
		if time.Now().After(deadline) {
			for _, nd := range c.nodes {
				t.Logf("%s stores %v", nd.id, storedDocs(c, nd, "s"))
			}
			t.Fatal("the leader's sweep did not reach every node within 20 s")
		}
		time.Sleep(100 * time.Millisecond)
	}
	c.converge(20 * time.Second)
	// Each lapsed document was deleted by one sweep, the leader's (or, had
	// the leadership moved meanwhile, its successor's): never twice.
	sum := 0.0
	for _, nd := range c.nodes {
		sum += metric(c, nd, "fenec_lapsed_deleted_total")
	}
	if sum != 40 {
		t.Errorf("the nodes' fenec_lapsed_deleted_total add up to %v, want 40", sum)
	}
	if got := metric(c, lead, "fenec_lapsed_deleted_total"); got != 40 && c.leader(15*time.Second) == lead {
		t.Errorf("the leader deleted %v lapsed documents, want 40", got)
	}
}
