package main

import (
	"fmt"
	"strconv"
	"testing"
	"time"
)

// TestChangeStreamClusterRestart: a consumer acked on the leader, behind
// by N writes; a follower is stopped (SIGTERM) and started again, then the
// leader is killed (SIGKILL) and started again: on each, once it has
// caught up, the consumer's read names all N, in order, none skipped —
// the records travel the log with the writes they describe.
func TestChangeStreamClusterRestart(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("a cluster of three processes")
	}
	c := newCluster(t, 3)
	at, _ := strconv.ParseInt(c.write("create-q", "create collection q (n int)"), 10, 64)
	lead := c.last
	if r, err := c.client(lead).Do("POST", "/_changes/ack", map[string]any{"consumer": "c", "position": at}, nil); err != nil || r.Status != 200 {
		t.Fatalf("ack on the leader: %v %v", err, r)
	}
	var want []int64
	for i := range 25 {
		s, _ := strconv.ParseInt(c.write(fmt.Sprintf("put-%d", i), "put q {n: $1}", i), 10, 64)
		want = append(want, s)
	}
	c.converge(20 * time.Second)

	var follower *clusterNode
	for _, nd := range c.nodes {
		if nd != lead {
			follower = nd
			break
		}
	}
	readOn := func(nd *clusterNode, how string) {
		t.Helper()
		deadline := time.Now().Add(20 * time.Second)
		for {
			var got []int64
			r, err := c.client(nd).Do("GET", "/_changes?consumer=c&collection=q&limit=1000", nil, nil)
			if err == nil && r.Status == 200 {
				var b changesBatch
				r.JSON(t, &b)
				for _, ch := range b.Changes {
					got = append(got, ch.Position)
				}
				if fmt.Sprint(got) == fmt.Sprint(want) {
					return
				}
				if len(got) >= len(want) {
					t.Fatalf("%s on %s: read %v, want %v", how, nd.id, got, want)
				}
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s on %s: the consumer did not read the %d writes within 20 s: %v %v", how, nd.id, len(want), err, r)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	readOn(follower, "before any restart")

	if err := follower.p.Stop(20 * time.Second); err != nil {
		t.Fatal(err)
	}
	follower.p = nil
	c.start(follower)
	readOn(follower, "a follower stopped and started")

	lead.p.Kill()
	lead.p = nil
	c.last = nil
	c.start(lead)
	c.converge(30 * time.Second)
	readOn(lead, "a leader killed and started")
}
