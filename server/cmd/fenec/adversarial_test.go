package main

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/fenecdb/fenec/server/httpapi/apitest"
)

// The adversarial suite: hostile or careless clients against a real
// `fenec serve` (docs/reliability.md, "Adversarial clients"). The probes
// run in every `go test`; the loads only under FENEC_ADVERSARIAL=1
// (make test-adversarial).

// rawExchange writes raw on a new connection to p and returns what the
// server sends until it closes the connection or d passes.
func rawExchange(t *testing.T, p *apitest.Process, raw string, d time.Duration) string {
	t.Helper()
	c, err := net.Dial("tcp", strings.TrimPrefix(p.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	io.WriteString(c, raw)
	c.SetReadDeadline(time.Now().Add(d))
	out, _ := io.ReadAll(c)
	return string(out)
}

// statusOf reads the first answer's status and body off raw.
func statusOf(raw string) (int, string) {
	res, err := http.ReadResponse(bufio.NewReader(strings.NewReader(raw)), nil)
	if err != nil {
		return 0, raw
	}
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(b)
}

// TestAdversarialProbes: one hostile request of each kind, each refused
// with its code and changing nothing.
func TestAdversarialProbes(t *testing.T) {
	p, c := start(t, "--file", ":memory:", "--max-body", "4194304", "--cors-origin", "https://app.example.com")
	c.MustQuery("create collection nums (n int)")
	c.MustQuery("put nums {n: 1}")
	_, port, _ := net.SplitHostPort(strings.TrimPrefix(p.URL, "http://"))
	drop := `{"statements":[{"query":"drop collection if exists nums"}]}`
	post := func(host string, extra ...string) string {
		return "POST /batch HTTP/1.1\r\nHost: " + host + "\r\nConnection: close\r\n" + strings.Join(extra, "") +
			"Content-Length: " + strconv.Itoa(len(drop)) + "\r\n\r\n" + drop
	}
	for _, tt := range []struct {
		name, raw string
		status    int
		code      string
	}{
		{"a form post of another origin", post("127.0.0.1:"+port, "Origin: https://evil.example\r\n", "Content-Type: application/x-www-form-urlencoded\r\n"), 403, "origin_not_allowed"},
		{"a beacon of another origin", post("localhost:"+port, "Origin: https://evil.example\r\n", "Content-Type: text/plain;charset=UTF-8\r\n"), 403, "origin_not_allowed"},
		{"an opaque origin", post("localhost", "Origin: null\r\n"), 403, "origin_not_allowed"},
		{"a rebound name", post("evil.example:"+port, "Origin: http://evil.example:"+port+"\r\n"), 421, "host_not_allowed"},
		{"a rebound name, no Origin", post("evil.example"), 421, "host_not_allowed"},
		{"two Authorization headers", post("localhost", "Authorization: Bearer a\r\n", "Authorization: Bearer b\r\n"), 400, "bad_request"},
		{"a body over --max-body", "POST /query HTTP/1.1\r\nHost: localhost\r\nContent-Length: 1000000000\r\n\r\n", 413, "too_large"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			start := time.Now()
			out := rawExchange(t, p, tt.raw, 5*time.Second)
			status, body := statusOf(out)
			if status != tt.status || !strings.Contains(body, `"code":"`+tt.code+`"`) || !strings.Contains(out, "X-Content-Type-Options: nosniff") {
				t.Errorf("%d %q", status, out)
			}
			if tt.status == 413 && time.Since(start) > 3*time.Second {
				t.Errorf("413 after %v: the server waited for the body", time.Since(start))
			}
			if got := string(c.MustQuery("get nums count").Body); !strings.Contains(got, `"count":1`) {
				t.Fatalf("nums changed: %s", got)
			}
		})
	}
	// The server's own origin (its console's page) is answered.
	same := rawExchange(t, p, "POST /query HTTP/1.1\r\nHost: localhost:"+port+"\r\nOrigin: http://localhost:"+port+
		"\r\nConnection: close\r\nContent-Length: 26\r\n\r\n"+`{"query":"get nums count"}`, 5*time.Second)
	if status, body := statusOf(same); status != 200 {
		t.Errorf("the server's own origin: %d %s", status, body)
	}
	// Parameters past an int's range, or floats that may not be the
	// integer written, are refused; an integral float below 2^53 is taken.
	for _, tt := range []struct {
		param  string
		status int
	}{{"-9223372036854775809", 400}, {"9223372036854775808", 400}, {"1e-400", 400}, {"1e300", 400}, {"2.5", 400}, {"2.0", 200}, {"1e3", 200}} {
		r, err := c.Do("POST", "/query", `{"query":"put nums {n: $1}","params":[`+tt.param+`]}`, nil)
		if err != nil || r.Status != tt.status {
			t.Errorf("param %s: %v %v, want %d", tt.param, err, r, tt.status)
		}
	}
	// An error echoing a megabyte identifier echoes its start.
	r, err := c.Query("get " + strings.Repeat("x", 1<<20))
	if err != nil || r.Status != 404 || len(r.Body) > 1000 || !strings.Contains(string(r.Body), "…") {
		t.Errorf("a 1 MB identifier: %v %d, %d bytes", err, r.Status, len(r.Body))
	}
}

// TestAdversarialHostWithToken: with a token, any Host is answered, and
// --host adds a name to a token-less server's.
func TestAdversarialHostWithToken(t *testing.T) {
	p, _ := start(t, "--file", ":memory:", "--token", "s3cret")
	if status, body := statusOf(rawExchange(t, p, "GET /collections HTTP/1.1\r\nHost: db.example.com\r\nAuthorization: Bearer s3cret\r\nConnection: close\r\n\r\n", 5*time.Second)); status != 200 {
		t.Errorf("with a token: %d %s", status, body)
	}
	p, _ = start(t, "--file", ":memory:", "--host", "db.internal")
	for host, want := range map[string]int{"db.internal:8080": 200, "DB.internal": 200, "other.internal": 421} {
		if status, body := statusOf(rawExchange(t, p, "GET /_health HTTP/1.1\r\nHost: "+host+"\r\nConnection: close\r\n\r\n", 5*time.Second)); status != want {
			t.Errorf("--host db.internal, Host %s: %d %s", host, status, body)
		}
	}
}

// TestAdversarialFDLimit: a server out of file descriptors answers the
// clients past them 503 too_many_connections at once and closes their
// connections, rather than leave them in the listen queue; it serves
// again once clients go.
func TestAdversarialFDLimit(t *testing.T) {
	if _, err := os.Stat("/bin/sh"); err != nil {
		t.Skip("no /bin/sh")
	}
	wrapper := filepath.Join(t.TempDir(), "fenec-64fds")
	// The shell sets both limits: the Go runtime raises its soft limit to
	// the hard one as it starts.
	script := fmt.Sprintf("#!/bin/sh\nulimit -n 64 || exit 1\nexec %q \"$@\"\n", bin)
	if err := os.WriteFile(wrapper, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	p := apitest.Start(t, wrapper, "--file", ":memory:")
	addr := strings.TrimPrefix(p.URL, "http://")
	var conns []net.Conn
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	ok, refused := 0, 0
	for i := 0; i < 100 && refused < 5; i++ {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, c)
		io.WriteString(c, "GET /_health HTTP/1.1\r\nHost: localhost\r\n\r\n")
		c.SetReadDeadline(time.Now().Add(5 * time.Second))
		res, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Fatalf("connection %d: no answer within 5 s (%v): left hanging", i, err)
		}
		b, _ := io.ReadAll(io.LimitReader(res.Body, 4096))
		switch {
		case res.StatusCode == 200:
			ok++
		case res.StatusCode == 503 && strings.Contains(string(b), `"too_many_connections"`) && res.Close:
			refused++
			if _, err := c.Read(make([]byte, 1)); err == nil {
				t.Errorf("connection %d refused but not closed", i)
			}
		default:
			t.Fatalf("connection %d: %d %s", i, res.StatusCode, b)
		}
	}
	if refused == 0 || ok == 0 {
		t.Fatalf("%d answered, %d refused: the fd limit was not reached", ok, refused)
	}
	t.Logf("64 file descriptors: %d connections served, then refused", ok)
	for _, c := range conns {
		c.Close()
	}
	conns = nil
	c := &apitest.Client{T: t, Base: p.URL, HTTP: &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}}
	deadline := time.Now().Add(10 * time.Second)
	for {
		r, err := c.Do("GET", "/_metrics", nil, nil)
		if err == nil && r.Status == 200 {
			if !regexp.MustCompile(`fenec_http_connections_refused_total\{reason="fd_limit"\} [1-9]`).Match(r.Body) {
				t.Errorf("the refusals are not counted: %s", regexp.MustCompile(`(?m)^fenec_http_connections_refused.*$`).FindAll(r.Body, -1))
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the server does not serve again after its clients left: %v %v", err, r)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestAdversarialMaxConns: --max-conns-per-addr refuses one address's
// connections past it at once, counted in the metrics.
func TestAdversarialMaxConns(t *testing.T) {
	p, _ := start(t, "--file", ":memory:", "--max-conns-per-addr", "4")
	addr := strings.TrimPrefix(p.URL, "http://")
	var held []net.Conn
	defer func() {
		for _, c := range held {
			c.Close()
		}
	}()
	for range 4 {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, c)
	}
	status, body := statusOf(rawExchange(t, p, "GET /_health HTTP/1.1\r\nHost: localhost\r\n\r\n", 5*time.Second))
	if status != 503 || !strings.Contains(body, "--max-conns-per-addr") {
		t.Fatalf("a fifth connection: %d %s", status, body)
	}
}

// adversarial skips a heavy test unless FENEC_ADVERSARIAL=1.
func adversarial(t *testing.T) {
	if os.Getenv("FENEC_ADVERSARIAL") != "1" {
		t.Skip("a load: FENEC_ADVERSARIAL=1 (make test-adversarial)")
	}
}

// TestAdversarialWriters: 200 keep-alive writers for 20 s (FENEC_WRITERS,
// FENEC_WRITE_SECONDS), under --sync always: no request fails, and every
// write answered is in the collection after.
func TestAdversarialWriters(t *testing.T) {
	adversarial(t)
	writers, seconds := envInt("FENEC_WRITERS", 200), envInt("FENEC_WRITE_SECONDS", 20)
	_, c := start(t, "--file", filepath.Join(t.TempDir(), "w.db"))
	c.MustQuery("create collection w (writer int, i int)")
	tr := &http.Transport{MaxIdleConnsPerHost: writers, MaxConnsPerHost: writers}
	hc := &http.Client{Transport: tr, Timeout: 30 * time.Second}
	var written, failed atomic.Int64
	var firstErr atomic.Value
	stop := time.Now().Add(time.Duration(seconds) * time.Second)
	var wg sync.WaitGroup
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; time.Now().Before(stop) && i < 1_000_000; i++ {
				body := fmt.Sprintf(`{"query":"put w {writer: $1, i: $2}","params":[%d,%d]}`, w, i)
				res, err := hc.Post(c.Base+"/query", "application/json", strings.NewReader(body))
				if err == nil {
					b, _ := io.ReadAll(res.Body)
					res.Body.Close()
					if res.StatusCode != 200 {
						err = fmt.Errorf("%d %s", res.StatusCode, b)
					}
				}
				if err != nil {
					failed.Add(1)
					firstErr.CompareAndSwap(nil, err.Error())
					continue
				}
				written.Add(1)
			}
		}()
	}
	wg.Wait()
	var counted []struct{ Count int64 }
	c.MustQuery("get w count").JSON(t, &counted)
	t.Logf("%d keep-alive writers, %d s: %d writes answered (%.0f/s), %d failed; %d in the collection after",
		writers, seconds, written.Load(), float64(written.Load())/float64(seconds), failed.Load(), counted[0].Count)
	if failed.Load() != 0 {
		t.Errorf("%d writes failed, the first: %v", failed.Load(), firstErr.Load())
	}
	if counted[0].Count != written.Load() {
		t.Errorf("%d writes answered, %d in the collection", written.Load(), counted[0].Count)
	}
}

