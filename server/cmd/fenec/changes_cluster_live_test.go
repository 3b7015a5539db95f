package main

import (
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// TestLiveQueryLeaderShowsOnlyCommitted: on a cluster's leader whose
// followers are stopped (SIGSTOP), a write is in the leader's memory (its
// reads see it) but the log cannot commit it: a live query on the leader
// sends no event of it. Once the followers go on, the write commits (or,
// if the leader lost its term meanwhile, is refused) and the live query
// sends its insert only if it was committed.
func TestLiveQueryLeaderShowsOnlyCommitted(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("a cluster of three processes")
	}
	c := newCluster(t, 3)
	c.write("create-q", "create collection q (n int)")
	lead := c.last
	c.converge(20 * time.Second)
	live := openSSE(t, c.client(lead), "GET", "/q/changes", "", nil, false)
	live.wait(1, false) // the first rows: none

	var stopped []*clusterNode
	for _, nd := range c.nodes {
		if nd != lead {
			nd.paused.Store(true)
			if err := nd.p.Cmd.Process.Signal(syscall.SIGSTOP); err != nil {
				t.Fatal(err)
			}
			p := nd.p
			t.Cleanup(func() { _ = p.Cmd.Process.Signal(syscall.SIGCONT) })
			stopped = append(stopped, nd)
		}
	}
	var wg sync.WaitGroup
	var status int
	wg.Add(1)
	go func() {
		defer wg.Done()
		r, err := c.client(lead).Do("POST", "/query", map[string]any{"query": "put q {n: 7}"}, nil)
		if err == nil {
			status = r.Status
		}
	}()
	// The leader's memory has it (its reads see a write it proposed)...
	deadline := time.Now().Add(10 * time.Second)
	for {
		r, err := c.client(lead).Do("POST", "/query", map[string]any{"query": "get q where n = 7 count"}, nil)
		if err == nil && r.Status == 200 && strings.Contains(string(r.Body), `"count":1`) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the leader's memory never held the write")
		}
		time.Sleep(10 * time.Millisecond)
	}
	// ...and the live query, told at the same moment the read saw it,
	// would have its event at once were it sent uncommitted: within these
	// 150 ms (no event to wait for when nothing should happen).
	time.Sleep(150 * time.Millisecond)
	live.mu.Lock()
	for _, e := range live.events {
		if e.Name == "insert" {
			t.Errorf("a write the log has not committed was sent: %s", e.text())
		}
	}
	live.mu.Unlock()

	for _, nd := range stopped {
		if err := nd.p.Cmd.Process.Signal(syscall.SIGCONT); err != nil {
			t.Fatal(err)
		}
		nd.paused.Store(false)
	}
	wg.Wait()
	if status == 200 {
		evs := live.wait(2, false)
		if evs[1].Name != "insert" || !strings.Contains(evs[1].Data, `"n":7`) {
			t.Fatalf("after the commit: %+v", evs[1:])
		}
	} else {
		t.Logf("the write was refused (%d): the leader lost its term while its followers were stopped", status)
	}
}
