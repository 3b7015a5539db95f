package main

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/fenecdb/fenec/server/httpapi/apitest"
)

// TestClusterReplicaFromSnapshot: a non-voting replica, down while the
// cluster takes FENEC_CLUSTER_WRITES writes (default 600) and snapshots
// and truncates its log, catches up when it restarts from a snapshot (a
// copy of the leader's SQLite file) and the log's tail, and serves reads.
func TestClusterReplicaFromSnapshot(t *testing.T) {
	t.Parallel()
	writes := 600
	if v := os.Getenv("FENEC_CLUSTER_WRITES"); v != "" {
		writes, _ = strconv.Atoi(v)
	}
	// Every write is under a key of its own: more than the default cap.
	// raft looks every 0.5 to 1 s whether a snapshot is due.
	c := newCluster(t, 3, "--raft-snapshot-every", "100", "--raft-snapshot-check", "500ms", "--idempotency-max-keys", "1000000")
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
	t.Parallel()
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
	t.Parallel()
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
