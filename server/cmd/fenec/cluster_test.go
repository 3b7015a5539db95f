package main

import (
	"fmt"
	"net/http"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fenecdb/fenec/server/httpapi/apitest"
)

// The cluster's tests run three real `fenec serve` nodes on loopback
// ports and kill them with SIGKILL (docs/cluster.md, Tests).

type clusterNode struct {
	id, http, raft, file string
	p                    *apitest.Process // nil while down
	paused               atomic.Bool      // SIGSTOPped: not asked anything
}

type testCluster struct {
	t         *testing.T
	nodes     []*clusterNode
	bootstrap string
	extra     []string
	token     string
	last      *clusterNode // the leader write last found
	// binOf returns the program that runs a node: bin, or a script that
	// runs bin in the node's network namespace.
	binOf func(*clusterNode) string
	// argsOf, if set, answers flags of a node's own (its certificate).
	argsOf func(*clusterNode) []string
}

// noProxy is a transport that never goes through $http_proxy: the nodes'
// addresses are this machine's (loopback, or the test's namespaces).
var noProxy = &http.Transport{Proxy: nil, MaxIdleConnsPerHost: 32}

func newCluster(t *testing.T, n int, extra ...string) *testCluster {
	t.Helper()
	var nodes []*clusterNode
	for i := 1; i <= n; i++ {
		nodes = append(nodes, &clusterNode{id: fmt.Sprintf("n%d", i), http: apitest.FreeAddr(t), raft: apitest.FreeAddr(t)})
	}
	return startCluster(t, &testCluster{t: t, extra: extra, nodes: nodes, binOf: func(*clusterNode) string { return bin }})
}

// startCluster starts c's nodes, whose addresses are set, and waits for a
// leader.
func startCluster(t *testing.T, c *testCluster) *testCluster {
	t.Helper()
	dir := t.TempDir()
	var peers []string
	for _, nd := range c.nodes {
		nd.file = filepath.Join(dir, nd.id+".db")
		peers = append(peers, nd.id+"="+nd.raft)
	}
	c.bootstrap = strings.Join(peers, ",")
	for _, nd := range c.nodes {
		c.start(nd)
	}
	c.leader(20 * time.Second)
	return c
}

func (c *testCluster) start(nd *clusterNode) {
	c.t.Helper()
	args := append([]string{"--http", nd.http, "--file", nd.file, "--node-id", nd.id, "--raft", nd.raft, "--bootstrap", c.bootstrap}, c.extra...)
	if c.token != "" {
		args = append(args, "--token", c.token)
	}
	if c.argsOf != nil {
		args = append(args, c.argsOf(nd)...)
	}
	p := apitest.Start(c.t, c.binOf(nd), args...)
	nd.p = p
	c.t.Cleanup(func() {
		// A binary built with -race reports as it goes.
		if strings.Contains(p.Log(), "DATA RACE") {
			c.t.Errorf("%s reported a data race:\n%s", nd.id, p.Log())
		}
		if c.t.Failed() {
			log := p.Log()
			if len(log) > 8000 {
				log = log[len(log)-8000:]
			}
			c.t.Logf("%s's log, its end:\n%s", nd.id, log)
		}
	})
}

func (nd *clusterNode) url() string { return "http://" + nd.http }

func (c *testCluster) client(nd *clusterNode) *apitest.Client {
	return &apitest.Client{T: c.t, Base: nd.url(), Token: c.token, HTTP: &http.Client{Timeout: 10 * time.Second, Transport: noProxy}}
}

type clusterStatus struct {
	ID        string `json:"id"`
	Role      string `json:"role"`
	LeaderURL string `json:"leader_url"`
	Seq       int64  `json:"seq"`
	Members   []struct {
		ID    string `json:"id"`
		Voter bool   `json:"voter"`
	} `json:"members"`
}

func (c *testCluster) status(nd *clusterNode) (clusterStatus, bool) {
	var st clusterStatus
	if nd.p == nil || nd.paused.Load() {
		return st, false
	}
	r, err := c.client(nd).Do("GET", "/_cluster", nil, nil)
	if err != nil || r.Status != 200 {
		return st, false
	}
	r.JSON(c.t, &st)
	return st, true
}

