package httpapi

import (
	"bytes"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"github.com/fenecdb/fenec/server/engine"
	"github.com/fenecdb/fenec/server/fenecql"
	"github.com/fenecdb/fenec/server/httpapi/gen"
)

// slowRead is what the full check and encoding/json (with
// fenecql.FromGo, as the Go SDK's values arrive) make of a body: the
// statements, or ok false for a body they refuse. It is the reference
// reading readStatements is held to.
func slowRead(t *testing.T, s *Server, body []byte, batch bool) ([]stmtIn, bool) {
	t.Helper()
	path, route := "/query", s.queryRoute
	if batch {
		path, route = "/batch", s.batchRoute
	}
	r := httptest.NewRequest("POST", path, bytes.NewReader(body))
	if e := s.check(r, route, body); e != nil {
		return nil, false
	}
	var qrs []gen.QueryRequest
	if batch {
		var bb gen.BatchRequest
		if decodeStrict(body, &bb) != nil {
			return nil, false
		}
		qrs = bb.Statements
	} else {
		var qr gen.QueryRequest
		if decodeStrict(body, &qr) != nil {
			return nil, false
		}
		qrs = []gen.QueryRequest{qr}
	}
	out := make([]stmtIn, len(qrs))
	for i, qr := range qrs {
		out[i].raw = []byte(qr.Query)
		for _, p := range deref(qr.Params) {
			v, err := fenecql.FromGo(deref(p))
			if err != nil {
				return nil, false
			}
			out[i].params = append(out[i].params, v)
		}
	}
	return out, true
}

// sameStatements compares two readings, an empty parameter list equal to
// none.
func sameStatements(a, b []stmtIn) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if text(a[i]) != text(b[i]) || len(a[i].params) != len(b[i].params) {
			return false
		}
		for j := range a[i].params {
			if !sameValue(a[i].params[j], b[i].params[j]) {
				return false
			}
		}
	}
	return true
}

// sameValue compares two values kind by kind, key by key in order.
func sameValue(a, b fenecql.Value) bool {
	if a.Kind() != b.Kind() {
		return false
	}
	switch a.Kind() {
	case fenecql.KindList:
		la, lb := a.List(), b.List()
		if len(la) != len(lb) {
			return false
		}
		for i := range la {
			if !sameValue(la[i], lb[i]) {
				return false
			}
		}
		return true
	case fenecql.KindObject:
		oa, ob := a.Object(), b.Object()
		if len(oa.Keys) != len(ob.Keys) {
			return false
		}
		for i := range oa.Keys {
			if oa.Keys[i] != ob.Keys[i] || !sameValue(oa.Vals[i], ob.Vals[i]) {
				return false
			}
		}
		return true
	}
	return bytes.Equal(fenecql.AppendJSON(nil, a), fenecql.AppendJSON(nil, b))
}

func text(s stmtIn) string { return string(s.raw) }

// variations returns bodies near a valid one: cut at every byte, each
// value swapped for a value of every JSON type, each key renamed, doubled
// and dropped, and bytes that strict JSON refuses put into its strings.
func variations(body string) []string {
	out := []string{body, body + " ", " " + body, body + " {}", body + "x", "[" + body + "]"}
	for i := range body {
		out = append(out, body[:i])
	}
	values := []string{`null`, `0`, `-1`, `1.5`, `1e999`, `9007199254740993`, `""`, `"x"`, `true`, `[]`, `[1]`, `{}`, `{"a": 1}`,
		`[{"query": "get jobs"}]`, `["get jobs"]`, `[null]`}
	for _, key := range []string{`"query"`, `"params"`, `"statements"`} {
		at := strings.Index(body, key+":")
		if at < 0 {
			continue
		}
		valueAt := at + len(key) + 1
		end := valueEnd(body, valueAt)
		for _, v := range values {
			out = append(out, body[:valueAt]+" "+v+body[end:])
		}
		out = append(out,
			body[:at]+`"Query"`+body[at+len(key):],
			body[:at]+`"other"`+body[at+len(key):],
			body[:at]+body[at:end]+", "+body[at:end]+body[end:])
		// Dropped, with the comma that went with it.
		if end < len(body) && body[end] == ',' {
			out = append(out, body[:at]+body[end+1:])
		} else if c := strings.LastIndexByte(body[:at], ','); c >= 0 {
			out = append(out, body[:c]+body[end:])
		} else {
			out = append(out, body[:at]+body[end:])
		}
	}
	for _, bad := range []string{"\xff", `\ud800`, `\udc00x`, `\u0000`, `\n`, "\t", `\"`, `\/`, "é"} {
		if at := strings.Index(body, `get jobs`); at >= 0 {
			out = append(out, body[:at]+bad+body[at:])
		}
	}
	return out
}

