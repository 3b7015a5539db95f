package main

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fenecdb/fenec/server/httpapi/apitest"
)

// TestClusterRestoreFromBackup: a backup taken from a cluster's follower
// seeds a new cluster (docs/cluster.md, "Restoring a cluster"): fenec
// restore --node-id makes the first node's raft directory, that node
// leads alone from the backup's state, two empty nodes are added as
// voters and catch up from its snapshot, and all three then hold the
// backup's documents and the writes after it.
func TestClusterRestoreFromBackup(t *testing.T) {
	t.Parallel()
	c := newCluster(t, 3)
	c.write("create", "create collection notes (n int)")
	for i := range 50 {
		c.write(fmt.Sprintf("put-%d", i), "put notes {n: $1}", i)
	}
	c.converge(20 * time.Second)
	lead := c.leader(10 * time.Second)
	var follower *clusterNode
	for _, nd := range c.nodes {
		if nd != lead {
			follower = nd
			break
		}
	}
	dir := t.TempDir()
	backup := filepath.Join(dir, "backup.db")
	out := mustFenec(t, nil, "backup", "--from", follower.url(), "--to", backup)
	if !strings.Contains(out, "cluster node "+follower.id+", follower") {
		t.Fatalf("a follower's backup: %q, want it to name the node", out)
	}
	want := string(c.client(follower).MustQuery("get notes").Body)
	for _, nd := range c.nodes {
		nd.p.Stop(10 * time.Second)
		nd.p = nil
	}

	nodes := make([]*clusterNode, 3)
	for i := range nodes {
		nodes[i] = &clusterNode{id: fmt.Sprintf("s%d", i+1), http: apitest.FreeAddr(t), raft: apitest.FreeAddr(t), file: filepath.Join(dir, fmt.Sprintf("s%d.db", i+1))}
	}
	seed := nodes[0]
	out = mustFenec(t, nil, "restore", backup, "--to", seed.file, "--node-id", seed.id, "--raft", seed.raft)
	if !strings.Contains(out, "seeded") {
		t.Fatalf("fenec restore --node-id: %q", out)
	}
	// Without --node-id, a file with writes and no raft directory is
	// refused as a node (node.go); the seed's raft directory lets it start.
	for _, nd := range nodes {
		nd.p = apitest.Start(t, bin, "--http", nd.http, "--file", nd.file, "--node-id", nd.id, "--raft", nd.raft)
	}
	nc := &testCluster{t: t, nodes: nodes, binOf: func(*clusterNode) string { return bin }}
	if l := nc.leader(20 * time.Second); l != seed {
		t.Fatalf("%s leads, want the seed", l.id)
	}
	if got := string(nc.client(seed).MustQuery("get notes").Body); got != want {
		t.Fatalf("the seed holds %.300s, want the backup's %.300s", got, want)
	}
	for _, nd := range nodes[1:] {
		r, err := nc.client(seed).Do("POST", "/_cluster/members", map[string]any{"id": nd.id, "raft_address": nd.raft, "voter": true}, nil)
		if err != nil || r.Status != 200 {
			t.Fatalf("adding %s: %v %v", nd.id, err, r)
		}
	}
	seq := nc.write("after", "put notes {n: $1}", 1000)
	wantAfter := string(nc.client(seed).MustQuery("get notes").Body)
	for _, nd := range nodes[1:] {
		var r *apitest.Response
		var err error
		// A new node is sent the seed's snapshot, then the log's tail; a
		// slow machine may take more than one Fenec-After bound (504).
		for deadline := time.Now().Add(60 * time.Second); ; {
			r, err = nc.client(nd).Do("POST", "/query", map[string]any{"query": "get notes"}, map[string]string{"Fenec-After": seq})
			if err != nil || r.Status != 504 || time.Now().After(deadline) {
				break
			}
		}
		if err != nil || r.Status != 200 || string(r.Body) != wantAfter {
			t.Fatalf("%s after Fenec-After %s: %v %v, want %.200s", nd.id, seq, err, r, wantAfter)
		}
	}
	st, _ := nc.status(seed)
	if len(st.Members) != 3 {
		t.Fatalf("the new cluster's members: %+v", st.Members)
	}
}