// leader waits for a node that leads and takes writes, and returns it.
func (c *testCluster) leader(within time.Duration) *clusterNode {
	c.t.Helper()
	deadline := time.Now().Add(within)
	for time.Now().Before(deadline) {
		for _, nd := range c.nodes {
			if st, ok := c.status(nd); ok && st.Role == "leader" {
				w, err := c.client(nd).Do("POST", "/query", map[string]any{"query": "create collection if not exists probes (k int)"}, nil)
				if err == nil && w.Status == 200 {
					return nd
				}
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	c.t.Fatalf("no leader took writes within %v", within)
	return nil
}

// write runs a write on the leader, retried under one Idempotency-Key on
// whichever node leads while an election (a slow machine's) refuses it or
// leaves its outcome unknown; it returns the Fenec-Seq.
func (c *testCluster) write(key, query string, params ...any) string {
	c.t.Helper()
	if params == nil {
		params = []any{}
	}
	return c.send(key, map[string]any{"query": query, "params": params}, nil).Header.Get("Fenec-Seq")
}

// send posts body to /query on the leader under the Idempotency-Key key
// (with header's too), retried under that key on whichever node leads
// while it is refused (403: not run) or its outcome is unknown (503),
// and returns the first other answer, which must be 200.
func (c *testCluster) send(key string, body any, header map[string]string) *apitest.Response {
	c.t.Helper()
	h := map[string]string{"Idempotency-Key": key}
	for k, v := range header {
		h[k] = v
	}
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		if c.last == nil {
			c.last = c.leader(15 * time.Second)
		}
		nd := c.last
		r, err := c.client(nd).Do("POST", "/query", body, h)
		if err == nil && r.Status == 200 {
			return r
		}
		if err == nil && (r.Status != 503 && r.Status != 403 || r.Code() == "key_limit") {
			c.t.Fatalf("%v: %d %s", body, r.Status, r.Body)
		}
		c.last = nil
		time.Sleep(50 * time.Millisecond)
	}
	c.t.Fatalf("%v: not taken within 20 s", body)
	return nil
}

// leads reports whether url is the URL of the node that leads now.
func (c *testCluster) leads(url string) bool {
	for _, nd := range c.nodes {
		if nd.url() == url {
			st, ok := c.status(nd)
			return ok && st.Role == "leader"
		}
	}
	return false
}

// converge waits until every running node has applied the leader's seq.
func (c *testCluster) converge(within time.Duration) int64 {
	c.t.Helper()
	deadline := time.Now().Add(within)
	for time.Now().Before(deadline) {
		var seqs []int64
		for _, nd := range c.nodes {
			if st, ok := c.status(nd); ok {
				seqs = append(seqs, st.Seq)
			} else if nd.p != nil {
				seqs = append(seqs, -1)
			}
		}
		same := len(seqs) > 0
		for _, s := range seqs {
			same = same && s == seqs[0] && s > 0
		}
		if same {
			return seqs[0]
		}
		time.Sleep(50 * time.Millisecond)
	}
	c.t.Fatalf("the nodes did not converge within %v", within)
	return 0
}

// TestClusterFollowers: a follower refuses writes, plain and held claims
// included, with 403 naming the leader; it serves reads, and Fenec-After
// reads its client's writes; a held claim on a leader that hands its
// leadership on is answered at once; a claim retried under its
// Idempotency-Key on the next leader, after the first was SIGKILLed, is
// answered the first answer.
func TestClusterFollowers(t *testing.T) {
	t.Parallel()
	c := newCluster(t, 3)
	c.write("create-jobs", "create collection jobs (n int, run_at timestamp @sorted, owner text, attempts int)")
	seq := c.write("put-jobs", "put jobs [{n: 1, run_at: now(), attempts: 0}, {n: 2, run_at: now(), attempts: 0}]")
	claim := "set jobs {owner: $1, run_at: now() + 30000, attempts: attempts + 1} where run_at <= now() order run_at limit 10 returning id, n"
	// A follower refuses claims, plain and held, naming the leader. An
	// election meanwhile (a slow machine's) may leave a refusal naming no
	// leader, or one that no longer leads: the check is made again.
	refused := func(h map[string]string) bool {
		lead := c.leader(10 * time.Second)
		var follower *clusterNode
		for _, nd := range c.nodes {
			if nd != lead {
				follower = nd
			}
		}
		start := time.Now()
		r, err := c.client(follower).Do("POST", "/query", map[string]any{"query": claim, "params": []any{"w"}}, h)
		if err != nil {
			t.Fatal(err)
		}
		took := time.Since(start)
		named := r.Header.Get("Fenec-Leader")
		if r.Status == 200 && c.leads(follower.url()) {
			t.Logf("a claim (%v) on %s: 200, for it was elected meanwhile; again", h, follower.id)
			return false
		}
		if r.Code() == "no_leader" {
			t.Logf("a claim (%v) on %s: 503 no_leader, an election meanwhile; again", h, follower.id)
			return false
		}
		if r.Status != 403 || r.Code() != "forbidden" {
			t.Fatalf("a claim (%v) on a follower: %d %s; want 403", h, r.Status, r.Body)
		}
		if named != lead.url() && !c.leads(named) {
			t.Logf("a claim (%v) on %s: Fenec-Leader %q while %s led: a leader change; again", h, follower.id, named, lead.id)
			return false
		}
		if !strings.Contains(string(r.Body), named) {
			t.Errorf("a claim (%v) on a follower: %s does not name the leader %s", h, r.Body, named)
		}
		if took > time.Second {
			t.Errorf("the follower's refusal (%v) took %v", h, took)
		}
		return true
	}
	// The tries are bounded in time, not in number, and spaced: a follower
	// names the leader once raft's heartbeat and the log entry holding the
	// leader's URL have reached it, which on a loaded machine takes longer
	// than a few tries back to back (five such once all met 503 no_leader).
	for _, h := range []map[string]string{nil, {"Fenec-Wait": "2000"}} {
		ok := false
		for deadline := time.Now().Add(20 * time.Second); !ok && time.Now().Before(deadline); {
			if ok = refused(h); !ok {
				time.Sleep(100 * time.Millisecond)
			}
		}
		if !ok {
			t.Errorf("a claim (%v) on a follower never named the leader within 20 s", h)
		}
	}
	var follower *clusterNode
	if lead := c.leader(10 * time.Second); lead == c.nodes[0] {
		follower = c.nodes[1]
	} else {
		follower = c.nodes[0]
	}
	fc := c.client(follower)
	r, err := fc.Do("POST", "/query", map[string]any{"query": "get jobs count"}, map[string]string{"Fenec-After": seq})
	if err != nil || r.Status != 200 || !strings.Contains(string(r.Body), `"count":2`) {
		t.Fatalf("a read with Fenec-After %s on a follower: %v %v", seq, err, r)
	}
	r, err = fc.Do("POST", "/query", map[string]any{"query": "get jobs count"}, map[string]string{"Fenec-After": "999999"})
	if err != nil || r.Status != 504 || r.Code() != "behind" {
		t.Fatalf("a read with Fenec-After past the log: %v %v, want 504 behind", err, r)
	}

	// A held claim on an empty line, then the leader hands leadership on.
	// A leader change of its own before the hand-over answers the held
	// claim 403 too; the hand-over is then asked of the next leader.
	c.write("create-empty", "create collection empty (run_at timestamp @sorted, owner text)")
	lead := c.leader(10 * time.Second)
	lc := c.client(lead)
	held := make(chan *apitest.Response, 1)
	go func() {
		r, err := lc.Do("POST", "/query", map[string]any{"query": "set empty {owner: 'w'} where run_at <= now() order run_at limit 1 returning id"}, map[string]string{"Fenec-Wait": "25000"})
		if err != nil {
			t.Error(err)
		}
		held <- r
	}()
	awaitHeld(t, lc, 1)
	began := time.Now()
	for try := 0; ; try++ {
		tr, err := c.client(lead).Do("POST", "/_cluster/leader", map[string]any{}, nil)
		if err == nil && tr.Status == 200 {
			break
		}
		if try == 5 || err != nil || tr.Status != 403 && tr.Code() != "no_leader" {
			t.Fatalf("POST /_cluster/leader: %v %v", err, tr)
		}
		c.last = nil
		lead = c.leader(10 * time.Second)
	}
	select {
	case r := <-held:
		if r == nil || r.Status != 403 && r.Code() != "no_leader" {
			t.Errorf("the held claim of a leader that handed on: %v, want 403 naming the next leader, or 503 no_leader", r)
		}
		t.Logf("held claim answered %v after the transfer began: %d %s", time.Since(began).Round(time.Millisecond), r.Status, r.Body)
	case <-time.After(5 * time.Second):
		t.Fatal("the held claim was not answered within 5 s of the leader's transfer")
	}

	// A claim under a key, answered; the leader SIGKILLed; the same claim
	// on the next leader is answered the same jobs, replayed.
	c.last = nil
	body := map[string]any{"query": claim, "params": []any{"w-key"}}
	first := c.send("claim-1", body, nil)
	lead = c.leader(10 * time.Second)
	lead.p.Kill()
	lead.p = nil
	c.last = nil
	again := c.send("claim-1", body, nil)
	if string(again.Body) != string(first.Body) || again.Header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("the claim retried on the next leader: %d %s (replayed %q), want %s replayed", again.Status, again.Body, again.Header.Get("Idempotent-Replayed"), first.Body)
	}
	// The killed node restarts from its files and rejoins.
	c.start(lead)
	c.converge(20 * time.Second)

	// SIGTERM on the leader hands leadership on before it stops.
	lead = c.leader(10 * time.Second)
	stopped := time.Now()
	if err := lead.p.Stop(30 * time.Second); err != nil {
		t.Fatalf("the leader's SIGTERM: %v\n%s", err, lead.p.Log())
	}
	lead.p = nil
	next := c.leader(15 * time.Second)
	t.Logf("SIGTERM of %s: %s took writes %v after the signal", lead.id, next.id, time.Since(stopped).Round(time.Millisecond))

	// A file that holds writes and no raft directory is refused.
	lone := filepath.Join(t.TempDir(), "lone.db")
	lp, lc1 := start(t, "--file", lone)
	lc1.MustQuery("create collection notes (s text)")
	if err := lp.Stop(30 * time.Second); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(bin, "serve", "--http", "127.0.0.1:0", "--file", lone, "--node-id", "x", "--raft", apitest.FreeAddr(t)).CombinedOutput()
	if err == nil || !strings.Contains(string(out), "holds no raft state") {
		t.Errorf("a node on a lone server's file: %v %s; want a refusal", err, out)
	}
}
