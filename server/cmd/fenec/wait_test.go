package main

import (
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/fenecdb/fenec/server/httpapi/apitest"
)

const (
	jobsDDL  = "create collection jobs (payload json, run_at timestamp @sorted, owner text, attempts int)"
	claimOne = "set jobs {owner: $1, run_at: now() + 30000, attempts: attempts + 1} where run_at <= now() order run_at limit 1 returning id, owner"
)

// heldQuery sends a query with Fenec-Wait in the background; the answer
// comes on the channel.
func heldQuery(c *apitest.Client, wait string, header map[string]string, query string, params ...any) <-chan *apitest.Response {
	out := make(chan *apitest.Response, 1)
	h := map[string]string{"Fenec-Wait": wait}
	for k, v := range header {
		h[k] = v
	}
	if params == nil {
		params = []any{}
	}
	go func() {
		r, err := c.Do("POST", "/query", map[string]any{"query": query, "params": params}, h)
		if err != nil {
			c.T.Errorf("held query: %v", err)
			r = &apitest.Response{}
		}
		out <- r
	}()
	return out
}

// heldNow reads fenec_held_claims from /_metrics.
func heldNow(t *testing.T, c *apitest.Client) int {
	r, err := c.Do("GET", "/_metrics", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(r.Body), "\n") {
		if v, ok := strings.CutPrefix(line, "fenec_held_claims "); ok {
			var n float64
			json.Unmarshal([]byte(v), &n)
			return int(n)
		}
	}
	return -1
}

func awaitHeld(t *testing.T, c *apitest.Client, n int) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); heldNow(t, c) != n; time.Sleep(2 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the server holds %d claims, want %d", heldNow(t, c), n)
		}
	}
}

func answerOf(t *testing.T, ch <-chan *apitest.Response, within time.Duration) *apitest.Response {
	t.Helper()
	select {
	case r := <-ch:
		return r
	case <-time.After(within):
		t.Fatalf("no answer within %v", within)
	}
	return nil
}

func TestHeldClaimGetsAPutJob(t *testing.T) {
	t.Parallel()
	// Woken by the put: nothing else answers the claim before its wait
	// ends, so its answer is held against that end (not a latency bound a
	// loaded machine exceeds; BenchmarkPutToHeld measures the latency).
	const wait = 5 * time.Second
	_, c := start(t, "--file", ":memory:")
	c.MustQuery(jobsDDL)
	sent := time.Now()
	ch := heldQuery(c, strconv.Itoa(int(wait.Milliseconds())), nil, claimOne, "w1")
	awaitHeld(t, c, 1)
	// Its arrival's look found nothing: the put wakes it.
	awaitCounter(t, c, "fenec_held_looks_total", 1)
	put := time.Now()
	c.MustQuery("put jobs {run_at: now(), attempts: 0}")
	r := answerOf(t, ch, wait+5*time.Second)
	if held := time.Since(sent); held >= wait {
		t.Errorf("answered %v after it was sent, at the end of its %v wait: the put did not wake it", held, wait)
	}
	t.Logf("answered %v after the put", time.Since(put))
	if r.Status != 200 || string(r.Body) != "[{\"id\":1,\"owner\":\"w1\"}]\n" {
		t.Fatalf("%d %s", r.Status, r.Body)
	}
}

func TestClockMovesWakeDueClaims(t *testing.T) {
	t.Parallel()
	_, c := start(t, "--file", ":memory:", "--clock", "manual")
	c.MustQuery(jobsDDL)
	c.MustQuery("put jobs [{run_at: now() + 1000, attempts: 0}, {run_at: now() + 5000, attempts: 0}]")
	first := heldQuery(c, "30000", nil, claimOne, "a")
	awaitHeld(t, c, 1)
	second := heldQuery(c, "30000", nil, claimOne, "b")
	awaitHeld(t, c, 2)
	move := func(ms int) {
		if r, err := c.Do("POST", "/_clock", map[string]any{"advance_ms": ms}, nil); err != nil || r.Status != 200 {
			t.Fatalf("clock: %v %v", err, r)
		}
	}
	move(999)
	// Neither claim comes due yet: one woken by mistake would be answered
	// within these 30 ms (no event to wait for when nothing should happen).
	time.Sleep(30 * time.Millisecond)
	awaitHeld(t, c, 2)
	move(1)
	if r := answerOf(t, first, 2*time.Second); string(r.Body) != "[{\"id\":1,\"owner\":\"a\"}]\n" {
		t.Fatalf("first: %s", r.Body)
	}
	awaitHeld(t, c, 1)
	move(4000)
	if r := answerOf(t, second, 2*time.Second); string(r.Body) != "[{\"id\":2,\"owner\":\"b\"}]\n" {
		t.Fatalf("second: %s", r.Body)
	}
}

