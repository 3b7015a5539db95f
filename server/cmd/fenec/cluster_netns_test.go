//go:build linux

package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fenecdb/fenec/server/cluster/history"
)

// netns is the test's hosts: a network namespace per node, each joined by
// a veth pair to a bridge in this namespace, where the clients run. A
// partition is blackhole routes between nodes' addresses; the clients
// still reach every node.
type netns struct {
	t      *testing.T
	prefix string // of every name the test makes, unique to this process
	subnet string // 10.211.<n>.
	names  []string
}

func ipCmd(t *testing.T, args ...string) {
	t.Helper()
	if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
		t.Fatalf("ip %s: %v %s", strings.Join(args, " "), err, out)
	}
}

func newNetns(t *testing.T, n int) *netns {
	if os.Geteuid() != 0 {
		t.Skip("partitions need network namespaces: run as root")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		t.Skip("partitions need iproute2's ip")
	}
	pid := os.Getpid()
	ns := &netns{t: t, prefix: fmt.Sprintf("fx%d", pid%100000), subnet: fmt.Sprintf("10.211.%d.", pid%250)}
	br := ns.prefix + "br"
	t.Cleanup(func() {
		for i := range ns.names {
			_ = exec.Command("ip", "link", "del", fmt.Sprintf("%sv%d", ns.prefix, i)).Run()
			_ = exec.Command("ip", "netns", "del", ns.names[i]).Run()
		}
		_ = exec.Command("ip", "link", "del", br).Run()
	})
	ipCmd(t, "link", "add", br, "type", "bridge")
	ipCmd(t, "addr", "add", ns.subnet+"254/24", "dev", br)
	ipCmd(t, "link", "set", br, "up")
	for i := 0; i < n; i++ {
		name := fmt.Sprintf("%sn%d", ns.prefix, i)
		host, peer := fmt.Sprintf("%sv%d", ns.prefix, i), fmt.Sprintf("%sp%d", ns.prefix, i)
		ipCmd(t, "netns", "add", name)
		ns.names = append(ns.names, name)
		ipCmd(t, "link", "add", host, "type", "veth", "peer", "name", peer)
		ipCmd(t, "link", "set", peer, "netns", name)
		ipCmd(t, "link", "set", host, "master", br)
		ipCmd(t, "link", "set", host, "up")
		ipCmd(t, "netns", "exec", name, "ip", "addr", "add", ns.addr(i)+"/24", "dev", peer)
		ipCmd(t, "netns", "exec", name, "ip", "link", "set", peer, "up")
		ipCmd(t, "netns", "exec", name, "ip", "link", "set", "lo", "up")
	}
	return ns
}

func (ns *netns) addr(i int) string { return fmt.Sprintf("%s%d", ns.subnet, i+1) }

// runner writes a script that runs bin in namespace i.
func (ns *netns) runner(i int) string {
	path := filepath.Join(ns.t.TempDir(), "fenec")
	script := fmt.Sprintf("#!/bin/sh\nexec ip netns exec %s %s \"$@\"\n", ns.names[i], bin)
	if err := os.WriteFile(path, []byte(script), 0o755); err != nil {
		ns.t.Fatal(err)
	}
	return path
}

// cut parts node i from the other nodes (add) or heals it (del).
func (ns *netns) cut(i int, op string) {
	for j := range ns.names {
		if j == i {
			continue
		}
		ipCmd(ns.t, "netns", "exec", ns.names[i], "ip", "route", op, "blackhole", ns.addr(j)+"/32")
		ipCmd(ns.t, "netns", "exec", ns.names[j], "ip", "route", op, "blackhole", ns.addr(i)+"/32")
	}
}

// TestClusterPartition: the leader is cut off from the other two, alive
// and reachable by clients, under a load of puts, claims and acks. It
// acknowledges no write from then on; the majority elects a leader and
// carries on; healed, the old leader follows, and the write sent to it
// while cut off is gone. The history is checked as TestClusterFailover's.
func TestClusterPartition(t *testing.T) {
	ns := newNetns(t, 3)
	c := &testCluster{t: t, token: "cluster-test-token"}
	for i := 0; i < 3; i++ {
		c.nodes = append(c.nodes, &clusterNode{id: fmt.Sprintf("n%d", i+1), http: ns.addr(i) + ":8080", raft: ns.addr(i) + ":7000"})
	}
	runners := map[*clusterNode]string{}
	for i, nd := range c.nodes {
		runners[nd] = ns.runner(i)
	}
	c.binOf = func(nd *clusterNode) string { return runners[nd] }
	startCluster(t, c)
	lead := c.leader(10 * time.Second)
	c.client(lead).MustQuery("create collection jobs (n int, run_at timestamp @sorted, owner text, attempts int)")
	load := startLoad(c, 8)
	time.Sleep(1500 * time.Millisecond)

	lead = c.leader(10 * time.Second)
	li := 0
	for i, nd := range c.nodes {
		if nd == lead {
			li = i
		}
	}
	cutAt := time.Now()
	ns.cut(li, "add")
	// The cut-off leader is sent a put: it must not acknowledge it.
	const lonely = 999_000_001
	r, err := c.client(lead).Do("POST", "/query", map[string]any{"query": "put jobs {n: $1, run_at: now(), attempts: 0}", "params": []any{lonely}}, nil)
	if err == nil && r.Status == 200 {
		t.Errorf("the cut-off leader acknowledged a put: %s", r.Body)
	} else if err == nil {
		t.Logf("the cut-off leader answered the put %d %s after %v", r.Status, r.Body, time.Since(cutAt).Round(time.Millisecond))
	}
	// The majority's new leader.
	var majority []*clusterNode
	for _, nd := range c.nodes {
		if nd != lead {
			majority = append(majority, nd)
		}
	}
	sub := &testCluster{t: t, nodes: majority, token: c.token, binOf: c.binOf}
	next := sub.leader(15 * time.Second)
	t.Logf("cut off %s; %s took writes after %v", lead.id, next.id, time.Since(cutAt).Round(time.Millisecond))
	time.Sleep(2 * time.Second)
	ns.cut(li, "del")
	healed := time.Now()
	for time.Since(healed) < 15*time.Second {
		if st, ok := c.status(lead); ok && st.Role == "follower" && st.LeaderURL != "" {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if st, _ := c.status(lead); st.Role != "follower" {
		t.Errorf("healed, the old leader %s is %q, want follower", lead.id, st.Role)
	}
	time.Sleep(1 * time.Second)
	ops := load.stop()
	c.converge(30 * time.Second)
	ops = append(ops, history.Op{Kind: "put", Result: "fail", Jobs: []int64{lonely}})
	ops = checkFinal(t, c, ops)
	for _, op := range ops {
		if op.Kind == "final" {
			for _, n := range op.Jobs {
				if n == lonely {
					t.Errorf("the put sent to the cut-off leader, never acknowledged, is in the final state")
				}
			}
		}
	}
}
