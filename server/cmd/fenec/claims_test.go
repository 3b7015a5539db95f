package main

import (
	"fmt"
	"sync"
	"testing"

	"github.com/fenecdb/fenec/server/httpapi/apitest"
)

// TestClaimsOverHTTP has 8 HTTP clients claim batches of 10 from 2 000
// jobs and ack each one it took: no job may go to two clients, and every
// job is acked exactly once.
func TestClaimsOverHTTP(t *testing.T) {
	t.Parallel()
	const (
		jobs    = 2000
		clients = 8
		batch   = 10
	)
	_, c := start(t, "--file", ":memory:")
	c.MustQuery("create collection jobs (n int, run_at timestamp @sorted, owner text, attempts int)")
	for i := 0; i < jobs; i += 500 {
		docs := make([]any, 500)
		for j := range docs {
			docs[j] = map[string]any{"n": i + j}
		}
		c.MustQuery("put jobs $1", docs)
	}
	c.MustQuery("set jobs {run_at: now(), attempts: 0}")

	took := make([][]int64, clients) // the ids each client claimed
	var wg sync.WaitGroup
	for w := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cl := &apitest.Client{T: t, Base: c.Base}
			owner := fmt.Sprintf("w%d", w)
			for {
				r, err := cl.Query("set jobs {owner: $1, run_at: now() + 60000, attempts: attempts + 1} where run_at <= now() order run_at limit $2 returning id", owner, batch)
				if err != nil || r.Status != 200 {
					t.Errorf("%s's claim: %v %v", owner, err, r)
					return
				}
				var rows []struct{ ID int64 }
				r.JSON(t, &rows)
				if len(rows) == 0 {
					return
				}
				for _, row := range rows {
					took[w] = append(took[w], row.ID)
					a, err := cl.Query("del jobs where id = $1 and owner = $2 require 1", row.ID, owner)
					if err != nil || a.Status != 200 {
						t.Errorf("%s's ack of %d: %v %v", owner, row.ID, err, a)
						return
					}
				}
			}
		}()
	}
	wg.Wait()

	seen := map[int64]int{}
	for w, ids := range took {
		if len(ids) == 0 {
			t.Logf("client w%d took no job", w)
		}
		for _, id := range ids {
			if prev, ok := seen[id]; ok {
				t.Errorf("job %d went to w%d and to w%d", id, prev, w)
			}
			seen[id] = w
		}
	}
	if len(seen) != jobs {
		t.Errorf("%d jobs acked, want %d", len(seen), jobs)
	}
	var left []struct{ Count int }
	c.MustQuery("get jobs count").JSON(t, &left)
	if left[0].Count != 0 {
		t.Errorf("%d jobs left after every ack", left[0].Count)
	}
}
