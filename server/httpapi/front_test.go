package httpapi

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/fenecdb/fenec/server/console"
)

// raw sends a request the spec has no operation for (the console's pages,
// a CORS preflight), so apitest's validation does not apply to its answer.
func raw(t *testing.T, ts *testServer, method, path string, header map[string]string) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequest(method, ts.c.Base+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

// TestConsoleServed: the console's page, style and script are served
// without a token (the page asks for one) and each with the security
// headers; nothing else under /console is; --no-console serves none.
func TestConsoleServed(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, ":memory:", func(c *Config) { c.Token = "admin" })
	for _, tt := range []struct{ path, ctype, has string }{
		{"/console", "text/html; charset=utf-8", `<script type="module" src="/console/console.js"></script>`},
		{"/console/console.js", "text/javascript; charset=utf-8", "DO NOT EDIT"},
		{"/console/console.css", "text/css; charset=utf-8", "#queues"},
	} {
		resp, body := raw(t, ts, "GET", tt.path, nil)
		if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != tt.ctype || !strings.Contains(body, tt.has) {
			t.Errorf("GET %s: %d %s, %.80q", tt.path, resp.StatusCode, resp.Header.Get("Content-Type"), body)
		}
		for k, v := range console.Headers {
			if got := resp.Header.Get(k); got != v {
				t.Errorf("GET %s: %s %q, want %q", tt.path, k, got, v)
			}
		}
		if csp := resp.Header.Get("Content-Security-Policy"); strings.Contains(csp, "unsafe-inline") || !strings.Contains(csp, "script-src 'self'") {
			t.Errorf("CSP %q", csp)
		}
	}
	// The page runs no inline script: every <script> names its source.
	_, page := raw(t, ts, "GET", "/console", nil)
	if n, m := strings.Count(page, "<script"), strings.Count(page, `<script type="module" src="/console/`); n != m || n == 0 {
		t.Errorf("%d scripts, %d of them from a file", n, m)
	}
	if resp, body := raw(t, ts, "GET", "/console/../_metrics", nil); resp.StatusCode == 200 && strings.Contains(body, "fenec_") {
		t.Error("/console/../_metrics answered the metrics without a token")
	}
	if resp, _ := raw(t, ts, "GET", "/console/secrets.txt", nil); resp.StatusCode != 404 || resp.Header.Get("X-Content-Type-Options") != "nosniff" {
		t.Errorf("an unknown asset: %d", resp.StatusCode)
	}
	if resp, _ := raw(t, ts, "POST", "/console", nil); resp.StatusCode != 405 || resp.Header.Get("Allow") != "GET, HEAD" {
		t.Errorf("POST /console: %d", resp.StatusCode)
	}

	off := newTestServer(t, ":memory:", func(c *Config) { c.NoConsole = true })
	if r, err := off.c.Do("GET", "/console", nil, nil); err != nil || r.Status != 404 || r.Code() != "not_found" {
		t.Errorf("--no-console: %v %v", err, r)
	}
}

// TestCORS: a page of an allowed origin is answered the preflight of
// /query and /batch with the headers the SDK sends, and its requests the
// headers it may read; any other origin's preflight is refused, and its
// requests carry no CORS header, so the browser keeps the answer from the
// page. Only exact origins are taken.
func TestCORS(t *testing.T) {
	t.Parallel()
	const app = "https://app.example.com"
	ts := newTestServer(t, ":memory:", func(c *Config) {
		c.Token = "admin"
		c.CORSOrigins = []string{app, "http://127.0.0.1:5173"}
	})
	ts.c.Token = "admin"
	ts.c.MustQuery(`create collection jobs (run_at timestamp @sorted, owner text)`)
	pre := func(origin string) map[string]string {
		return map[string]string{"Origin": origin, "Access-Control-Request-Method": "POST",
			"Access-Control-Request-Headers": "authorization,content-type,fenec-wait,idempotency-key"}
	}
	for _, path := range []string{"/query", "/batch"} {
		resp, body := raw(t, ts, "OPTIONS", path, pre(app))
		h := resp.Header
		if resp.StatusCode != 204 || h.Get("Access-Control-Allow-Origin") != app || h.Get("Access-Control-Allow-Methods") != "POST" ||
			h.Get("Access-Control-Allow-Headers") != "Authorization, Content-Type, Fenec-Wait, Idempotency-Key" ||
			h.Get("Access-Control-Allow-Credentials") != "" || h.Get("Vary") != "Origin" {
			t.Errorf("preflight of %s: %d %v %s", path, resp.StatusCode, h, body)
		}
		resp, body = raw(t, ts, "OPTIONS", path, pre("https://evil.example.com"))
		if resp.StatusCode != 403 || resp.Header.Get("Access-Control-Allow-Origin") != "" ||
			body != `{"error":"origin https://evil.example.com is not one of the server's --cors-origin","code":"origin_not_allowed"}`+"\n" {
			t.Errorf("another origin's preflight of %s: %d %v %s", path, resp.StatusCode, resp.Header, body)
		}
	}
	// Only /query and /batch: /collections' preflight is the API's 405.
	if resp, _ := raw(t, ts, "OPTIONS", "/collections", pre(app)); resp.StatusCode != 405 {
		t.Errorf("preflight of /collections: %d", resp.StatusCode)
	}

	// The request itself, answered (and refused) with what the page may read.
	r, err := ts.c.Do("POST", "/query", `{"query": "put jobs {run_at: now()}"}`, map[string]string{"Origin": app})
	if err != nil || r.Status != 200 || r.Header.Get("Access-Control-Allow-Origin") != app ||
		r.Header.Get("Access-Control-Expose-Headers") != "Fenec-Seq, Idempotent-Replayed" || r.Header.Get("Fenec-Seq") == "" {
		t.Errorf("a request from %s: %v %v", app, err, r)
	}
	bad := *ts.c
	bad.Token = "wrong"
	if r, err := bad.Do("POST", "/query", `{"query": "get jobs"}`, map[string]string{"Origin": app}); err != nil || r.Status != 401 || r.Header.Get("Access-Control-Allow-Origin") != app {
		t.Errorf("a refusal must reach the page of an allowed origin: %v %v", err, r)
	}
	// Another origin's request is refused unrun, its token notwithstanding.
	if r, err := ts.c.Do("POST", "/batch", `{"statements": [{"query": "get jobs count"}]}`, map[string]string{"Origin": "https://evil.example.com"}); err != nil || r.Status != 403 || r.Code() != "origin_not_allowed" || r.Header.Get("Access-Control-Allow-Origin") != "" {
		t.Errorf("a request from another origin: %v %v", err, r)
	}

	for _, tt := range []struct {
		origin string
		ok     bool
	}{
		{"https://app.example.com", true},
		{"http://127.0.0.1:5173", true},
		{"*", false},
		{"null", false},
		{"https://app.example.com/", false},
		{"https://app.example.com/path", false},
		{"https://App.example.com", false},
		{"https://app.example.com:443", false},
		{"ftp://app.example.com", false},
		{"app.example.com", false},
	} {
		if err := CheckOrigin(tt.origin); (err == nil) != tt.ok {
			t.Errorf("CheckOrigin(%q): %v", tt.origin, err)
		}
	}
}
