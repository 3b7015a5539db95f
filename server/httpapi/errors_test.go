package httpapi

import (
	"strings"
	"testing"
)

// TestBadInput: each malformed request is its own clear 4xx with its code,
// never a 500, and writes nothing.
func TestBadInput(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, ":memory:", func(c *Config) { c.MaxBody = 1 << 10 })
	ts.c.MustQuery("create collection jobs (n int, run_at timestamp @sorted, owner text)")
	ts.c.MustQuery("put jobs {n: 1, run_at: now()}")
	put := `{"query": "put jobs {n: 2}"}`
	tests := []struct {
		name, method, path string
		body               any // nil: no body
		header             map[string]string
		status             int
		code               string
		msg                string // a part of the error message
		at                 int    // "at" of a batch error, -1: none
	}{
		{"not JSON", "POST", "/query", `{"query": "put jobs {n: 2}"`, nil, 400, "bad_request", "not valid JSON", -1},
		{"not an object", "POST", "/query", `"put jobs {n: 2}"`, nil, 400, "bad_request", "the body", -1},
		{"trailing data", "POST", "/query", put + ` {}`, nil, 400, "bad_request", "JSON", -1},
		{"no body", "POST", "/query", nil, nil, 400, "bad_request", "needs a JSON body", -1},
		{"no query", "POST", "/query", `{"params": []}`, nil, 400, "bad_request", `property "query" is missing`, -1},
		{"query not a string", "POST", "/query", `{"query": 5}`, nil, 400, "bad_request", "body field query", -1},
		{"params not an array", "POST", "/query", `{"query": "put jobs {n: $1}", "params": 2}`, nil, 400, "bad_request", "body field params", -1},
		{"an unknown field", "POST", "/query", `{"query": "put jobs {n: 2}", "param": [1]}`, nil, 400, "bad_request", `"param" is unsupported`, -1},
		{"a param out of range", "POST", "/query", `{"query": "put jobs {n: $1}", "params": [1e999]}`, nil, 400, "bad_request", "params[0]: number 1e999 is out of range", -1},
		{"a batch param out of range", "POST", "/batch", `{"statements": [{"query": "get jobs"}, {"query": "put jobs {n: $1}", "params": [1, 1e999]}]}`, nil, 400, "bad_request", "statements[1].params[1]: number 1e999 is out of range", 1},
		{"a key twice", "POST", "/query", `{"query": "get jobs", "query": "del jobs"}`, nil, 400, "bad_request", `the body: invalid JSON at byte 23: key "query" appears twice in one object`, -1},
		{"a key twice in a param", "POST", "/query", `{"query": "put jobs {n: $1}", "params": [{"a": 1, "a": 2}]}`, nil, 400, "bad_request", `key "a" appears twice`, -1},
		{"a key twice in a batch statement", "POST", "/batch", `{"statements": [{"query": "get jobs", "query": "del jobs"}]}`, nil, 400, "bad_request", `key "query" appears twice`, -1},
		{"a lone surrogate in a param", "POST", "/query", `{"query": "put jobs {s: $1}", "params": ["a\ud800b"]}`, nil, 400, "bad_request", `the body: invalid JSON at byte 44: lone UTF-16 surrogate \ud800 in a string`, -1},
		{"a lone low surrogate deep in a param", "POST", "/query", `{"query": "put jobs {j: $1}", "params": [1, {"k": ["\udc00"]}]}`, nil, 400, "bad_request", `the body: invalid JSON at byte 53: lone UTF-16 surrogate \udc00`, -1},
		{"invalid UTF-8 in the query", "POST", "/query", "{\"query\": \"put jobs {s: \\\"a\xffb\\\"}\"}", nil, 400, "bad_request", "a string is not valid UTF-8", -1},
		{"invalid UTF-8 in a param", "POST", "/query", "{\"query\": \"put jobs {s: $1}\", \"params\": [\"a\xffb\"]}", nil, 400, "bad_request", "the body: invalid JSON at byte 44: a string is not valid UTF-8", -1},
		{"invalid UTF-8 in a batch param", "POST", "/batch", "{\"statements\": [{\"query\": \"put jobs {s: $1}\", \"params\": [\"\xc3\"]}]}", nil, 400, "bad_request", "the body: invalid JSON at byte 59: a string is not valid UTF-8", -1},
		{"a parse error", "POST", "/query", `{"query": "put jobs {n: }"}`, nil, 400, "bad_request", "position", -1},
		{"a type error", "POST", "/query", `{"query": "put jobs {n: $1}", "params": ["two"]}`, nil, 400, "bad_request", "", -1},
		{"an unknown collection", "POST", "/query", `{"query": "put nope {n: 2}"}`, nil, 404, "not_found", "nope", -1},
		{"a taken id", "POST", "/query", `{"query": "insert jobs {id: 1, n: 2}"}`, nil, 409, "conflict", "", -1},
		{"an unmet require", "POST", "/query", `{"query": "del jobs where n = 7 require 1"}`, nil, 412, "unmet", "requires 1", -1},
		{"Fenec-Wait not a number", "POST", "/query", put, map[string]string{"Fenec-Wait": "soon"}, 400, "bad_request", "Fenec-Wait must be a whole number of milliseconds from 0 to 30000", -1},
		{"Fenec-Wait too long", "POST", "/query", put, map[string]string{"Fenec-Wait": "30001"}, 400, "bad_request", "Fenec-Wait must be", -1},
		{"Fenec-Wait negative", "POST", "/query", put, map[string]string{"Fenec-Wait": "-1"}, 400, "bad_request", "Fenec-Wait must be", -1},
		{"Fenec-Wait a fraction", "POST", "/query", put, map[string]string{"Fenec-Wait": "1.5"}, 400, "bad_request", "Fenec-Wait must be", -1},
		{"Idempotency-Key too long", "POST", "/query", put, map[string]string{"Idempotency-Key": strings.Repeat("k", 256)}, 400, "bad_request", "Idempotency-Key must be 1 to 255 bytes", -1},
		{"a body too large", "POST", "/query", `{"query": "put jobs {n: 2}", "params": ["` + strings.Repeat("x", 2<<10) + `"]}`, nil, 413, "too_large", "--max-body", -1},
		{"an unknown route", "GET", "/nope", nil, nil, 404, "not_found", "no route GET /nope", -1},
		{"a wrong method", "GET", "/query", nil, nil, 405, "method_not_allowed", "allowed: POST", -1},
		{"a trailing slash", "POST", "/query/", put, nil, 404, "not_found", "", -1},
		{"batch: no statements", "POST", "/batch", `{"statements": []}`, nil, 400, "bad_request", "statements", -1},
		{"batch: not a list", "POST", "/batch", `{"statements": {"query": "get jobs"}}`, nil, 400, "bad_request", "statements", -1},
		{"batch: a statement without query", "POST", "/batch", `{"statements": [{"query": "put jobs {n: 2}"}, {"params": []}]}`, nil, 400, "bad_request", "statements[1]", 1},
		{"batch: a parse error", "POST", "/batch", `{"statements": [{"query": "put jobs {n: 2}"}, {"query": "put jobs {"}]}`, nil, 400, "bad_request", "position", 1},
		{"batch: a refused statement", "POST", "/batch", `{"statements": [{"query": "put jobs {n: 2}"}, {"query": "del jobs require 9"}]}`, nil, 412, "unmet", "requires 9", 1},
		{"clock: negative", "POST", "/_clock", `{"advance_ms": -5}`, nil, 400, "bad_request", "advance_ms", -1},
		{"clock: both", "POST", "/_clock", `{"advance_ms": 5, "set_ms": 5}`, nil, 400, "bad_request", "advance_ms", -1},
		{"clock: a string", "POST", "/_clock", `{"advance_ms": "5"}`, nil, 400, "bad_request", "advance_ms", -1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			seq := ts.db.Seq()
			r, err := ts.c.Do(tt.method, tt.path, tt.body, tt.header)
			if err != nil {
				t.Fatal(err)
			}
			var e struct {
				Error, Code string
				At          *int
			}
			r.JSON(t, &e)
			if r.Status != tt.status || e.Code != tt.code {
				t.Fatalf("got %d %s, want %d %s", r.Status, r.Body, tt.status, tt.code)
			}
			if !strings.Contains(e.Error, tt.msg) {
				t.Errorf("message %q does not say %q", e.Error, tt.msg)
			}
			switch {
			case tt.at < 0 && e.At != nil:
				t.Errorf("at %d, want none", *e.At)
			case tt.at >= 0 && (e.At == nil || *e.At != tt.at):
				t.Errorf("at %v, want %d", e.At, tt.at)
			}
			if got := ts.db.Seq(); got != seq {
				t.Errorf("the refused request wrote: seq %d -> %d", seq, got)
			}
		})
	}
}
