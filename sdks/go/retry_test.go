package fenecdb_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fenecdb/fenec/sdks/go"
)

// cutter is a loopback proxy in front of a real server that hurts chosen
// requests: "drop" forwards the request, lets the server apply it, reads
// its answer and closes the connection without sending it; "503" answers
// the API's 503 unavailable without forwarding. It records every request's
// statement and Idempotency-Key.
type cutter struct {
	mu    sync.Mutex
	fault func(query string, n int) string // n counts the requests of that query from 1
	seen  []cutRequest
}

type cutRequest struct{ query, key string }

func (c *cutter) requests(query string) []cutRequest {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []cutRequest
	for _, r := range c.seen {
		if r.query == query {
			out = append(out, r)
		}
	}
	return out
}

func cutProxy(t *testing.T, target string, fault func(query string, n int) string) (*cutter, string) {
	c := &cutter{fault: fault}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var q struct{ Query string }
		json.Unmarshal(body, &q)
		c.mu.Lock()
		c.seen = append(c.seen, cutRequest{q.Query, r.Header.Get("Idempotency-Key")})
		n := 0
		for _, s := range c.seen {
			if s.query == q.Query {
				n++
			}
		}
		what := c.fault(q.Query, n)
		c.mu.Unlock()
		if what == "503" {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(503)
			io.WriteString(w, `{"error":"shutting down","code":"unavailable"}`)
			return
		}
		req, _ := http.NewRequestWithContext(r.Context(), r.Method, target+r.URL.RequestURI(), bytes.NewReader(body))
		req.Header = r.Header.Clone()
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Errorf("the proxy's request: %v", err)
			return
		}
		answer, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if what == "drop" {
			conn, _, err := http.NewResponseController(w).Hijack()
			if err != nil {
				t.Errorf("hijack: %v", err)
				return
			}
			conn.Close() // applied at the server; the answer is lost
			return
		}
		for k, v := range resp.Header {
			w.Header()[k] = v
		}
		w.WriteHeader(resp.StatusCode)
		w.Write(answer)
	}))
	t.Cleanup(srv.Close)
	return c, srv.URL
}

// fresh is an HTTP client that opens a connection per request, so that
// net/http never sends a request again itself (it may, on a reused
// connection, for a request with an Idempotency-Key): every retry seen is
// the SDK's.
func fresh() fenecdb.Option {
	return fenecdb.WithHTTPClient(&http.Client{Transport: &http.Transport{DisableKeepAlives: true}})
}

const putOne = "put items {n: 1}"

// TestRetriesApplyAWriteOnce: the server applies a write and the
// connection is cut before its answer: with WithRetries the write is sent
// again under the key the SDK gave it, answered the first answer
// (Replayed), and applied once.
func TestRetriesApplyAWriteOnce(t *testing.T) {
	db, url := server(t)
	mustQuery(t, db, "create collection items (n int)")
	cut, via := cutProxy(t, url, func(q string, n int) string {
		if q == putOne && n == 1 {
			return "drop"
		}
		return ""
	})
	through := connect(t, via, fresh(), fenecdb.WithRetries(2))
	res, err := through.Query(context.Background(), putOne)
	if err != nil {
		t.Fatal(err)
	}
	if !res.Replayed {
		t.Error("the retry was not answered as a replay of the first answer")
	}
	if n, _ := db.From("items").Count(context.Background()); n != 1 {
		t.Fatalf("%d items, want the write applied once", n)
	}
	sent := cut.requests(putOne)
	if len(sent) != 2 || sent[0].key == "" || sent[0].key != sent[1].key || !strings.HasPrefix(sent[0].key, "fenecdb-go-") {
		t.Fatalf("the write was sent as %+v, want twice under one key of the SDK's", sent)
	}
}