func TestHeldRefusalsAndEmptyAnswers(t *testing.T) {
	t.Parallel()
	_, c := start(t, "--file", ":memory:")
	c.MustQuery(jobsDDL)
	for _, tc := range []struct {
		query, wait, msg string
	}{
		{"put jobs {attempts: 0}", "1000", "writes every time"},
		{"create collection x (a int)", "1000", "writes every time"},
		{"set jobs {owner: 'w'} where bucket(now(), 60000) = run_at limit 1", "1000", "reads the time only"},
		{"set jobs {owner: 'w'} where run_at + 1000 <= now() limit 1", "1000", "reads the time only"},
		{claimOne, "30001", "Fenec-Wait must be"},
		{claimOne, "soon", "Fenec-Wait must be"},
	} {
		r := answerOf(t, heldQuery(c, tc.wait, nil, tc.query, "w"), 2*time.Second)
		if r.Status != 400 || !strings.Contains(string(r.Body), tc.msg) {
			t.Errorf("%s with Fenec-Wait %s: %d %s", tc.query, tc.wait, r.Status, r.Body)
		}
	}
	if n := c.MustQuery("get jobs count"); string(n.Body) != "[{\"count\":0}]\n" {
		t.Fatalf("a refused held put wrote: %s", n.Body)
	}
	start := time.Now()
	r := answerOf(t, heldQuery(c, "200", nil, claimOne, "w"), 2*time.Second)
	if r.Status != 200 || string(r.Body) != "[]\n" || time.Since(start) < 200*time.Millisecond {
		t.Fatalf("end of wait: %d %s after %v", r.Status, r.Body, time.Since(start))
	}
	r = answerOf(t, heldQuery(c, "200", nil, "set jobs {owner: $1} where run_at <= now() order run_at limit 1 require 1", "w"), 2*time.Second)
	if r.Status != 412 || r.Code() != "unmet" {
		t.Fatalf("end of wait with require: %d %s", r.Status, r.Body)
	}
	r = answerOf(t, heldQuery(c, "200", nil, "del jobs where run_at <= now() limit 1"), 2*time.Second)
	if r.Status != 200 || string(r.Body) != "{\"affected\":0}\n" {
		t.Fatalf("end of wait of a del: %d %s", r.Status, r.Body)
	}
}

// TestGoneClientTakesNothing: a held claim whose client went away is
// dropped at once, and the job put after stays ready for the next claim.
func TestGoneClientTakesNothing(t *testing.T) {
	t.Parallel()
	p, c := start(t, "--file", ":memory:")
	c.MustQuery(jobsDDL)
	ctx, cancel := context.WithCancel(context.Background())
	body := strings.NewReader(`{"query": "set jobs {owner: 'gone', run_at: now() + 30000} where run_at <= now() order run_at limit 1 returning id", "params": []}`)
	req, _ := http.NewRequestWithContext(ctx, "POST", p.URL+"/query", body)
	req.Header.Set("Fenec-Wait", "30000")
	done := make(chan struct{})
	go func() {
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
		}
		close(done)
	}()
	awaitHeld(t, c, 1)
	cancel()
	<-done
	awaitHeld(t, c, 0)
	c.MustQuery("put jobs {run_at: now(), attempts: 0}")
	if r := c.MustQuery("get jobs select owner"); string(r.Body) != "[{\"owner\":null}]\n" {
		t.Fatalf("the job: %s", r.Body)
	}
}

// TestSIGTERMAnswersHeldClaims: shutting down answers every held claim at
// once with its empty answer.
func TestSIGTERMAnswersHeldClaims(t *testing.T) {
	t.Parallel()
	p, c := start(t, "--file", ":memory:")
	c.MustQuery(jobsDDL)
	chs := []<-chan *apitest.Response{heldQuery(c, "30000", nil, claimOne, "a"), heldQuery(c, "30000", nil, claimOne, "b")}
	awaitHeld(t, c, 2)
	start := time.Now()
	if err := p.Stop(10 * time.Second); err != nil {
		t.Fatal(err)
	}
	for _, ch := range chs {
		if r := answerOf(t, ch, 5*time.Second); r.Status != 200 || string(r.Body) != "[]\n" {
			t.Errorf("held claim at shutdown: %d %s", r.Status, r.Body)
		}
	}
	if took := time.Since(start); took > 2*time.Second {
		t.Errorf("shutting down with held claims took %v", took)
	}
}

// TestHeldClaimIdempotency: a held claim that took a job, retried with its
// key, is answered the same job and takes no other.
func TestHeldClaimIdempotency(t *testing.T) {
	t.Parallel()
	_, c := start(t, "--file", ":memory:")
	c.MustQuery(jobsDDL)
	key := map[string]string{"Idempotency-Key": "claim-1"}
	ch := heldQuery(c, "30000", key, claimOne, "w1")
	awaitHeld(t, c, 1)
	c.MustQuery("put jobs [{run_at: now(), attempts: 0}, {run_at: now(), attempts: 0}]")
	first := answerOf(t, ch, 2*time.Second)
	again := answerOf(t, heldQuery(c, "30000", key, claimOne, "w1"), 2*time.Second)
	if string(first.Body) != "[{\"id\":1,\"owner\":\"w1\"}]\n" || string(again.Body) != string(first.Body) || again.Header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("first %s, retry %s (%v)", first.Body, again.Body, again.Header)
	}
	if r := c.MustQuery("get jobs select id where owner is null"); string(r.Body) != "[{\"id\":2}]\n" {
		t.Fatalf("the retry took a job: %s", r.Body)
	}
}

// TestHeldBatch: a /batch holding a claim beside a read is held as one,
// and answered with every statement's answer once the claim takes.
func TestHeldBatch(t *testing.T) {
	t.Parallel()
	_, c := start(t, "--file", ":memory:")
	c.MustQuery(jobsDDL)
	out := make(chan *apitest.Response, 1)
	go func() {
		r, err := c.Do("POST", "/batch", map[string]any{"statements": []map[string]any{
			{"query": "get jobs count", "params": []any{}},
			{"query": claimOne, "params": []any{"w1"}},
		}}, map[string]string{"Fenec-Wait": "30000"})
		if err != nil {
			t.Error(err)
		}
		out <- r
	}()
	awaitHeld(t, c, 1)
	c.MustQuery("put jobs {run_at: now(), attempts: 0}")
	r := answerOf(t, out, 2*time.Second)
	if r.Status != 200 || string(r.Body) != "{\"results\":[[{\"count\":1}],[{\"id\":1,\"owner\":\"w1\"}]]}\n" {
		t.Fatalf("%d %s", r.Status, r.Body)
	}
}