// valueEnd returns where the JSON value starting at or after i ends (a
// scan good enough for the bodies above: strings without \" and balanced
// brackets).
func valueEnd(s string, i int) int {
	for i < len(s) && s[i] == ' ' {
		i++
	}
	depth, inString := 0, false
	for ; i < len(s); i++ {
		c := s[i]
		switch {
		case inString:
			if c == '\\' {
				i++
			} else if c == '"' {
				inString = false
				if depth == 0 {
					return i + 1
				}
			}
		case c == '"':
			inString = true
		case c == '[' || c == '{':
			depth++
		case c == ']' || c == '}':
			if depth == 0 {
				return i
			}
			if depth--; depth == 0 {
				return i + 1
			}
		case c == ',' && depth == 0:
			return i
		}
	}
	return i
}

// TestFastPathAcceptsWhatTheSpecAccepts: a /query or /batch body read by
// the fast path (body.go) is read exactly as the spec's validation and the
// handler's decoding read it, and every body those refuse it refuses — the
// bad-input table's, and variations of valid bodies around each key and
// value.
func TestFastPathAcceptsWhatTheSpecAccepts(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, ":memory:", nil)
	seeds := []struct {
		body  string
		batch bool
	}{
		{`{"query": "get jobs"}`, false},
		{`{"query": "put jobs {n: $1}", "params": [1]}`, false},
		{`{"params": [{"b": 1, "a": [2, {"d": null, "c": "é"}]}, 9007199254740993, -0.5, 1e3, "a\u00e9\ud83d\ude00"], "query": "get jobs"}`, false},
		{`{"query": "put jobs {n: 2}", "param": [1]}`, false},
		{`{"qu\u0065ry": "get jobs", "p\u0061rams": []}`, false},
		{`{"statements": [{"query": "get jobs"}, {"query": "del jobs where id = $1", "params": [7]}]}`, true},
		{`{"statements": [{"query": "get jobs", "params": []}]}`, true},
	}
	// The bad-input table's /query and /batch bodies (errors_test.go).
	for _, b := range []string{`{"query": "put jobs {n: 2}"`, `"put jobs {n: 2}"`, `{"query": "put jobs {n: 2}"} {}`, ``,
		`{"params": []}`, `{"query": 5}`, `{"query": "put jobs {n: $1}", "params": 2}`, `{"query": "put jobs {n: $1}", "params": [1e999]}`,
		`{"query": "get jobs", "query": "del jobs"}`, `{"query": "put jobs {n: $1}", "params": [{"a": 1, "a": 2}]}`,
		"{\"query\": \"put jobs {n: $1}\", \"params\": [\"a\xffb\"]}", `{"query": "put jobs {n: $1}", "params": ["a\ud800b"]}`,
		`{"query": ""}`, `{"query": "get jobs", "params": null}`, `{}`, `[]`, `null`} {
		seeds = append(seeds, struct {
			body  string
			batch bool
		}{b, false})
	}
	for _, b := range []string{`{"statements": [{"query": "get jobs", "query": "del jobs"}]}`, `{"statements": []}`,
		`{"statements": {"query": "get jobs"}}`, `{"statements": [{"query": "put jobs {n: 2}"}, {"params": []}]}`,
		`{"statements": null}`, `{"statements": [null]}`, `{"statements": ["get jobs"]}`, `{"statements": [{"query": "get jobs"}], "x": 1}`} {
		seeds = append(seeds, struct {
			body  string
			batch bool
		}{b, true})
	}
	tried, fast := 0, 0
	for _, seed := range seeds {
		for _, body := range variations(seed.body) {
			for _, batch := range []bool{seed.batch, !seed.batch} {
				tried++
				got, e := readStatements([]byte(body), batch, nil, new([]fenecql.Value))
				ok := e == nil
				want, wantOK := slowRead(t, ts.Server, []byte(body), batch)
				if ok != wantOK {
					t.Errorf("batch %v, body %q: the fast path accepts: %v, the spec and the decoder: %v", batch, body, ok, wantOK)
					continue
				}
				if ok {
					fast++
					if !sameStatements(got, want) {
						t.Errorf("batch %v, body %q: the fast path reads %+v, the decoder %+v", batch, body, got, want)
					}
				}
			}
		}
	}
	if fast == 0 || fast == tried {
		t.Fatalf("%d of %d bodies accepted: the variations test nothing", fast, tried)
	}
	t.Logf("%d bodies, %d accepted", tried, fast)
}