// TestNoRetryOfAWriteWithoutAKey: without retries, a write whose answer
// was lost is not sent again, and its error says what was asked, that it
// is not retryable (no key), and with a key of the caller's that it is.
func TestNoRetryOfAWriteWithoutAKey(t *testing.T) {
	db, url := server(t)
	mustQuery(t, db, "create collection items (n int)")
	cut, via := cutProxy(t, url, func(q string, n int) string {
		if strings.HasPrefix(q, "put items") {
			return "drop"
		}
		return ""
	})
	through := connect(t, via, fresh())
	_, err := through.Query(context.Background(), putOne)
	var e *fenecdb.Error
	if !errors.As(err, &e) || e.Code != fenecdb.CodeNetwork {
		t.Fatalf("got %v, want a network error", err)
	}
	if e.Retryable || e.Method != "POST /query" || e.Node != via || e.Statement != putOne || e.IdempotencyKey != "" {
		t.Errorf("the error: %+v; want not retryable, naming POST /query, %s, the statement and no key", e, via)
	}
	if n := len(cut.requests(putOne)); n != 1 {
		t.Errorf("the write was sent %d times, want once", n)
	}
	_, err = through.Query(context.Background(), putOne, fenecdb.IdempotencyKey("k-1"))
	if !errors.As(err, &e) || !e.Retryable || e.IdempotencyKey != "k-1" {
		t.Errorf("with a key: %v (%+v), want retryable under k-1", err, e)
	}
	// With retries, a write whose every try is cut gives up after them,
	// applied once.
	retrying := connect(t, via, fresh(), fenecdb.WithRetries(1))
	if _, err := retrying.Query(context.Background(), "put items {n: 2}"); err == nil {
		t.Fatal("a write cut every time succeeded")
	}
	if n, _ := db.From("items").Where("n", 2).Count(context.Background()); n != 1 {
		t.Errorf("%d items of n 2, want 1", n)
	}
}

// TestRetriesReadsAndUnavailable: a read is sent again without a key, and
// a 503 unavailable is retried; a refusal (400) is not, and its error
// keeps the statement cut to 200 bytes.
func TestRetriesReadsAndUnavailable(t *testing.T) {
	db, url := server(t)
	mustQuery(t, db, "create collection items (n int)")
	mustQuery(t, db, putOne)
	const read = "get items"
	cut, via := cutProxy(t, url, func(q string, n int) string {
		switch {
		case q == read && n == 1:
			return "drop"
		case q == "put items {n: 3}" && n <= 2:
			return "503"
		}
		return ""
	})
	through := connect(t, via, fresh(), fenecdb.WithRetries(3))
	res, err := through.Query(context.Background(), read)
	if err != nil || len(res.Rows) != 1 {
		t.Fatalf("the read: %v %v", res.Rows, err)
	}
	if sent := cut.requests(read); len(sent) != 2 || sent[0].key != "" || sent[1].key != "" {
		t.Errorf("the read was sent as %+v, want twice without a key", sent)
	}
	begun := time.Now()
	if _, err := through.Query(context.Background(), "put items {n: 3}"); err != nil {
		t.Fatal(err)
	}
	if sent := cut.requests("put items {n: 3}"); len(sent) != 3 {
		t.Errorf("the write answered 503 twice was sent %d times, want 3", len(sent))
	}
	if d := time.Since(begun); d > 4*time.Second {
		t.Errorf("two retries took %v, want about 0.5 s + 1 s of backoff at most", d)
	}
	long := "get items where n = 'unterminated " + strings.Repeat("x", 300)
	_, err = through.Query(context.Background(), long)
	var e *fenecdb.Error
	if !errors.As(err, &e) || e.Status != 400 || e.Retryable {
		t.Fatalf("got %v, want a 400 not retryable", err)
	}
	if n := len(cut.requests(long)); n != 1 {
		t.Errorf("a refused read was sent %d times", n)
	}
	if !strings.HasSuffix(e.Statement, "…") || len(e.Statement) != 200+len("…") || !strings.HasPrefix(long, strings.TrimSuffix(e.Statement, "…")) {
		t.Errorf("the error's statement %q is not the statement cut to 200 bytes", e.Statement)
	}
}

