package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/fenecdb/fenec/server/httpapi/apitest"
)

// BenchmarkPutToHeld times, over HTTP against a real `fenec serve`, --sync
// always and 250 (FENEC_TEST_BIN picks the binary), a put to the worker
// that holds a claim with Fenec-Wait: from the put's request to the claim's
// answer, one put at a time, b.N puts. It reports the p50 and p99 of that
// (wake-p50-ms, wake-p99-ms) and of the put's own answer, with a claim
// held (put-held-p50-ms) and with none (put-p50-ms, put-p99-ms: what a
// held claim must not cost a put that wakes no one).
//
//	cd server && go test ./cmd/fenec -run '^$' -bench BenchmarkPutToHeld -benchtime 300x
func BenchmarkPutToHeld(b *testing.B) {
	for _, sync := range []string{"always", "250"} {
		b.Run("sync="+sync, func(b *testing.B) { benchPutToHeld(b, sync) })
	}
}

func benchPutToHeld(b *testing.B, sync string) {
	p := apitest.Start(b, bin, "--file", b.TempDir()+"/wake.db", "--sync", sync)
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 4}}
	query := func(q string, wait string, params ...any) ([]map[string]any, error) {
		if params == nil {
			params = []any{}
		}
		body, _ := json.Marshal(map[string]any{"query": q, "params": params})
		req, _ := http.NewRequest("POST", p.URL+"/query", bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		if wait != "" {
			req.Header.Set("Fenec-Wait", wait)
		}
		r, err := client.Do(req)
		if err != nil {
			return nil, err
		}
		defer r.Body.Close()
		out, _ := io.ReadAll(r.Body)
		if r.StatusCode != 200 {
			return nil, fmt.Errorf("%d %s", r.StatusCode, out)
		}
		var rows []map[string]any
		json.Unmarshal(out, &rows)
		return rows, nil
	}
	must := func(q string, wait string, params ...any) []map[string]any {
		rows, err := query(q, wait, params...)
		if err != nil {
			b.Fatalf("%s: %v", q, err)
		}
		return rows
	}
	must(jobsDDL, "")
	const put = "put jobs {run_at: now(), attempts: 0}"
	pause := func() { time.Sleep(2*time.Millisecond + rand.N(3*time.Millisecond)) }

	// The put alone, no claim held: each job put and deleted.
	var alone []time.Duration
	for i := 0; i < b.N; i++ {
		pause()
		start := time.Now()
		must(put, "")
		alone = append(alone, time.Since(start))
		must("del jobs limit 10", "")
	}

	got := make(chan time.Time, 1)
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-stop:
				return
			default:
			}
			rows, err := query(claimOne, "30000", "w")
			if err != nil || len(rows) == 0 {
				continue
			}
			got <- time.Now()
			query("del jobs where id = $1 require 1", "", rows[0]["id"])
		}
	}()
	time.Sleep(50 * time.Millisecond)
	var wake, withHeld []time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		pause()
		start := time.Now()
		must(put, "")
		withHeld = append(withHeld, time.Since(start))
		wake = append(wake, (<-got).Sub(start))
	}
	b.StopTimer()
	close(stop)
	must(put, "") // the worker's last claim takes it and goes
	<-done
	ms := func(d []time.Duration, q float64) float64 {
		slices.Sort(d)
		return float64(d[min(len(d)-1, int(q*float64(len(d))))]) / 1e6
	}
	b.ReportMetric(ms(wake, 0.5), "wake-p50-ms")
	b.ReportMetric(ms(wake, 0.99), "wake-p99-ms")
	b.ReportMetric(ms(withHeld, 0.5), "put-held-p50-ms")
	b.ReportMetric(ms(alone, 0.5), "put-p50-ms")
	b.ReportMetric(ms(alone, 0.99), "put-p99-ms")
}
