package main

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/fenecdb/fenec/server/httpapi/apitest"
)

// fsyncGroups reads fenec_store_fsyncs_total: the store's groups made
// durable by a sync.
func fsyncGroups(t *testing.T, c *apitest.Client) int {
	t.Helper()
	return counter(t, c, "fenec_store_fsyncs_total")
}

// counter reads an unlabelled counter from /_metrics.
func counter(t *testing.T, c *apitest.Client, name string) int {
	t.Helper()
	r, err := c.Do("GET", "/_metrics", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(r.Body), "\n") {
		if v, ok := strings.CutPrefix(line, name+" "); ok {
			n, err := strconv.ParseFloat(v, 64)
			if err != nil {
				t.Fatalf("%s %q", name, v)
			}
			return int(n)
		}
	}
	t.Fatalf("no %s in /_metrics", name)
	return 0
}

// awaitCounter waits until the counter name reaches at least n.
func awaitCounter(t *testing.T, c *apitest.Client, name string, n int) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); counter(t, c, name) < n; time.Sleep(2 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%s stayed at %d within 10 s, want %d", name, counter(t, c, name), n)
		}
	}
}

// TestPutAndTheClaimItWakesShareOneSync: under --sync always, a put that
// wakes a held claim and the claim's write are made durable by one sync of
// the store (one group), not one each; the claim gets the job.
func TestPutAndTheClaimItWakesShareOneSync(t *testing.T) {
	t.Parallel()
	_, c := start(t, "--file", t.TempDir()+"/share.db", "--sync", "always")
	c.MustQuery(jobsDDL)
	for i := 1; i <= 5; i++ {
		looks := counter(t, c, "fenec_held_looks_total")
		ch := heldQuery(c, "30000", nil, claimOne, "w")
		awaitHeld(t, c, 1)
		// The claim's arrival look: its round done, the put's runs on the
		// put's goroutine (a round under way would leave it to the loop).
		awaitCounter(t, c, "fenec_held_looks_total", looks+1)
		// The round's end, just after its look: a state the server does
		// not show (no metric marks a round's end), given 20 ms.
		time.Sleep(20 * time.Millisecond)
		before := fsyncGroups(t, c)
		c.MustQuery("put jobs {run_at: now(), attempts: 0}")
		r := answerOf(t, ch, 5*time.Second)
		if want := `[{"id":` + strconv.Itoa(i) + `,"owner":"w"}]` + "\n"; r.Status != 200 || string(r.Body) != want {
			t.Fatalf("claim %d: %d %s", i, r.Status, r.Body)
		}
		awaitHeld(t, c, 0)
		// The metric counts just after the answers: waited for, then a
		// little longer for a second sync, had there been one (there is
		// no event to wait for when nothing should happen).
		awaitCounter(t, c, "fenec_store_fsyncs_total", before+1)
		time.Sleep(20 * time.Millisecond)
		if n := fsyncGroups(t, c) - before; n != 1 {
			t.Fatalf("put %d and the claim it woke took %d syncs of the store, want 1", i, n)
		}
	}
}

// TestKillAfterWokenClaimKeepsIt: under --sync always, a held claim is
// answered with the job a put woke it for only once both writes are on
// disk: the process killed right after the claim's answer holds, once
// restarted, the job, claimed by that worker.
func TestKillAfterWokenClaimKeepsIt(t *testing.T) {
	t.Parallel()
	file := t.TempDir() + "/kill.db"
	p, c := start(t, "--file", file, "--sync", "always")
	c.MustQuery(jobsDDL)
	var answered []int64
	for i := 0; i < 10; i++ {
		looks := counter(t, c, "fenec_held_looks_total")
		ch := heldQuery(c, "30000", nil, claimOne, "w")
		awaitHeld(t, c, 1)
		// Woken by the put, not found by its arrival's look.
		awaitCounter(t, c, "fenec_held_looks_total", looks+1)
		c.MustQuery("put jobs {run_at: now(), attempts: 0}")
		r := answerOf(t, ch, 5*time.Second)
		var rows []struct{ ID int64 }
		if err := json.Unmarshal(r.Body, &rows); r.Status != 200 || err != nil || len(rows) != 1 {
			t.Fatalf("claim %d: %d %s", i, r.Status, r.Body)
		}
		answered = append(answered, rows[0].ID)
	}
	// The last: the process dies the moment the claim is answered, before
	// the put's own answer is read.
	looks := counter(t, c, "fenec_held_looks_total")
	ch := heldQuery(c, "30000", nil, claimOne, "last")
	awaitHeld(t, c, 1)
	awaitCounter(t, c, "fenec_held_looks_total", looks+1)
	go func() {
		cl := &apitest.Client{T: &quietT{TB: t}, Base: c.Base}
		cl.Query("put jobs {run_at: now(), attempts: 0}")
	}()
	r := answerOf(t, ch, 5*time.Second)
	p.Kill()
	var last []struct{ ID int64 }
	if err := json.Unmarshal(r.Body, &last); r.Status != 200 || err != nil || len(last) != 1 {
		t.Fatalf("the last claim: %d %s", r.Status, r.Body)
	}

	_, c = start(t, "--file", file, "--sync", "always")
	var rows []struct {
		ID       int64
		Owner    string
		Attempts int
	}
	c.MustQuery("get jobs select id, owner, attempts").JSON(t, &rows)
	byID := map[int64]string{}
	for _, row := range rows {
		if row.Attempts != 1 {
			t.Errorf("job %d: attempts %d after one claim", row.ID, row.Attempts)
		}
		byID[row.ID] = row.Owner
	}
	for _, id := range answered {
		if byID[id] != "w" {
			t.Errorf("job %d was answered to worker w, and after the restart its owner is %q", id, byID[id])
		}
	}
	if byID[last[0].ID] != "last" {
		t.Errorf("job %d was answered to the last claim before the kill, and after the restart its owner is %q", last[0].ID, byID[last[0].ID])
	}
}
