package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/fenecdb/fenec/server/cluster/history"
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
	time.Sleep(300 * time.Millisecond)
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

// TestClusterFailover: clients put, claim and ack jobs through the leader
// while it is SIGKILLed (FENEC_CLUSTER_KILLS times, default 1), each time
// restarted to rejoin; each client's operations are recorded as it saw
// them and checked (package history). FENEC_HISTORY names a directory to
// keep the history in. TestClusterFaults (root) adds partitions.
func TestClusterFailover(t *testing.T) {
	kills := 1
	if v := os.Getenv("FENEC_CLUSTER_KILLS"); v != "" {
		kills, _ = strconv.Atoi(v)
	}
	const clients = 16
	c := newCluster(t, 3)
	lead := c.leader(10 * time.Second)
	c.client(lead).MustQuery("create collection jobs (n int, run_at timestamp @sorted, owner text, attempts int)")

	load := startLoad(c, clients)
	var toLeader []time.Duration
	for k := 0; k < kills; k++ {
		time.Sleep(1500 * time.Millisecond)
		lead := c.leader(15 * time.Second)
		killed := time.Now()
		lead.p.Kill()
		lead.p = nil
		next := c.leader(15 * time.Second)
		toLeader = append(toLeader, time.Since(killed))
		t.Logf("kill %d: %s SIGKILLed, %s took writes after %v", k+1, lead.id, next.id, toLeader[k].Round(time.Millisecond))
		c.start(lead)
	}
	time.Sleep(1500 * time.Millisecond)
	ops := load.stop()
	c.converge(30 * time.Second)
	ops = checkFinal(t, c, ops)
	sort.Slice(toLeader, func(i, j int) bool { return toLeader[i] < toLeader[j] })
	t.Logf("time to a new leader over %d kills: p50 %v, max %v", kills,
		toLeader[len(toLeader)/2].Round(time.Millisecond), toLeader[len(toLeader)-1].Round(time.Millisecond))
}

// load is clients running runClient until stopped.
type load struct {
	mu      sync.Mutex
	ops     []history.Op
	stopped chan struct{}
	wg      sync.WaitGroup
}

func startLoad(c *testCluster, clients int) *load {
	l := &load{stopped: make(chan struct{})}
	for w := range clients {
		l.wg.Add(1)
		go func() {
			defer l.wg.Done()
			runClient(c, w, l.stopped, l.record)
		}()
	}
	return l
}

func (l *load) record(op history.Op) {
	l.mu.Lock()
	l.ops = append(l.ops, op)
	l.mu.Unlock()
}

func (l *load) stop() []history.Op {
	close(l.stopped)
	l.wg.Wait()
	return l.ops
}

// checkFinal reads the jobs on every node, which must agree, adds the
// final read to the history, keeps it in $FENEC_HISTORY/<test>.jsonl, and
// checks it.
func checkFinal(t *testing.T, c *testCluster, ops []history.Op) []history.Op {
	t.Helper()

	// The final state, read on every node: the same everywhere.
	var finals [][]int64
	for _, nd := range c.nodes {
		r := c.client(nd).MustQuery("get jobs select n order n")
		var rows []struct{ N int64 }
		r.JSON(t, &rows)
		ns := make([]int64, len(rows))
		for i, row := range rows {
			ns[i] = row.N
		}
		finals = append(finals, ns)
	}
	for i := 1; i < len(finals); i++ {
		if fmt.Sprint(finals[i]) != fmt.Sprint(finals[0]) {
			t.Errorf("%s holds %d jobs, %s %d: the nodes disagree", c.nodes[0].id, len(finals[0]), c.nodes[i].id, len(finals[i]))
		}
	}
	ops = append(ops, history.Op{Kind: "final", Result: "ok", Jobs: finals[0]})
	if dir := os.Getenv("FENEC_HISTORY"); dir != "" {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		f, err := os.Create(filepath.Join(dir, t.Name()+".jsonl"))
		if err != nil {
			t.Fatal(err)
		}
		enc := json.NewEncoder(f)
		for _, op := range ops {
			_ = enc.Encode(op)
		}
		if err := f.Close(); err != nil {
			t.Fatal(err)
		}
	}
	counts := map[string]int{}
	for _, op := range ops {
		counts[op.Kind+" "+op.Result]++
	}
	t.Logf("%d operations %v", len(ops), counts)
	if counts["put ok"] == 0 || counts["claim ok"] == 0 || counts["ack ok"] == 0 {
		t.Errorf("the load did too little to check: %v", counts)
	}
	for _, v := range history.Check(ops) {
		t.Error(v)
	}
	return ops
}