// TestClose: after Close every call, through a Wait copy too, returns
// ErrClosed and sends nothing; Close again returns nil.
func TestClose(t *testing.T) {
	db, url := server(t)
	mustQuery(t, db, "create collection items (n int)")
	c := connect(t, url)
	held := c.Wait(time.Second)
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Query(context.Background(), putOne); !errors.Is(err, fenecdb.ErrClosed) {
		t.Errorf("a call after Close: %v, want ErrClosed", err)
	}
	if _, err := held.From("items").Rows(context.Background()); !errors.Is(err, fenecdb.ErrClosed) {
		t.Errorf("a call through a Wait copy after Close: %v, want ErrClosed", err)
	}
	if n, _ := db.From("items").Count(context.Background()); n != 0 {
		t.Errorf("a write after Close was sent")
	}
	if err := c.Close(); err != nil {
		t.Errorf("Close again: %v", err)
	}
}

// TestWithNodes: WithNodes is Connect's comma-separated URLs as a list.
func TestWithNodes(t *testing.T) {
	direct, url := server(t)
	mustQuery(t, direct, "create collection items (n int)")
	db, err := fenecdb.Connect("", fenecdb.WithNodes([]string{"http://127.0.0.1:1", url}))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Query(context.Background(), "get items"); err != nil {
		t.Fatalf("through the second node: %v", err)
	}
	if db.Node() != url {
		t.Errorf("the current node is %s, want %s (the first refused the connection)", db.Node(), url)
	}
	for _, tc := range []struct {
		url   string
		nodes []string
	}{{url, []string{url}}, {"", []string{}}, {"", []string{url + "," + url}}, {"", []string{"127.0.0.1:8080"}}} {
		if _, err := fenecdb.Connect(tc.url, fenecdb.WithNodes(tc.nodes)); err == nil {
			t.Errorf("Connect(%q, WithNodes(%q)) took it", tc.url, tc.nodes)
		}
	}
	if _, err := fenecdb.Connect(url, fenecdb.WithRetries(-1)); err == nil {
		t.Error("WithRetries(-1) was taken")
	}
}

// TestWorkerSendsWithoutRetries: a worker on a client with retries sends
// its statements once, without keys (it retries faults itself, and a key
// per statement would fill the server's store of keys), as does a call
// with Retries(0); the client's other writes carry keys.
func TestWorkerSendsWithoutRetries(t *testing.T) {
	db, srv := queue(t, 5)
	cut, via := cutProxy(t, srv.URL, func(string, int) string { return "" })
	through := connect(t, via, fenecdb.WithRetries(2))
	w := newWorker(t, through, func(context.Context, fenecdb.Job) error { return nil }, fenecdb.WorkerOptions{OnError: faultsFail(t)})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := w.RunUntilEmpty(ctx); err != nil {
		t.Fatal(err)
	}
	if left := count(t, db, ""); left != 0 {
		t.Fatalf("%d jobs left", left)
	}
	cut.mu.Lock()
	for _, r := range cut.seen {
		if r.key != "" {
			t.Errorf("the worker sent %q under the key %q", r.query, r.key)
		}
	}
	n := len(cut.seen)
	cut.mu.Unlock()
	if n == 0 {
		t.Fatal("the worker sent nothing through the proxy")
	}
	if _, err := through.Query(ctx, "put jobs {attempts: 0}", fenecdb.Retries(0)); err != nil {
		t.Fatal(err)
	}
	if _, err := through.Query(ctx, "put jobs {attempts: 1}"); err != nil {
		t.Fatal(err)
	}
	if r := cut.requests("put jobs {attempts: 0}"); len(r) != 1 || r[0].key != "" {
		t.Errorf("a write with Retries(0) was sent as %+v, want without a key", r)
	}
	if r := cut.requests("put jobs {attempts: 1}"); len(r) != 1 || r[0].key == "" {
		t.Errorf("a write with the client's retries was sent as %+v, want under a key", r)
	}
	if _, err := through.Query(ctx, "get jobs", fenecdb.Retries(-1)); err == nil {
		t.Error("Retries(-1) was taken")
	}
}
