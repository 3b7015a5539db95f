package main

import (
	"strconv"
	"testing"
	"time"
)

// TestClusterChangeStream: on a cluster of three real nodes, positions
// are the replicated log's, the same on every node: each node's change
// stream answers the leader's writes at the positions (Fenec-Seq) the
// leader answered them with; a consumer acked on the leader goes on where
// it left off on a follower; an ack sent to a follower is refused there
// (a write, 403 naming the leader); a follower's live query gets the
// leader's writes as they are applied, under the same positions.
func TestClusterChangeStream(t *testing.T) {
	t.Parallel()
	c := newCluster(t, 3)
	c.write("create-q", "create collection q (n int)")
	c.converge(20 * time.Second)
	leader := c.leader(20 * time.Second)
	var follower *clusterNode
	for _, nd := range c.nodes {
		if nd != leader {
			follower = nd
			break
		}
	}
	live := openSSE(t, c.client(follower), "GET", "/q/changes", "", nil, false)
	live.wait(1, false)

	var seqs []string
	for i := range 3 {
		seqs = append(seqs, c.write("put-"+strconv.Itoa(i), "put q {n: $1}", i))
	}
	c.converge(20 * time.Second)
	for _, nd := range c.nodes {
		b, _ := readChanges(t, c.client(nd), "consumer=x&collection=q", 200)
		if len(b.Changes) != 3 {
			t.Fatalf("%s: changes %+v, want 3", nd.id, b.Changes)
		}
		for i, ch := range b.Changes {
			if strconv.FormatInt(ch.Position, 10) != seqs[i] || ch.Row["n"] != float64(i) {
				t.Errorf("%s: change %d at %d (%v), want position %s", nd.id, i, ch.Position, ch.Row, seqs[i])
			}
		}
	}

	first, _ := readChanges(t, c.client(leader), "consumer=x&collection=q&limit=1", 200)
	r, err := c.client(follower).Do("POST", "/_changes/ack", map[string]any{"consumer": "x", "position": first.Next}, nil)
	if err != nil || r.Status != 403 || r.Header.Get("Fenec-Leader") == "" {
		t.Fatalf("an ack on a follower: %v %d %s %v", err, r.Status, r.Body, r.Header)
	}
	ack(t, c.client(leader), "x", first.Next)
	c.converge(20 * time.Second)
	b, _ := readChanges(t, c.client(follower), "consumer=x&collection=q", 200)
	if b.Position != first.Next || len(b.Changes) != 2 || strconv.FormatInt(b.Changes[0].Position, 10) != seqs[1] {
		t.Errorf("on the follower after the leader's ack: %+v, want on from %d", b, first.Next)
	}

	evs := live.wait(4, false)
	for i, e := range evs[1:4] {
		if e.Name != "insert" || e.ID != seqs[i] {
			t.Errorf("follower's live query, event %d: %s, want an insert at %s", i+1, e.text(), seqs[i])
		}
	}
}