// leaseMS is the clients' lease: short, so leases lapse during a run.
const leaseMS = 3000

// runClient puts a job, claims up to 10, and acks each, until stop; every
// write carries an Idempotency-Key and is retried under it on the next
// node when its outcome is unknown.
func runClient(c *testCluster, w int, stop <-chan struct{}, record func(history.Op)) {
	cur := c.nodes[w%len(c.nodes)].url()
	hc := &http.Client{Timeout: 5 * time.Second, Transport: noProxy}
	// send returns the final status and body, and whether an earlier try's
	// outcome was unknown.
	send := func(query string, params []any, key string) (int, []byte, bool) {
		uncertain := false
		body, _ := json.Marshal(map[string]any{"query": query, "params": params})
		deadline := time.Now().Add(20 * time.Second)
		for try := 0; try < 200 && time.Now().Before(deadline); try++ {
			cl := &apitest.Client{T: c.t, Base: cur, HTTP: hc, Token: c.token}
			r, err := cl.Do("POST", "/query", body, map[string]string{"Idempotency-Key": key})
			switch {
			case err == nil && r.Code() == "no_leader":
				// Refused unrun: no leader known, or one just elected.
				cur = c.nodes[(try+w)%len(c.nodes)].url()
				time.Sleep(20 * time.Millisecond)
			case err != nil || r.Status == 503:
				// The node is down, or the write's outcome is unknown: the
				// next node, the same key.
				if err == nil || !strings.Contains(err.Error(), "connection refused") {
					uncertain = true
				}
				cur = c.nodes[(try+w)%len(c.nodes)].url()
				time.Sleep(20 * time.Millisecond)
			case r.Status == 403 && r.Header.Get("Fenec-Leader") != "":
				cur = r.Header.Get("Fenec-Leader")
			case r.Status == 403:
				cur = c.nodes[(try+w)%len(c.nodes)].url()
				time.Sleep(20 * time.Millisecond)
			default:
				return r.Status, r.Body, uncertain
			}
		}
		return 0, nil, uncertain
	}
	result := func(status int, uncertain bool) string {
		switch {
		case status == 200:
			return "ok"
		case status == 0 && uncertain:
			return "info"
		}
		return "fail"
	}
	for op := 0; op < 100000; op++ {
		select {
		case <-stop:
			return
		default:
		}
		n := int64(w)*1_000_000 + int64(op)
		start := time.Now().UnixNano()
		st, b, unc := send("put jobs {n: $1, run_at: now(), attempts: 0}", []any{n}, fmt.Sprintf("put-%d", n))
		if st != 200 && st != 0 {
			c.t.Errorf("client %d put: %d %s", w, st, b)
			return
		}
		record(history.Op{Client: w, Kind: "put", Result: result(st, unc), Jobs: []int64{n}, Invoke: start, Done: time.Now().UnixNano()})

		owner := fmt.Sprintf("c%d-%d", w, op)
		start = time.Now().UnixNano()
		st, b, unc = send("set jobs {owner: $1, run_at: now() + $2, attempts: attempts + 1} where run_at <= now() order run_at limit 10 returning id, n, run_at",
			[]any{owner, leaseMS}, "claim-"+owner)
		claim := history.Op{Client: w, Kind: "claim", Result: result(st, unc), Owner: owner, Invoke: start, Done: time.Now().UnixNano()}
		var rows []struct {
			ID    int64
			N     int64
			RunAt string `json:"run_at"`
		}
		if st == 200 {
			if err := json.Unmarshal(b, &rows); err != nil {
				c.t.Errorf("client %d claim: %v %s", w, err, b)
				return
			}
			for _, row := range rows {
				end, err := time.Parse(time.RFC3339Nano, row.RunAt)
				if err != nil {
					c.t.Errorf("client %d claim: run_at %q: %v", w, row.RunAt, err)
					return
				}
				claim.Jobs = append(claim.Jobs, row.N)
				claim.Leases = append(claim.Leases, [2]int64{end.UnixMilli() - leaseMS, end.UnixMilli()})
			}
		} else if st != 0 {
			c.t.Errorf("client %d claim: %d %s", w, st, b)
			return
		}
		record(claim)
		for _, row := range rows {
			start = time.Now().UnixNano()
			st, b, unc = send("del jobs where id = $1 and owner = $2 require 1", []any{row.ID, owner}, fmt.Sprintf("ack-%s-%d", owner, row.ID))
			if st != 200 && st != 412 && st != 0 {
				c.t.Errorf("client %d ack: %d %s", w, st, b)
				return
			}
			record(history.Op{Client: w, Kind: "ack", Result: result(st, unc), Owner: owner, Jobs: []int64{row.N}, Invoke: start, Done: time.Now().UnixNano()})
		}
	}
}