// TestAdversarialSlowloris: 3 000 connections (FENEC_SLOWLORIS) each send
// part of a head and hold it, while a client asks /_health one request
// after another: its p99 stays under 20 ms, and the server closes the
// held connections at its header timeout (10 s).
func TestAdversarialSlowloris(t *testing.T) {
	adversarial(t)
	n := envInt("FENEC_SLOWLORIS", 3000)
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err == nil && lim.Cur < lim.Max {
		lim.Cur = lim.Max
		syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim)
	}
	if syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); lim.Cur < uint64(n+200) {
		t.Skipf("this process may open %d files; %d connections need more", lim.Cur, n)
	}
	p, c := start(t, "--file", ":memory:")
	addr := strings.TrimPrefix(p.URL, "http://")
	conns := make([]net.Conn, 0, n)
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	opened := time.Now()
	for range n {
		sc, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatalf("after %d connections: %v", len(conns), err)
		}
		io.WriteString(sc, "GET /_health HTTP/1.1\r\nHost: localhost\r\nX-Slow: ")
		conns = append(conns, sc)
	}
	t.Logf("%d slow connections opened in %v", n, time.Since(opened))
	hc := &http.Client{Timeout: 5 * time.Second}
	var took []time.Duration
	// Within the header timeout of the first connection's head.
	for time.Since(opened) < 8*time.Second && len(took) < 2000 {
		s := time.Now()
		res, err := hc.Get(c.Base + "/_health")
		if err != nil {
			t.Fatalf("/_health among the slow connections: %v", err)
		}
		io.Copy(io.Discard, res.Body)
		res.Body.Close()
		if res.StatusCode != 200 {
			t.Fatalf("/_health: %d", res.StatusCode)
		}
		took = append(took, time.Since(s))
	}
	slices.Sort(took)
	p50, p99, max := took[len(took)/2], took[len(took)*99/100], took[len(took)-1]
	t.Logf("/_health with %d slow connections held: %d requests, p50 %v, p99 %v, max %v", n, len(took), p50, p99, max)
	if p99 > 20*time.Millisecond {
		t.Errorf("/_health p99 %v with %d slow connections held, want under 20 ms", p99, n)
	}
	// The server closes them at its header timeout (10 s from their first bytes).
	deadline := time.Now().Add(30 * time.Second)
	closed := 0
	for _, sc := range conns {
		sc.SetReadDeadline(deadline)
		if _, err := sc.Read(make([]byte, 1)); err != nil && !isTimeoutErr(err) {
			closed++
		}
	}
	if closed != n {
		t.Errorf("%d of %d slow connections closed by the server", closed, n)
	}
}

func isTimeoutErr(err error) bool {
	ne, ok := err.(net.Error)
	return ok && ne.Timeout()
}

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}
