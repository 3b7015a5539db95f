package httpapi

import (
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/fenecdb/fenec/server/auth"
	"github.com/fenecdb/fenec/server/httpapi/internal/h1/h1test"
)

// handedOff makes raw's first request one HTTPServer does not read itself
// (a header value outside ASCII), so that net/http answers it: the same
// request on the fallback path.
func handedOff(raw string) string {
	i := strings.Index(raw, "\r\n") + 2
	return raw[:i] + "X-Name: é\r\n" + raw[i:]
}

// onBothPaths runs check on raw as HTTPServer reads it and as net/http
// (its fallback) reads it, and fails if the second was not handed over.
func onBothPaths(t *testing.T, ct *connTest, raw string, check func(t *testing.T, raw string)) {
	t.Helper()
	t.Run("fast", func(t *testing.T) {
		before := ct.srv.Handoffs()
		check(t, raw)
		if ct.srv.Handoffs() != before {
			t.Error("handed to net/http")
		}
	})
	t.Run("fallback", func(t *testing.T) {
		before := ct.srv.Handoffs()
		check(t, handedOff(raw))
		if ct.srv.Handoffs() != before+1 {
			t.Error("not handed to net/http")
		}
	})
}

// TestEdgeBodyTooLargeAtOnce: a Content-Length over --max-body is
// answered 413 at once, unread, and the connection closed: the request
// sent after it is not answered, and nothing waits for the body.
func TestEdgeBodyTooLargeAtOnce(t *testing.T) {
	t.Parallel()
	ct := newConnTest(t, nil)
	ct.Server.cfg.MaxBody = 1 << 10
	raw := "POST /query HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: 10000000\r\n\r\n" + health
	onBothPaths(t, ct, raw, func(t *testing.T, raw string) {
		start := time.Now()
		c := h1test.MustDial(t, ct.lean)
		defer c.Close()
		io.WriteString(c, raw)
		c.SetReadDeadline(time.Now().Add(10 * time.Second))
		out, _ := io.ReadAll(c) // until the server closes
		took := time.Since(start)
		rs, err := h1test.ParseAnswers(string(out), []string{"POST"})
		if err != nil || rs[0].StatusCode != 413 || !strings.Contains(rs[0].Text, `"too_large"`) || !rs[0].Close {
			t.Fatalf("%q: %v", out, err)
		}
		if took > 5*time.Second {
			t.Errorf("answered and closed after %v", took)
		}
	})
}

// TestEdgeSlowBody: a body that stops arriving is 408 request_timeout,
// the connection closed, and the message names no socket address.
func TestEdgeSlowBody(t *testing.T) {
	t.Parallel()
	ct := newConnTest(t, func(s *http.Server) { s.ReadHeaderTimeout, s.ReadTimeout = 300*time.Millisecond, 300*time.Millisecond })
	ct.c.MustQuery("create collection jobs (n int)")
	body := `{"query":"put jobs {n: 1}"}`
	raw := "POST /query HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: " + strconv.Itoa(len(body)) + "\r\n\r\n" + body[:10]
	onBothPaths(t, ct, raw, func(t *testing.T, raw string) {
		seq := ct.db.Seq()
		c := h1test.MustDial(t, ct.lean)
		defer c.Close()
		io.WriteString(c, raw)
		c.SetReadDeadline(time.Now().Add(5 * time.Second))
		out, _ := io.ReadAll(c)
		rs, err := h1test.ParseAnswers(string(out), []string{"POST"})
		if err != nil || rs[0].StatusCode != 408 || !strings.Contains(rs[0].Text, `"request_timeout"`) || !rs[0].Close {
			t.Fatalf("%q: %v", out, err)
		}
		if strings.Contains(rs[0].Text, "127.0.0.1") || strings.Contains(rs[0].Text, "tcp") {
			t.Errorf("the message names the connection: %s", rs[0].Text)
		}
		if ct.db.Seq() != seq {
			t.Error("a request whose body never came wrote")
		}
	})
}