// TestClusterReplicaFromSnapshot: a non-voting replica, down while the
// cluster takes FENEC_CLUSTER_WRITES writes (default 600) and snapshots
// and truncates its log, catches up when it restarts from a snapshot (a
// copy of the leader's SQLite file) and the log's tail, and serves reads.
func TestClusterReplicaFromSnapshot(t *testing.T) {
	writes := 600
	if v := os.Getenv("FENEC_CLUSTER_WRITES"); v != "" {
		writes, _ = strconv.Atoi(v)
	}
	// Every write is under a key of its own: more than the default cap.
	c := newCluster(t, 3, "--raft-snapshot-every", "100", "--idempotency-max-keys", "1000000")
	c.write("create", "create collection notes (n int)")
	lead := c.leader(10 * time.Second)
	replica := &clusterNode{id: "r1", http: apitest.FreeAddr(t), raft: apitest.FreeAddr(t), file: filepath.Join(t.TempDir(), "r1.db")}
	startReplica := func() {
		replica.p = apitest.Start(t, bin, "--http", replica.http, "--file", replica.file, "--node-id", replica.id, "--raft", replica.raft)
	}
	startReplica()
	r, err := c.client(lead).Do("POST", "/_cluster/members", map[string]any{"id": "r1", "raft_address": replica.raft, "voter": false}, nil)
	for try := 0; try < 5 && err == nil && (r.Status == 403 || r.Code() == "no_leader"); try++ {
		// A leader change meanwhile: ask the next leader.
		lead = c.leader(10 * time.Second)
		r, err = c.client(lead).Do("POST", "/_cluster/members", map[string]any{"id": "r1", "raft_address": replica.raft, "voter": false}, nil)
	}
	if err != nil || r.Status != 200 {
		t.Fatalf("adding the replica: %v %v", err, r)
	}
	seq := c.write("first", "put notes {n: -1}")
	rc := c.client(replica)
	if r, err := rc.Do("POST", "/query", map[string]any{"query": "get notes count"}, map[string]string{"Fenec-After": seq}); err != nil || r.Status != 200 {
		t.Fatalf("the replica's first read: %v %v", err, r)
	}
	replica.p.Kill()
	replica.p = nil

	// The writes it misses, from 16 writers, each under its key.
	var wg sync.WaitGroup
	for w := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			wc := &testCluster{t: t, nodes: c.nodes, binOf: c.binOf}
			for i := w; i < writes; i += 16 {
				wc.write(fmt.Sprintf("put-%d", i), "put notes {n: $1}", i)
			}
		}()
	}
	wg.Wait()
	seq = c.write("last", "put notes {n: $1}", writes)
	// raft looks every 5 to 10 s whether a snapshot is due.
	snapshots := func(nd *clusterNode) []string {
		m, _ := filepath.Glob(filepath.Join(nd.file+".raft", "snapshots", "*", "state.bin"))
		return m
	}
	deadline := time.Now().Add(25 * time.Second)
	lead = c.leader(10 * time.Second)
	for len(snapshots(lead)) == 0 && time.Now().Before(deadline) {
		time.Sleep(200 * time.Millisecond)
	}
	if len(snapshots(lead)) == 0 {
		t.Fatalf("the leader took no snapshot in 25 s after %d writes", writes)
	}
	before := len(snapshots(replica))
	caught := time.Now()
	startReplica()
	// The leader retries a node it failed to reach less and less often
	// (raft's back-off, up to some 40 s), so a long-down replica may wait
	// several Fenec-After bounds.
	for deadline := time.Now().Add(90 * time.Second); ; {
		r, err = rc.Do("POST", "/query", map[string]any{"query": "get notes count"}, map[string]string{"Fenec-After": seq})
		if err != nil || r.Status != 504 || time.Now().After(deadline) {
			break
		}
	}
	if err != nil || r.Status != 200 || !strings.Contains(string(r.Body), fmt.Sprintf(`"count":%d`, writes+2)) {
		t.Fatalf("the replica's count after Fenec-After %s: %v %v", seq, err, r)
	}
	t.Logf("the replica, down for %d writes, caught up %v after its restart", writes, time.Since(caught).Round(time.Millisecond))
	if after := len(snapshots(replica)); after <= before {
		t.Errorf("the replica caught up without a snapshot (%d before, %d after): the log was not truncated", before, after)
	}
	// A write on the replica is refused naming the leader. Until the
	// replica hears from the leader again after catching up (a snapshot's
	// install can outlast its heartbeat timeout), it may know none: the
	// refusal is 503 no_leader then, and the client retries shortly.
	lead = c.leader(10 * time.Second)
	w, err := rc.Do("POST", "/query", map[string]any{"query": "put notes {n: 0}"}, nil)
	for deadline := time.Now().Add(5 * time.Second); err == nil && w.Code() == "no_leader" && time.Now().Before(deadline); {
		time.Sleep(100 * time.Millisecond)
		w, err = rc.Do("POST", "/query", map[string]any{"query": "put notes {n: 0}"}, nil)
	}
	if err != nil || w.Status != 403 || w.Header.Get("Fenec-Leader") != lead.url() && !c.leads(w.Header.Get("Fenec-Leader")) {
		t.Errorf("a write on the replica: %v %d %s Fenec-Leader %q, want 403 naming %s", err, w.Status, w.Body, w.Header.Get("Fenec-Leader"), lead.url())
	}
	var st clusterStatus
	r, _ = rc.Do("GET", "/_cluster", nil, nil)
	r.JSON(t, &st)
	for _, m := range st.Members {
		if m.ID == "r1" && m.Voter {
			t.Errorf("the replica is a voter: %+v", st.Members)
		}
	}
}

