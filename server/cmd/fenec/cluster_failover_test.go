package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fenecdb/fenec/server/cluster/history"
	"github.com/fenecdb/fenec/server/httpapi/apitest"
)

// TestClusterFailover: clients put, claim and ack jobs through the leader
// while it is SIGKILLed (FENEC_CLUSTER_KILLS times, default 1), each time
// restarted to rejoin; each client's operations are recorded as it saw
// them and checked (package history). FENEC_HISTORY names a directory to
// keep the history in. TestClusterFaults (root) adds partitions.
func TestClusterFailover(t *testing.T) {
	t.Parallel()
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
		// The clients' load runs 1 s between kills (the behaviour under
		// test: what the history records; no state to wait for).
		time.Sleep(time.Second)
		lead := c.leader(15 * time.Second)
		killed := time.Now()
		lead.p.Kill()
		lead.p = nil
		next := c.leader(15 * time.Second)
		toLeader = append(toLeader, time.Since(killed))
		t.Logf("kill %d: %s SIGKILLed, %s took writes after %v", k+1, lead.id, next.id, toLeader[k].Round(time.Millisecond))
		c.start(lead)
	}
	time.Sleep(time.Second) // and after the last
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
