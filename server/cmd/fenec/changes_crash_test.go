package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/fenecdb/fenec/server/httpapi/apitest"
)

// TestChangeStreamConsumerCrashes: four writers write while a consumer
// reads and acks, and 20 times dies mid-stream — after a read, before its
// ack, or while its read is held — and starts again. In the end every
// committed write was handled, in commit order, none skipped; a change is
// read twice only after an ack that was never sent.
func TestChangeStreamConsumerCrashes(t *testing.T) {
	t.Parallel()
	_, c := start(t, "--file", filepath.Join(t.TempDir(), "crash.db"))
	c.MustQuery(`create collection q (w int, n int)`)

	const writers, perWriter = 4, 100
	var mu sync.Mutex
	var written []int64
	var wg sync.WaitGroup
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := range perWriter {
				r := c.MustQuery(`put q {w: $1, n: $2}`, w, n)
				seq, _ := strconv.ParseInt(r.Header.Get("Fenec-Seq"), 10, 64)
				mu.Lock()
				written = append(written, seq)
				mu.Unlock()
			}
		}()
	}
	writing := make(chan struct{})
	go func() { wg.Wait(); close(writing) }()

	rng := rand.New(rand.NewPCG(1, 2))
	var handled []int64 // the positions of the changes of acked batches, in order
	var acked int64 = -1
	crashes, reads := 0, 0
	deadline := time.Now().Add(60 * time.Second)
	for {
		if time.Now().After(deadline) {
			t.Fatalf("the consumer did not catch up in 60 s: %d handled, %d written", len(handled), len(written))
		}
		crash := crashes < 20 && rng.IntN(2) == 0
		if crash && rng.IntN(2) == 0 {
			// Dies while its read is held: the client goes away.
			ctx, cancel := context.WithTimeout(context.Background(), time.Duration(1+rng.IntN(20))*time.Millisecond)
			req, _ := http.NewRequestWithContext(ctx, "GET", c.Base+"/_changes?consumer=crashy&collection=q&wait=5000&limit=7", nil)
			if resp, err := http.DefaultClient.Do(req); err == nil {
				resp.Body.Close()
			}
			cancel()
			crashes++
			continue
		}
		var b changesBatch
		var r *apitest.Response
		for {
			var err error
			r, err = c.Do("GET", fmt.Sprintf("/_changes?consumer=crashy&collection=q&wait=200&limit=%d", 1+rng.IntN(15)), nil, nil)
			if err != nil {
				t.Fatal(err)
			}
			if r.Status != 409 { // the read of the consumer that died, not yet ended at the server
				break
			}
			time.Sleep(time.Millisecond)
		}
		if r.Status != 200 {
			t.Fatalf("read: %d %s", r.Status, r.Body)
		}
		r.JSON(t, &b)
		reads++
		if acked >= 0 && b.Position != acked {
			t.Fatalf("read from %d, but the last ack was %d", b.Position, acked)
		}
		if crash {
			crashes++ // read, then died before the ack
			continue
		}
		for _, ch := range b.Changes {
			handled = append(handled, ch.Position)
		}
		ack(t, c, "crashy", b.Next)
		acked = b.Next
		select {
		case <-writing:
			if len(b.Changes) == 0 && crashes == 20 {
				mu.Lock()
				defer mu.Unlock()
				slices.Sort(written)
				if !slices.Equal(handled, written) {
					t.Fatalf("handled %d changes %v,\nwritten %d %v", len(handled), handled, len(written), written)
				}
				t.Logf("%d writes handled once each, in order, across %d reads and %d crashes", len(written), reads, crashes)
				return
			}
		default:
		}
	}
}