// TestEdgeHeaders: two Authorization headers are 400; every answer of
// the API carries nosniff.
func TestEdgeHeaders(t *testing.T) {
	t.Parallel()
	ct := newConnTest(t, nil)
	twice := "GET /collections HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer a\r\nAuthorization: Bearer b\r\n\r\n"
	onBothPaths(t, ct, twice+health, func(t *testing.T, raw string) {
		rs := h1test.ExchangeAnswers(t, ct.lean, raw, "GET", "GET")
		if rs[0].StatusCode != 400 || !strings.Contains(rs[0].Text, "2 Authorization headers") {
			t.Errorf("two Authorization headers: %d %s", rs[0].StatusCode, rs[0].Text)
		}
		for i, r := range rs {
			if r.Header.Get("X-Content-Type-Options") != "nosniff" {
				t.Errorf("answer %d: no nosniff: %v", i, r.Header)
			}
		}
	})
	for _, path := range []string{"/_health", "/collections", "/nowhere"} {
		if r, err := ct.c.Do("GET", path, nil, nil); err != nil || r.Header.Get("X-Content-Type-Options") != "nosniff" {
			t.Errorf("GET %s: %v %v", path, err, r)
		}
	}
}

// TestEdgeHost: a server without a token answers only loopback Host names
// and those of Config.Hosts (DNS rebinding); with a token, any.
func TestEdgeHost(t *testing.T) {
	t.Parallel()
	ct := newConnTest(t, nil)
	ct.Server.hosts = []string{"db.internal"}
	for _, tt := range []struct {
		host   string
		status int
	}{
		{"localhost", 200}, {"localhost:8080", 200}, {"127.0.0.1:1", 200}, {"[::1]:8080", 200}, {"[::1]", 200},
		{"LOCALHOST", 200}, {"db.internal:443", 200},
		{"evil.example", 421}, {"evil.example:8080", 421}, {"127.0.0.2", 421}, {"localhost.evil.example", 421},
	} {
		t.Run(tt.host, func(t *testing.T) {
			raw := "GET /_health HTTP/1.1\r\nHost: " + tt.host + "\r\n\r\n"
			onBothPaths(t, ct, raw, func(t *testing.T, raw string) {
				rs := h1test.ExchangeAnswers(t, ct.lean, raw, "GET")
				if rs[0].StatusCode != tt.status || (tt.status == 421 && !strings.Contains(rs[0].Text, `"host_not_allowed"`)) {
					t.Errorf("Host %q: %d %s", tt.host, rs[0].StatusCode, rs[0].Text)
				}
			})
		})
	}
	withToken := newConnTest(t, nil)
	g, err := auth.NewGate("s3cret", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	withToken.Server.gate = g
	rs := h1test.ExchangeAnswers(t, withToken.lean, "GET /collections HTTP/1.1\r\nHost: db.example.com\r\nAuthorization: Bearer s3cret\r\n\r\n", "GET")
	if rs[0].StatusCode != 200 {
		t.Errorf("with a token, another Host: %d %s", rs[0].StatusCode, rs[0].Text)
	}
}

// TestEdgeOrigin: a request carrying an Origin that is neither one of
// --cors-origin nor the server's own is refused unrun, whatever its
// method and Content-Type (a form's post, sendBeacon's text/plain).
func TestEdgeOrigin(t *testing.T) {
	t.Parallel()
	ct := newConnTest(t, nil)
	ct.Server.cfg.CORSOrigins = []string{"http://app.localhost:3000"}
	ct.c.MustQuery("create collection nums (n int)")
	ct.c.MustQuery("put nums {n: 1}")
	drop := `{"statements":[{"query":"drop collection if exists nums"}]}`
	for _, tt := range []struct {
		origin, ctype string
		status        int
	}{
		{"https://evil.example", "application/x-www-form-urlencoded", 403},
		{"https://evil.example", "text/plain;charset=UTF-8", 403},
		{"https://evil.example", "multipart/form-data; boundary=x", 403},
		{"https://evil.example", "application/json", 403},
		{"null", "application/x-www-form-urlencoded", 403},
		{"http://localhost", "application/json", 403}, // not this server's port
		{"https://localhost:PORT", "application/json", 403},
	} {
		t.Run(tt.origin+" "+tt.ctype, func(t *testing.T) {
			_, port, _ := strings.Cut(ct.lean, ":")
			origin := strings.Replace(tt.origin, "PORT", port, 1)
			raw := "POST /batch HTTP/1.1\r\nHost: localhost:" + port + "\r\nOrigin: " + origin + "\r\nContent-Type: " + tt.ctype +
				"\r\nContent-Length: " + strconv.Itoa(len(drop)) + "\r\n\r\n" + drop
			onBothPaths(t, ct, raw, func(t *testing.T, raw string) {
				rs := h1test.ExchangeAnswers(t, ct.lean, raw, "POST")
				if rs[0].StatusCode != tt.status || !strings.Contains(rs[0].Text, `"origin_not_allowed"`) {
					t.Errorf("%d %s", rs[0].StatusCode, rs[0].Text)
				}
				if r := ct.c.MustQuery("get nums count"); !strings.Contains(string(r.Body), "1") {
					t.Fatalf("the collection changed: %s", r.Body)
				}
			})
		})
	}
	// The server's own origin (its console's page) and an allowed one are
	// answered.
	_, port, _ := strings.Cut(ct.lean, ":")
	read := `{"query":"get nums count"}`
	for _, origin := range []string{"http://localhost:" + port, "http://app.localhost:3000"} {
		raw := "POST /query HTTP/1.1\r\nHost: localhost:" + port + "\r\nOrigin: " + origin + "\r\nContent-Type: application/json\r\nContent-Length: " +
			strconv.Itoa(len(read)) + "\r\n\r\n" + read
		onBothPaths(t, ct, raw, func(t *testing.T, raw string) {
			if rs := h1test.ExchangeAnswers(t, ct.lean, raw, "POST"); rs[0].StatusCode != 200 {
				t.Errorf("origin %s: %d %s", origin, rs[0].StatusCode, rs[0].Text)
			}
		})
	}
}

// TestEdgeClip: an error that echoes what the client sent echoes its
// start, not all of it.
func TestEdgeClip(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, ":memory:", nil)
	ts.c.MustQuery("create collection nums (n int)")
	long := strings.Repeat("a", 1<<20)
	for _, q := range []string{"get " + long, "get nums select " + long, "put nums {" + long + ": 1}", "get nums select " + long + "(n)"} {
		r, err := ts.c.Query(q)
		if err != nil {
			t.Fatal(err)
		}
		if r.Status/100 != 4 || len(r.Body) > 1000 || !strings.Contains(string(r.Body), "…") {
			t.Errorf("%.30s…: %d, %d bytes: %.300s", q, r.Status, len(r.Body), r.Body)
		}
	}
	if r, err := ts.c.Do("GET", "/"+long, nil, nil); err != nil || r.Status != 404 || len(r.Body) > 1000 {
		t.Errorf("a long path: %v %d bytes", err, len(r.Body))
	}
}

