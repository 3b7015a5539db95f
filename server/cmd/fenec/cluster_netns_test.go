//go:build linux

package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fenecdb/fenec/server/cluster/history"
	"github.com/fenecdb/fenec/server/httpapi/apitest"
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

// netnsMade counts the netns made in this process.
var netnsMade atomic.Int32

func newNetns(t *testing.T, n int) *netns {
	if os.Geteuid() != 0 {
		t.Skip("partitions need network namespaces: run as root")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		t.Skip("partitions need iproute2's ip")
	}
	// Names and a subnet of this process and this call of its own, so that
	// tests in parallel (and other processes' runs) each have their own.
	pid, k := os.Getpid(), netnsMade.Add(1)-1
	ns := &netns{t: t, prefix: fmt.Sprintf("fx%d%c", pid%100000, 'a'+k%26), subnet: fmt.Sprintf("10.%d.%d.", 211+k%26, pid%250)}
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

// newNetnsCluster starts three nodes, each in a namespace of its own.
func newNetnsCluster(t *testing.T) (*netns, *testCluster) {
	ns := newNetns(t, 3)
	// Each node listens on its namespace's address, beyond loopback, in
	// plain HTTP and raft: --insecure says so (docs/cluster.md).
	c := &testCluster{t: t, token: "cluster-test-token", extra: []string{"--insecure"}}
	for i := 0; i < 3; i++ {
		c.nodes = append(c.nodes, &clusterNode{id: fmt.Sprintf("n%d", i+1), http: ns.addr(i) + ":8080", raft: ns.addr(i) + ":7000"})
	}
	runners := map[*clusterNode]string{}
	for i, nd := range c.nodes {
		runners[nd] = ns.runner(i)
	}
	c.binOf = func(nd *clusterNode) string { return runners[nd] }
	return ns, startCluster(t, c)
}

func (c *testCluster) index(nd *clusterNode) int {
	for i, x := range c.nodes {
		if x == nd {
			return i
		}
	}
	c.t.Fatalf("%s is no node of the cluster", nd.id)
	return -1
}

// without returns the cluster of every node but nd: the majority when nd
// is cut off or down.
func (c *testCluster) without(nd *clusterNode) *testCluster {
	var rest []*clusterNode
	for _, x := range c.nodes {
		if x != nd {
			rest = append(rest, x)
		}
	}
	return &testCluster{t: c.t, nodes: rest, token: c.token, binOf: c.binOf}
}

// TestClusterFaults: 16 clients put, claim and ack through the leader
// while it is, in turn, SIGKILLed (and restarted) and cut off from the
// other two, alive and reachable by clients (and healed):
// FENEC_CLUSTER_FAULTS faults, default 2 (one of each). Cut off, the
// leader acknowledges no write — a put sent to it is answered an error
// and is gone once healed — the majority elects a leader and carries on,
// and healed, the old leader follows. Every client's operations are
// recorded as it saw them, and the one history, kills and partitions
// together, is checked (package history) with the final state read on
// every node.
func TestClusterFaults(t *testing.T) {
	t.Parallel()
	faults := 2
	if v := os.Getenv("FENEC_CLUSTER_FAULTS"); v != "" {
		faults, _ = strconv.Atoi(v)
	}
	ns, c := newNetnsCluster(t)
	lead := c.leader(10 * time.Second)
	c.client(lead).MustQuery("create collection jobs (n int, run_at timestamp @sorted, owner text, attempts int)")
	load := startLoad(c, 16)
	var lonely []int64
	var toLeader []time.Duration
	for f := 0; f < faults; f++ {
		// The clients' load runs 1 s between faults (the behaviour
		// under test: what the history records; no state to wait for).
		time.Sleep(time.Second)
		c.last = nil
		lead := c.leader(15 * time.Second)
		began := time.Now()
		if f%2 == 0 {
			lead.p.Kill()
			lead.p = nil
			next := c.without(lead).leader(15 * time.Second)
			toLeader = append(toLeader, time.Since(began))
			t.Logf("fault %d: %s SIGKILLed, %s took writes after %v", f+1, lead.id, next.id, time.Since(began).Round(time.Millisecond))
			c.start(lead)
			continue
		}
		li := c.index(lead)
		ns.cut(li, "add")
		// The cut-off leader is sent a put: it must not acknowledge it.
		n := int64(999_000_000 + f)
		lonely = append(lonely, n)
		r, err := c.client(lead).Do("POST", "/query", map[string]any{"query": "put jobs {n: $1, run_at: now(), attempts: 0}", "params": []any{n}}, nil)
		if err == nil && r.Status == 200 {
			t.Errorf("fault %d: the cut-off leader acknowledged a put: %s", f+1, r.Body)
		} else if err == nil {
			t.Logf("fault %d: the cut-off leader answered a put %d %s after %v", f+1, r.Status, r.Body, time.Since(began).Round(time.Millisecond))
		}
		next := c.without(lead).leader(15 * time.Second)
		toLeader = append(toLeader, time.Since(began))
		t.Logf("fault %d: %s cut off, %s took writes after %v", f+1, lead.id, next.id, time.Since(began).Round(time.Millisecond))
		// The partition lasts 1 s past the new leader's election, under
		// the load (the behaviour under test).
		time.Sleep(time.Second)
		ns.cut(li, "del")
		healed := time.Now()
		for time.Since(healed) < 15*time.Second {
			if st, ok := c.status(lead); ok && st.Role == "follower" && st.LeaderURL != "" {
				break
			}
			time.Sleep(50 * time.Millisecond)
		}
		if st, _ := c.status(lead); st.Role != "follower" && st.Role != "leader" {
			// Healed, it follows; it may even be elected again since.
			t.Errorf("fault %d: healed, the old leader %s is %q", f+1, lead.id, st.Role)
		}
	}
	// And 1 s of load after the last fault.
	time.Sleep(time.Second)
	ops := load.stop()
	c.converge(30 * time.Second)
	for _, n := range lonely {
		ops = append(ops, history.Op{Kind: "put", Result: "fail", Jobs: []int64{n}})
	}
	ops = checkFinal(t, c, ops)
	for _, op := range ops {
		if op.Kind != "final" {
			continue
		}
		for _, n := range op.Jobs {
			for _, l := range lonely {
				if n == l {
					t.Errorf("job %d, put to a cut-off leader and never acknowledged, is in the final state", n)
				}
			}
		}
	}
	sort.Slice(toLeader, func(i, j int) bool { return toLeader[i] < toLeader[j] })
	if len(toLeader) > 0 {
		t.Logf("time to a new leader over %d faults: p50 %v, max %v", len(toLeader),
			toLeader[len(toLeader)/2].Round(time.Millisecond), toLeader[len(toLeader)-1].Round(time.Millisecond))
	}
}

// TestClusterClaimBeforeCommit: a claim under an Idempotency-Key sent to a
// leader cut off from the others — it runs there, and cannot be committed,
// for the others receive nothing — is answered 503 (outcome unknown); the
// leader is SIGKILLed; the same claim under the same key on the next
// leader runs afresh (not a replay) and takes a page; the old leader,
// restarted and healed, drops the entry it had logged. In the end, on
// every node, the client owns exactly the retry's jobs, each claimed once.
func TestClusterClaimBeforeCommit(t *testing.T) {
	t.Parallel()
	ns, c := newNetnsCluster(t)
	lead := c.leader(10 * time.Second)
	lc := c.client(lead)
	lc.MustQuery("create collection jobs (n int, run_at timestamp @sorted, owner text, attempts int)")
	docs := make([]any, 25)
	for i := range docs {
		docs[i] = map[string]any{"n": i, "attempts": 0}
	}
	lc.MustQuery("put jobs $1", docs)
	lc.MustQuery("set jobs {run_at: now()}")
	c.converge(20 * time.Second)
	claim := map[string]any{"query": "set jobs {owner: $1, run_at: now() + 600000, attempts: attempts + 1} where run_at <= now() order run_at limit 10 returning id, n", "params": []any{"w-key"}}
	key := map[string]string{"Idempotency-Key": "claim-before-commit"}

	// The cut is in place before the claim is sent, so nothing it logs can
	// reach a follower. A leader that stepped down before the claim came
	// (its lease is 250 ms) refuses it unrun with 403: then heal, and cut
	// again.
	var first *apitest.Response
	for try := 0; try < 3 && first == nil; try++ {
		c.last = nil
		lead = c.leader(15 * time.Second)
		li := c.index(lead)
		ns.cut(li, "add")
		r, err := c.client(lead).Do("POST", "/query", claim, key)
		switch {
		case err != nil:
			t.Fatalf("the claim on the cut-off leader: %v", err)
		case r.Status == 200:
			t.Fatalf("the cut-off leader acknowledged a claim: %s", r.Body)
		case r.Status == 503 && strings.Contains(string(r.Body), "not committed"):
			first = r
			t.Logf("the cut-off leader %s answered the claim %d %s", lead.id, r.Status, r.Body)
		case r.Status == 403 || r.Code() == "no_leader":
			t.Logf("try %d: %s had stepped down before the claim came: %s", try+1, lead.id, r.Body)
			ns.cut(li, "del")
			for deadline := time.Now().Add(15 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
				if st, ok := c.status(lead); ok && st.LeaderURL != "" {
					break
				}
			}
		default:
			t.Fatalf("the claim on the cut-off leader: %d %s", r.Status, r.Body)
		}
	}
	if first == nil {
		t.Fatal("in 3 tries the cut-off leader never ran the claim")
	}
	li := c.index(lead)
	lead.p.Kill()
	lead.p = nil
	next := c.without(lead).leader(15 * time.Second)
	again, err := c.client(next).Do("POST", "/query", claim, key)
	if err != nil || again.Status != 200 {
		t.Fatalf("the claim retried on the next leader %s: %v %v", next.id, err, again)
	}
	if again.Header.Get("Idempotent-Replayed") != "" {
		t.Errorf("the retry was answered a replay of a claim never committed: %s", again.Body)
	}
	var took []struct{ ID, N int64 }
	again.JSON(t, &took)
	if len(took) != 10 {
		t.Fatalf("the retry took %d jobs, want a page of 10: %s", len(took), again.Body)
	}
	// Replayed now, on any node's leader.
	if r, err := c.client(next).Do("POST", "/query", claim, key); err != nil || r.Status != 200 || string(r.Body) != string(again.Body) || r.Header.Get("Idempotent-Replayed") != "true" {
		t.Errorf("the claim sent a third time: %v %v, want %s replayed", err, r, again.Body)
	}

	ns.cut(li, "del")
	c.start(lead)
	c.converge(30 * time.Second)
	want := fmt.Sprint(took)
	for _, nd := range c.nodes {
		r := c.client(nd).MustQuery("get jobs where owner = 'w-key' select id, n, attempts order n")
		var rows []struct{ ID, N, Attempts int64 }
		r.JSON(t, &rows)
		var got []struct{ ID, N int64 }
		for _, row := range rows {
			got = append(got, struct{ ID, N int64 }{row.ID, row.N})
			if row.Attempts != 1 {
				t.Errorf("on %s job %d was claimed %d times", nd.id, row.N, row.Attempts)
			}
		}
		if fmt.Sprint(got) != want {
			t.Errorf("on %s the client owns %v; want the retry's %v alone", nd.id, got, want)
		}
		if r := c.client(nd).MustQuery("get jobs where attempts > 0 count"); !strings.Contains(string(r.Body), `"count":10`) {
			t.Errorf("on %s claimed jobs: %s, want 10", nd.id, r.Body)
		}
	}
}