// TestClusterThroughput measures jobs/s with 16 workers, each claiming 10
// and acking each (every write durable: --sync always), through a 3-node
// cluster's leader and through a lone server on the same machine, and the
// leader's raft log entries per fsync. It runs under make cluster-check
// (FENEC_CLUSTER_BENCH=1); figures in docs/cluster.md.
func TestClusterThroughput(t *testing.T) {
	if os.Getenv("FENEC_CLUSTER_BENCH") == "" {
		t.Skip("a measurement: FENEC_CLUSTER_BENCH=1 (make cluster-check)")
	}
	const (
		workers = 16
		jobs    = 40000
		runFor  = 8 * time.Second
	)
	measure := func(c *apitest.Client) float64 {
		c.MustQuery("create collection jobs (n int, run_at timestamp @sorted, owner text, attempts int)")
		for i := 0; i < jobs; i += 1000 {
			docs := make([]any, 1000)
			for j := range docs {
				docs[j] = map[string]any{"n": i + j, "attempts": 0}
			}
			c.MustQuery("put jobs $1", docs)
		}
		c.MustQuery("set jobs {run_at: now()}")
		var done sync.WaitGroup
		var mu sync.Mutex
		acked := 0
		end := time.Now().Add(runFor)
		start := time.Now()
		for w := range workers {
			done.Add(1)
			go func() {
				defer done.Done()
				cl := &apitest.Client{T: t, Base: c.Base, Token: c.Token, HTTP: &http.Client{Timeout: 10 * time.Second, Transport: noProxy}}
				me := fmt.Sprintf("w%d", w)
				for time.Now().Before(end) {
					r := cl.MustQuery("set jobs {owner: $1, run_at: now() + 30000, attempts: attempts + 1} where run_at <= now() order run_at limit 10 returning id", me)
					var rows []struct{ ID int64 }
					r.JSON(t, &rows)
					if len(rows) == 0 {
						return
					}
					for _, row := range rows {
						cl.MustQuery("del jobs where id = $1 and owner = $2 require 1", row.ID, me)
					}
					mu.Lock()
					acked += len(rows)
					mu.Unlock()
				}
			}()
		}
		done.Wait()
		return float64(acked) / time.Since(start).Seconds()
	}
	// wake measures put → a held worker's answer, each put awaited by one
	// held claim, for at least wakeFor (200 samples at least, 6000 at
	// most): long enough that the store folds the load's writes into its
	// tables meanwhile (docs/cluster.md, Timings), as it does 10 s after
	// them. It answers p50, p99, the worst, and how many samples took over
	// 100 ms.
	const wakeFor = 12 * time.Second
	wake := func(c *apitest.Client) string {
		c.MustQuery("create collection wakes (run_at timestamp @sorted, owner text)")
		var took []time.Duration
		for began := time.Now(); len(took) < 6000 && (len(took) < 200 || time.Since(began) < wakeFor); {
			got := make(chan time.Time, 1)
			go func() {
				r, err := c.Do("POST", "/query", map[string]any{"query": "set wakes {owner: 'w', run_at: now() + 60000} where run_at <= now() order run_at limit 1 returning id"},
					map[string]string{"Fenec-Wait": "10000"})
				if err != nil || r.Status != 200 || len(r.Body) < 4 {
					t.Errorf("the held claim: %v %v", err, r)
				}
				got <- time.Now()
			}()
			for deadline := time.Now().Add(10 * time.Second); heldNow(t, c) < 1 && time.Now().Before(deadline); {
				time.Sleep(time.Millisecond)
			}
			sent := time.Now()
			c.MustQuery("put wakes {run_at: now()}")
			took = append(took, (<-got).Sub(sent))
		}
		sort.Slice(took, func(i, j int) bool { return took[i] < took[j] })
		slow := 0
		for _, d := range took {
			if d > 100*time.Millisecond {
				slow++
			}
		}
		r := func(d time.Duration) time.Duration { return d.Round(10 * time.Microsecond) }
		return fmt.Sprintf("p50 %v p99 %v max %v, %d of %d over 100 ms", r(took[len(took)/2]), r(took[len(took)*99/100]), r(took[len(took)-1]), slow, len(took))
	}
	_, lone := start(t, "--file", filepath.Join(t.TempDir(), "lone.db"), "--sync", "always")
	single := measure(lone)
	loneWake := wake(lone)
	c := newCluster(t, 3, "--sync", "always")
	lead := c.leader(10 * time.Second)
	before := logCounts(t, c.client(lead))
	clustered := measure(c.client(lead))
	after := logCounts(t, c.client(lead))
	clusterWake := wake(c.client(lead))
	perWrite := (after[1] - before[1]) / max(1, after[0]-before[0])
	t.Logf("%d workers, claim 10 + ack each, --sync always: lone server %.0f jobs/s; 3-node cluster %.0f jobs/s; leader's raft log: %.1f entries per fsync",
		workers, single, clustered, perWrite)
	t.Logf("put → held worker: lone server %s; 3-node cluster %s", loneWake, clusterWake)
}

