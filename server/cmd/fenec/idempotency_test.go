package main

import (
	"encoding/json"
	"fmt"
	"net"
	"net/url"
	"slices"
	"testing"
	"time"
)

// TestClaimRetriedAfterTimeout: a claim sent with an Idempotency-Key whose
// answer the client never read (it gave up waiting) is retried with the
// same key; the retry is answered the jobs the first try took, and takes
// none.
func TestClaimRetriedAfterTimeout(t *testing.T) {
	t.Parallel()
	_, c := start(t, "--file", t.TempDir()+"/f.db")
	c.MustQuery("create collection jobs (n int, run_at timestamp @sorted, owner text, attempts int)")
	for i := range 25 {
		c.MustQuery("put jobs {n: $1, run_at: now(), attempts: 0}", i)
	}
	const claim = `{"query": "set jobs {owner: $1, run_at: now() + 30000, attempts: attempts + 1} where run_at <= now() order run_at limit 10 returning id", "params": ["w1:1"]}`

	// The first try: sent on a raw connection that is closed unread, as a
	// client whose timeout fired would.
	u, _ := url.Parse(c.Base)
	conn, err := net.Dial("tcp", u.Host)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(conn, "POST /query HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nIdempotency-Key: claim-1\r\nContent-Length: %d\r\n\r\n%s", u.Host, len(claim), claim)
	var first []int64
	for deadline := time.Now().Add(10 * time.Second); len(first) == 0; {
		if time.Now().After(deadline) {
			t.Fatal("the first try took no job in 10 s")
		}
		first = ids(t, c.MustQuery(`get jobs select id where owner = "w1:1"`).Body)
		time.Sleep(5 * time.Millisecond)
	}
	conn.Close()

	retry, err := c.Do("POST", "/query", claim, map[string]string{"Idempotency-Key": "claim-1"})
	if err != nil {
		t.Fatal(err)
	}
	if retry.Status != 200 || retry.Header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("retry: %d %v %s", retry.Status, retry.Header, retry.Body)
	}
	if got := ids(t, retry.Body); !slices.Equal(got, first) {
		t.Errorf("the retry was answered %v, the first try took %v", got, first)
	}
	if n := ids(t, c.MustQuery(`get jobs select id where owner = "w1:1"`).Body); len(n) != 10 {
		t.Errorf("w1:1 holds %d jobs after the retry, want 10", len(n))
	}
	var ready []struct{ Count int }
	if err := json.Unmarshal(c.MustQuery("get jobs where run_at <= now() count").Body, &ready); err != nil {
		t.Fatal(err)
	}
	if ready[0].Count != 15 {
		t.Errorf("%d jobs still ready after the retry, want 15", ready[0].Count)
	}
}

func ids(t *testing.T, body []byte) []int64 {
	t.Helper()
	var rows []struct{ ID int64 }
	if err := json.Unmarshal(body, &rows); err != nil {
		t.Fatalf("%s: %v", body, err)
	}
	out := make([]int64, len(rows))
	for i, r := range rows {
		out[i] = r.ID
	}
	slices.Sort(out)
	return out
}
