package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fenecdb/fenec/server/httpapi/apitest"
)

// BenchmarkWriteToEvent times, over HTTP against a real `fenec serve
// --sync always`, a put to the moment each live query watching its
// collection has read its event: with 1, 100 and 1 000 live queries on the
// same query, and 1 000 on as many different queries (one of which the
// put matches). One put at a time, b.N puts; it reports the p50 and p99
// over every subscriber's delivery (event-p50-ms, event-p99-ms) and the
// put's own answer (put-p50-ms).
//
//	cd server && go test ./cmd/fenec -run '^$' -bench BenchmarkWriteToEvent -benchtime 100x
func BenchmarkWriteToEvent(b *testing.B) {
	for _, tc := range []struct {
		name string
		subs int
		same bool
	}{{"same-1", 1, true}, {"same-100", 100, true}, {"same-1000", 1000, true}, {"different-1000", 1000, false}} {
		b.Run(tc.name, func(b *testing.B) { benchWriteToEvent(b, tc.subs, tc.same) })
	}
}

func benchWriteToEvent(b *testing.B, subs int, same bool) {
	p := apitest.Start(b, bin, "--file", b.TempDir()+"/ev.db", "--max-conns", "5000")
	c := &apitest.Client{T: b, Base: p.URL}
	c.MustQuery(`create collection msgs (room int, text text)`)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	tr := &http.Transport{MaxConnsPerHost: 0, MaxIdleConnsPerHost: subs + 4}
	client := &http.Client{Transport: tr}
	// Each subscriber reports the time its n-th event came.
	type got struct {
		n  int
		at time.Time
	}
	arrivals := make(chan got, subs*4)
	var ready sync.WaitGroup
	for i := range subs {
		room := 0
		if !same {
			room = i
		}
		ready.Add(1)
		go func() {
			body := fmt.Sprintf(`{"query": "get msgs where room = %d select text"}`, room)
			req, _ := http.NewRequestWithContext(ctx, "POST", p.URL+"/query", strings.NewReader(body))
			req.Header.Set("Accept", "text/event-stream")
			resp, err := client.Do(req)
			if err != nil {
				ready.Done()
				return
			}
			defer resp.Body.Close()
			sc := bufio.NewScanner(resp.Body)
			first := true
			for sc.Scan() {
				line := sc.Text()
				if !strings.HasPrefix(line, "data: ") {
					continue
				}
				if first {
					first = false
					ready.Done()
					continue
				}
				// The put's n is its text.
				at := time.Now()
				i := strings.Index(line, `"text":"`)
				n, _ := strconv.Atoi(line[i+8 : i+8+strings.IndexByte(line[i+8:], '"')])
				arrivals <- got{n, at}
			}
		}()
	}
	ready.Wait()
	var event, put []time.Duration
	b.ResetTimer()
	for n := range b.N {
		body := fmt.Sprintf(`{"query": "put msgs {room: 0, text: \"%d\"}"}`, n)
		start := time.Now()
		resp, err := client.Post(p.URL+"/query", "application/json", bytes.NewReader([]byte(body)))
		if err != nil {
			b.Fatal(err)
		}
		resp.Body.Close()
		put = append(put, time.Since(start))
		want := subs
		if !same {
			want = 1
		}
		timeout := time.After(30 * time.Second)
		for k := 0; k < want; k++ {
			select {
			case g := <-arrivals:
				if g.n != n {
					b.Fatalf("event of put %d during put %d", g.n, n)
				}
				event = append(event, g.at.Sub(start))
			case <-timeout:
				b.Fatalf("put %d: %d of %d events in 30 s", n, k, want)
			}
		}
	}
	b.StopTimer()
	pct := func(ds []time.Duration, q float64) float64 {
		slices.Sort(ds)
		return float64(ds[int(q*float64(len(ds)-1))].Microseconds()) / 1000
	}
	b.ReportMetric(pct(event, 0.5), "event-p50-ms")
	b.ReportMetric(pct(event, 0.99), "event-p99-ms")
	b.ReportMetric(pct(put, 0.5), "put-p50-ms")
	cancel()
}
