package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/fenecdb/fenec/server/fenecql"
	"github.com/fenecdb/fenec/server/internal/testwait"
)

// TestStatementTimeoutAnswer: a request whose statements run past
// --statement-timeout (a read's: --read-timeout) is answered 503
// statement_timeout, naming the flag, and writes nothing; a held claim's
// waiting is not counted against it.
func TestStatementTimeoutAnswer(t *testing.T) {
	ts := newTestServer(t, ":memory:", func(c *Config) {
		c.StatementTimeout, c.ReadTimeout = 5*time.Millisecond, 5*time.Millisecond
	})
	ctx := context.Background()
	fillBig(t, ts)
	seq := ts.db.Seq()
	heavy := `where (n * 7 + 3) % 11 <> -1 and s <> "y" and coalesce(n, 0) >= 0`
	for _, q := range []string{`get big ` + heavy + ` count`, `set big {s: "y"} ` + heavy, `del big ` + heavy} {
		r, err := ts.c.Query(q)
		if err != nil {
			t.Fatal(err)
		}
		var e struct{ Error, Code string }
		r.JSON(t, &e)
		flag := "--statement-timeout"
		if strings.HasPrefix(q, "get") {
			flag = "--read-timeout"
		}
		if r.Status != 503 || e.Code != "statement_timeout" || !strings.Contains(e.Error, flag) {
			t.Errorf("%s: %d %s", q, r.Status, r.Body)
		}
	}
	if ts.db.Seq() != seq {
		t.Fatal("a stopped statement wrote")
	}
	// A held claim waits past the limit and is answered, not stopped.
	if _, err := ts.db.Exec(ctx, `create collection jobs (run_at timestamp @sorted, owner text)`, nil); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	r, err := ts.c.Do("POST", "/query", map[string]any{"query": `set jobs {owner: "w"} where run_at <= now() order run_at limit 1 returning id`, "params": []any{}}, map[string]string{"Fenec-Wait": "200"})
	if err != nil {
		t.Fatal(err)
	}
	if r.Status != 200 || strings.TrimSpace(string(r.Body)) != `[]` || time.Since(start) < 200*time.Millisecond {
		t.Fatalf("held claim: %d %s after %v", r.Status, r.Body, time.Since(start))
	}
}

// TestClientGoneStopsStatement: a client that hangs up mid-statement stops
// it — the server neither finishes nor commits the write.
func TestClientGoneStopsStatement(t *testing.T) {
	ts := newTestServer(t, ":memory:", nil)
	ctx := context.Background()
	fillBig(t, ts)
	q := `set big {s: "y"} where (n * 7 + 3) % 11 <> -1 and s <> "y" and coalesce(n, 0) >= 0`
	// How long the set takes, undone by a require.
	start := time.Now()
	if _, err := ts.db.Exec(ctx, q+` require 0`, nil); fenecql.CodeOf(err) != fenecql.CodeUnmet {
		t.Fatal(err)
	}
	full := time.Since(start)
	seq := ts.db.Seq()
	cctx, cancel := context.WithTimeout(ctx, full/10)
	defer cancel()
	body, _ := json.Marshal(map[string]any{"query": q})
	req, _ := http.NewRequestWithContext(cctx, "POST", ts.c.Base+"/query", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	if resp, err := http.DefaultClient.Do(req); err == nil {
		resp.Body.Close()
		t.Fatalf("answered %d before the client hung up: the set is too quick to test", resp.StatusCode)
	}
	// Once the set has ended (counted in fenec_statements_total), it has
	// written nothing.
	testwait.Until(t, "the set to end", func() bool {
		return value(scrape(t, ts), "fenec_statements_total", map[string]string{"kind": "write"}) == 1
	})
	if got := ts.db.Seq(); got != seq {
		t.Fatalf("the set ran on after its client went: seq %d -> %d", seq, got)
	}
}

// fillBig makes collection big of 200 000 documents {n, s: "x"}: enough
// that a statement over all of them runs for a while.
func fillBig(t *testing.T, ts *testServer) {
	t.Helper()
	ctx := context.Background()
	if _, err := ts.db.Exec(ctx, `create collection big (n int, s text)`, nil); err != nil {
		t.Fatal(err)
	}
	docs := make([]fenecql.Value, 200_000)
	for i := range docs {
		docs[i] = fenecql.ObjectOf(&fenecql.Object{Keys: []string{"n", "s"}, Vals: []fenecql.Value{fenecql.Int(int64(i)), fenecql.Text("x")}})
	}
	if _, err := ts.db.Exec(ctx, `put big $1`, []fenecql.Value{fenecql.List(docs)}); err != nil {
		t.Fatal(err)
	}
}