// TestEdgeIntParams: an int field takes a parameter that is an integer of
// 64 bits, or a whole float below 2^53; below -2^63 is refused as above
// 2^63-1 is, and so is a number too small for a float (1e-400).
func TestEdgeIntParams(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, ":memory:", nil)
	ts.c.MustQuery("create collection nums (n int)")
	for _, tt := range []struct {
		param, stored string // stored "" : refused with 400
	}{
		{"9223372036854775807", "9223372036854775807"},
		{"-9223372036854775808", "-9223372036854775808"},
		{"9223372036854775808", ""},
		{"-9223372036854775809", ""},
		{"-99999999999999999999", ""},
		{"2.0", "2"},
		{"1e3", "1000"},
		{"-0.0", "0"},
		{"2.5", ""},
		{"1e-400", ""},
		{"9007199254740991.0", "9007199254740991"},
		{"9007199254740993.0", ""}, // read as the float 2^53
		{"9007199254740992.0", ""},
		{"1e300", ""},
	} {
		seq := ts.db.Seq()
		r, err := ts.c.Do("POST", "/query", `{"query":"put nums {n: $1}","params":[`+tt.param+`]}`, nil)
		if err != nil {
			t.Fatal(err)
		}
		if r.Status == 200 {
			r = ts.c.MustQuery("get nums select n order id desc limit 1")
		}
		if tt.stored == "" {
			if r.Status != 400 || ts.db.Seq() != seq {
				t.Errorf("%s: %d %s, want a refusal", tt.param, r.Status, r.Body)
			}
			continue
		}
		if r.Status != 200 || strings.TrimSpace(string(r.Body)) != `[{"n":`+tt.stored+`}]` {
			t.Errorf("%s: %d %s, want %s", tt.param, r.Status, r.Body, tt.stored)
		}
	}
}