// logCounts returns the node's raft log writes and entries.
func logCounts(t *testing.T, c *apitest.Client) [2]float64 {
	r, err := c.Do("GET", "/_metrics", nil, nil)
	if err != nil || r.Status != 200 {
		t.Fatalf("/_metrics: %v %v", err, r)
	}
	var out [2]float64
	for _, line := range strings.Split(string(r.Body), "\n") {
		for i, name := range []string{"fenec_cluster_log_writes_total ", "fenec_cluster_log_entries_total "} {
			if v, ok := strings.CutPrefix(line, name); ok {
				out[i], _ = strconv.ParseFloat(v, 64)
			}
		}
	}
	return out
}

// followerGauges returns the leader's per-follower gauges in nd's
// /_metrics: name → node → value.
func followerGauges(t *testing.T, c *testCluster, nd *clusterNode) map[string]map[string]float64 {
	t.Helper()
	out := map[string]map[string]float64{}
	r, err := c.client(nd).Do("GET", "/_metrics", nil, nil)
	if err != nil || r.Status != 200 {
		return out
	}
	for _, line := range strings.Split(string(r.Body), "\n") {
		name, rest, ok := strings.Cut(line, `{node="`)
		if !ok || !strings.HasPrefix(name, "fenec_cluster_follower_") {
			continue
		}
		node, v, ok := strings.Cut(rest, `"} `)
		if !ok {
			continue
		}
		f, err := strconv.ParseFloat(v, 64)
		if err != nil {
			t.Errorf("%s: %v", line, err)
			continue
		}
		if out[name] == nil {
			out[name] = map[string]float64{}
		}
		out[name][node] = f
	}
	return out
}