// TestFastPathHeaders: the fast path takes Fenec-Wait and Idempotency-Key
// only where the spec does, and reads them as the generated wrapper does.
func TestFastPathHeaders(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, ":memory:", nil)
	body := []byte(`{"query": "get jobs"}`)
	for _, h := range []struct{ name, value string }{
		{"Fenec-Wait", "0"}, {"Fenec-Wait", "1"}, {"Fenec-Wait", "30000"}, {"Fenec-Wait", "30001"}, {"Fenec-Wait", "-1"},
		{"Fenec-Wait", "+5"}, {"Fenec-Wait", "05"}, {"Fenec-Wait", "1.5"}, {"Fenec-Wait", "1e3"}, {"Fenec-Wait", "soon"},
		{"Fenec-Wait", "99999999999999999999"}, {"Fenec-Wait", ""},
		{"Idempotency-Key", "k"}, {"Idempotency-Key", strings.Repeat("k", 255)}, {"Idempotency-Key", strings.Repeat("k", 256)},
		{"Idempotency-Key", strings.Repeat("é", 128)}, {"Idempotency-Key", ""}, {"Idempotency-Key", "a,b"}, {"Idempotency-Key", "%41"},
	} {
		r := httptest.NewRequest("POST", "/query", bytes.NewReader(body))
		r.Header.Set(h.name, h.value)
		held, key, ok := readHeaders(r)
		slow := ts.Server.check(r, ts.Server.queryRoute, body) == nil
		if ok && !slow {
			t.Errorf("%s: %q: the fast path takes it, the spec refuses it", h.name, h.value)
		}
		if ok && h.name == "Fenec-Wait" && fmt.Sprint(*held) != h.value {
			t.Errorf("Fenec-Wait: %q read as %d", h.value, *held)
		}
		if ok && h.name == "Idempotency-Key" && *key != h.value {
			t.Errorf("Idempotency-Key: %q read as %q", h.value, *key)
		}
		if !ok && (h.value == "0" || h.value == "30000" || h.value == "k") {
			t.Errorf("%s: %q: left to the full check", h.name, h.value)
		}
	}
	r := httptest.NewRequest("POST", "/query", nil)
	r.Header["Fenec-Wait"] = []string{"1", "2"}
	if _, _, ok := readHeaders(r); ok {
		t.Error("Fenec-Wait twice: taken")
	}
	if _, _, ok := readHeaders(httptest.NewRequest("POST", "/query?x=1", nil)); ok {
		t.Error("a query string: taken")
	}
}

// FuzzFastPath: whatever body the fast path accepts, the spec's validation
// and the handler's decoding accept too, and read the same.
//
//	cd server && go test ./httpapi -run '^$' -fuzz '^FuzzFastPath$' -fuzztime 30s
func FuzzFastPath(f *testing.F) {
	for _, b := range []string{`{"query": "get jobs"}`, `{"query": "put jobs {n: $1}", "params": [1, "a\u003c", {"b": [1.5, null], "a": true}]}`,
		`{"statements": [{"query": "get jobs"}, {"params": [7], "query": "del jobs where id = $1"}]}`, `{"statements": []}`, `{"query": ""}`} {
		f.Add([]byte(b), false)
		f.Add([]byte(b), true)
	}
	db, err := engine.Open(engine.Options{})
	if err != nil {
		f.Fatal(err)
	}
	defer db.Close()
	s, err := New(Config{DB: db})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, body []byte, batch bool) {
		got, e := readStatements(body, batch, nil, new([]fenecql.Value))
		if e != nil {
			return
		}
		want, wantOK := slowRead(t, s, body, batch)
		if !wantOK {
			t.Fatalf("batch %v, body %q: the fast path accepts what the spec or the decoder refuses", batch, body)
		}
		if !sameStatements(got, want) {
			t.Fatalf("batch %v, body %q: the fast path reads %+v, the decoder %+v", batch, body, got, want)
		}
	})
}

func TestLengthHeader(t *testing.T) {
	t.Parallel()
	for _, n := range []int{0, 1, 9, 10, 99, 100, 999, 1000, len(lengthHeaders) - 1, len(lengthHeaders), 1 << 20} {
		if got := lengthHeader(n); len(got) != 1 || got[0] != strconv.Itoa(n) {
			t.Errorf("lengthHeader(%d) = %q", n, got)
		}
	}
	// Adding to a value given out must not write into the table.
	h := http.Header{"Content-Length": lengthHeader(5)}
	h.Add("Content-Length", "7")
	if lengthHeaders[6] != "6" {
		t.Errorf("the table was written into: %q", lengthHeaders[6])
	}
}