// TestClusterFollowerLag: the leader's fenec_cluster_follower_lag_entries
// of a follower stopped (SIGSTOP) while writes go on grows with the
// writes, /_cluster says the same, and the follower, resumed, falls back
// to 0. It reads whichever node leads at each step: a leader change while
// a follower is stopped is legitimate, and a new leader that has not
// heard from the stopped follower counts all its log as the lag.
func TestClusterFollowerLag(t *testing.T) {
	c := newCluster(t, 3)
	c.write("create", "create collection notes (n int)")
	lead := c.leader(10 * time.Second)
	lagOf := func(id string) (float64, bool) {
		for deadline := time.Now().Add(15 * time.Second); time.Now().Before(deadline); {
			c.last = nil
			g := followerGauges(t, c, c.leader(15*time.Second))
			if v, ok := g["fenec_cluster_follower_lag_entries"][id]; ok {
				return v, true
			}
			time.Sleep(50 * time.Millisecond)
		}
		return 0, false
	}
	settled := func(id string) bool {
		for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); {
			if v, ok := lagOf(id); ok && v == 0 {
				return true
			}
			time.Sleep(100 * time.Millisecond)
		}
		return false
	}
	var stopped, other *clusterNode
	for _, nd := range c.nodes {
		if nd != lead {
			if stopped == nil {
				stopped = nd
			} else {
				other = nd
			}
		}
	}
	for _, nd := range []*clusterNode{stopped, other} {
		if !settled(nd.id) {
			t.Fatalf("%s's lag did not settle to 0 on an idle cluster", nd.id)
		}
	}
	if g := followerGauges(t, c, c.leader(10*time.Second)); len(g["fenec_cluster_follower_match_index"]) != 2 || len(g["fenec_cluster_follower_last_contact_seconds"]) != 2 {
		t.Errorf("the leader's follower gauges: %v, want match index and last contact for both followers", g)
	}
	for _, nd := range []*clusterNode{stopped, other} {
		if st, _ := c.status(nd); st.Role == "follower" && len(followerGauges(t, c, nd)) != 0 {
			t.Errorf("follower %s reports follower gauges: %v", nd.id, followerGauges(t, c, nd))
		}
	}

	stopped.paused.Store(true)
	if err := stopped.p.Cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	p := stopped.p
	t.Cleanup(func() { _ = p.Cmd.Process.Signal(syscall.SIGCONT) })
	var lags []float64
	for round := 0; round < 3; round++ {
		time.Sleep(time.Second) // past raft's heartbeat and election timeouts
		for i := 0; i < 20; i++ {
			c.write(fmt.Sprintf("put-%d-%d", round, i), "put notes {n: $1}", i)
		}
		v, ok := lagOf(stopped.id)
		if !ok {
			t.Fatalf("no lag reported for the stopped %s", stopped.id)
		}
		lags = append(lags, v)
		if round > 0 && v < lags[round-1]+20 {
			t.Errorf("the stopped follower's lag went from %v to %v over 20 writes", lags[round-1], v)
		}
	}
	if lags[0] < 20 {
		t.Errorf("the stopped follower's lag after 20 writes: %v", lags[0])
	}
	// The follower still running answered every write: nothing behind.
	if v, ok := lagOf(other.id); !ok || v > 1 {
		t.Errorf("the running follower %s's lag: %v %v, want 0", other.id, v, ok)
	}
	// /_cluster names the same lag.
	var st struct {
		Members []struct {
			ID            string `json:"id"`
			LagEntries    *int64 `json:"lag_entries"`
			LastContactMS *int64 `json:"last_contact_ms"`
		} `json:"members"`
	}
	c.last = nil
	r, err := c.client(c.leader(10*time.Second)).Do("GET", "/_cluster", nil, nil)
	if err != nil || r.Status != 200 {
		t.Fatalf("/_cluster: %v %v", err, r)
	}
	r.JSON(t, &st)
	for _, m := range st.Members {
		if m.ID == stopped.id && (m.LagEntries == nil || float64(*m.LagEntries) < lags[len(lags)-1]) {
			t.Errorf("/_cluster's lag of the stopped %s: %s, want at least %v", stopped.id, r.Body, lags[len(lags)-1])
		}
	}
	t.Logf("the stopped follower's lag after 20, 40, 60 writes: %v", lags)

	if err := p.Cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	stopped.paused.Store(false)
	resumed := time.Now()
	if !settled(stopped.id) {
		v, _ := lagOf(stopped.id)
		t.Fatalf("the resumed follower's lag stayed %v", v)
	}
	t.Logf("resumed, %s's lag fell to 0 in %v", stopped.id, time.Since(resumed).Round(time.Millisecond))
	g := followerGauges(t, c, c.leader(10*time.Second))
	if s, ok := g["fenec_cluster_follower_last_contact_seconds"][stopped.id]; !ok || s > 2 {
		t.Errorf("the resumed follower's last contact: %v %v, want under 2 s", s, ok)
	}
}
