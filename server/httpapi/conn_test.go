package httpapi

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log"
	"log/slog"
	"net"
	"net/http"
	"reflect"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"
)

// connTest is a Server served two ways on loopback: by HTTPServer (as
// fenec serve serves it) and by net/http alone (behind GuardFraming, as
// before HTTPServer), to compare their answers.
type connTest struct {
	*testServer
	srv        *HTTPServer
	lean, bare string // the two addresses
}

func newConnTest(t *testing.T, timeouts func(*http.Server), edits ...func(*HTTPServer)) *connTest {
	t.Helper()
	ts := newTestServer(t, ":memory:", nil)
	fallback := &http.Server{Handler: ts.Server, ReadHeaderTimeout: ReadHeaderTimeout, ReadTimeout: ReadTimeout,
		WriteTimeout: WriteTimeout, IdleTimeout: IdleTimeout, ErrorLog: slog.NewLogLogger(slog.DiscardHandler, slog.LevelWarn)}
	if timeouts != nil {
		timeouts(fallback)
	}
	srv := newHTTPServer(ts.Server, fallback)
	for _, edit := range edits {
		edit(srv)
	}
	ln := mustListen(t)
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	bareLn := mustListen(t)
	bare := &http.Server{Handler: ts.Server, ErrorLog: fallback.ErrorLog}
	go bare.Serve(GuardFraming(bareLn))
	t.Cleanup(func() {
		srv.Close()
		bare.Close()
		if err := <-served; err != http.ErrServerClosed {
			t.Errorf("Serve: %v", err)
		}
	})
	return &connTest{testServer: ts, srv: srv, lean: ln.Addr().String(), bare: bareLn.Addr().String()}
}

// exchange writes raw on a new connection to addr, half-closes it when
// closeWrite, and reads everything until the server closes or the reads
// time out.
func exchange(t *testing.T, addr, raw string, closeWrite bool) string {
	t.Helper()
	c := mustDial(t, addr)
	defer c.Close()
	if _, err := io.WriteString(c, raw); err != nil {
		t.Fatal(err)
	}
	if closeWrite {
		c.(*net.TCPConn).CloseWrite()
	}
	c.SetReadDeadline(time.Now().Add(2 * time.Second))
	out, _ := io.ReadAll(c)
	return string(out)
}

// answer is an answer read off a connection, its body read.
type answer struct {
	*http.Response
	body string
}

// answersIn parses the answers in raw, each to a request with the method
// of methods (HEAD answers have no body).
func answersIn(t *testing.T, raw string, methods ...string) []answer {
	t.Helper()
	out, err := parseAnswers(raw, methods)
	if err != nil {
		t.Fatalf("%q: %v", raw, err)
	}
	return out
}

func parseAnswers(raw string, methods []string) ([]answer, error) {
	br := bufio.NewReader(strings.NewReader(raw))
	var out []answer
	for _, m := range methods {
		res, err := http.ReadResponse(br, &http.Request{Method: m})
		if err != nil {
			return nil, fmt.Errorf("answer %d: %v", len(out), err)
		}
		b, err := io.ReadAll(res.Body)
		if err != nil {
			return nil, fmt.Errorf("answer %d body: %v", len(out), err)
		}
		out = append(out, answer{res, string(b)})
	}
	if rest, _ := io.ReadAll(br); len(rest) > 0 {
		return nil, fmt.Errorf("more than %d answers: %q", len(methods), rest)
	}
	return out, nil
}

// exchangeAnswers writes raw on a new connection to addr and reads until
// it holds one answer to each of methods, or the server closes, or 2 s
// pass. The connection stays open for writes meanwhile: net/http takes a
// client's half-close for its going away.
func exchangeAnswers(t *testing.T, addr, raw string, methods ...string) []answer {
	t.Helper()
	c := mustDial(t, addr)
	defer c.Close()
	if _, err := io.WriteString(c, raw); err != nil {
		t.Fatal(err)
	}
	c.SetReadDeadline(time.Now().Add(2 * time.Second))
	var got []byte
	buf := make([]byte, 64<<10)
	for {
		n, err := c.Read(buf)
		got = append(got, buf[:n]...)
		if out, perr := parseAnswers(string(got), methods); perr == nil {
			return out
		}
		if err != nil {
			return answersIn(t, string(got), methods...)
		}
	}
}

func post(path, body string, extra ...string) string {
	return "POST " + path + " HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n" + strings.Join(extra, "") +
		"Content-Length: " + strconv.Itoa(len(body)) + "\r\n\r\n" + body
}

const health = "GET /_health HTTP/1.1\r\nHost: localhost\r\n\r\n"

// TestConnPipelined: requests sent at once on one connection are
// answered in order, each read by HTTPServer itself.
func TestConnPipelined(t *testing.T) {
	ct := newConnTest(t, nil)
	ct.c.MustQuery("create collection jobs (n int)")
	raw := post("/query", `{"query":"put jobs {n: 1}"}`) + health +
		post("/query", `{"query":"put jobs {n: 2}"}`) + "\r\n" + // a stray CRLF after a POST, as net/http allows
		post("/query", `{"query":"get jobs count"}`, "Connection: close\r\n")
	rs := answersIn(t, exchange(t, ct.lean, raw, false), "POST", "GET", "POST", "POST")
	want := []string{`{"affected":1}`, `{"ok":true`, `{"affected":1}`, `[{"count":2}]`}
	for i, r := range rs {
		if r.StatusCode != 200 || !strings.HasPrefix(r.body, want[i]) || r.Header.Get("Date") == "" || r.ContentLength < 0 {
			t.Errorf("answer %d: %d %v %q", i, r.StatusCode, r.Header, r.body)
		}
	}
	if !rs[3].Close {
		t.Error("the last answer, to Connection: close, does not say it closes")
	}
	// A CRLF after a POST and then the connection's end: no answer to the
	// CRLF (net/http drops it, then sees the end).
	rs = answersIn(t, exchange(t, ct.lean, post("/query", `{"query":"get jobs count"}`)+"\r\n", true), "POST")
	if rs[0].StatusCode != 200 {
		t.Errorf("POST then CRLF: %d %q", rs[0].StatusCode, rs[0].body)
	}
	if n := ct.srv.handoffs.Load(); n != 0 {
		t.Errorf("%d connections handed to net/http", n)
	}
}

// TestConnHandOff: a connection that sends a request outside the subset
// is answered from then on by net/http, exactly as net/http alone answers
// the same bytes.
func TestConnHandOff(t *testing.T) {
	ct := newConnTest(t, nil)
	ct.c.MustQuery("create collection jobs (n int)")
	chunked := "POST /query HTTP/1.1\r\nHost: localhost\r\nTransfer-Encoding: chunked\r\n\r\n" +
		"1a\r\n{\"query\":\"get jobs count\"}\r\n0\r\n\r\n"
	cases := []struct {
		name, raw string
		methods   []string
	}{
		{"chunked", chunked + health, []string{"POST", "GET"}},
		{"expect", "POST /query HTTP/1.1\r\nHost: localhost\r\nExpect: 100-continue\r\nContent-Length: 26\r\n\r\n{\"query\":\"get jobs count\"}", []string{"POST", "POST"}},
		{"http/1.0", "GET /_health HTTP/1.0\r\n\r\n", []string{"GET"}},
		{"no host", "GET /_health HTTP/1.1\r\n\r\n", []string{"GET"}},
		{"bare LF", "GET /_health HTTP/1.1\nHost: x\n\n" + health, []string{"GET", "GET"}},
		{"obs-fold", "GET /_health HTTP/1.1\r\nHost: localhost\r\nX-A: a\r\n b\r\n\r\n", []string{"GET"}},
		{"space before colon", "GET /_health HTTP/1.1\r\nHost : x\r\n\r\n", []string{"GET"}},
		{"two lengths", "POST /query HTTP/1.1\r\nHost: localhost\r\nContent-Length: 26\r\nContent-Length: 26\r\n\r\n{\"query\":\"get jobs count\"}", []string{"POST"}},
		{"odd length", "POST /query HTTP/1.1\r\nHost: localhost\r\nContent-Length: +26\r\n\r\n{\"query\":\"get jobs count\"}", []string{"POST"}},
		{"bad target", "GET /_health%zz HTTP/1.1\r\nHost: localhost\r\n\r\n", []string{"GET"}},
		{"absolute target", "GET http://x/_health HTTP/1.1\r\nHost: y\r\n\r\n", []string{"GET"}},
		{"odd method", "BREW /_health HTTP/1.1\r\nHost: localhost\r\n\r\n", []string{"BREW"}},
		{"upgrade", "GET /_health HTTP/1.1\r\nHost: localhost\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n", []string{"GET"}},
		{"utf-8 value", "GET /_health HTTP/1.1\r\nHost: localhost\r\nX-Name: é\r\n\r\n", []string{"GET"}},
		{"big head", "GET /_health HTTP/1.1\r\nHost: localhost\r\nX-Big: " + strings.Repeat("a", 6000) + "\r\n\r\n", []string{"GET"}},
		{"too big head", "GET /_health HTTP/1.1\r\nHost: localhost\r\nX-Big: " + strings.Repeat("a", 1<<20+8192) + "\r\n\r\n", []string{"GET"}},
		{"garbage", "hello\r\n\r\n", []string{"GET"}},
		{"body past its length", post("/query", `{"query":"get jobs count"}`) + "xyz\r\n\r\n", []string{"POST", "GET"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			before := ct.srv.handoffs.Load()
			// A plain request first, so that the switch comes mid-way.
			first := health
			if tc.name == "too big head" {
				first = ""
			}
			methods := tc.methods
			if first != "" {
				methods = append([]string{"GET"}, methods...)
			}
			lean := exchangeAnswers(t, ct.lean, first+tc.raw, methods...)
			bare := exchangeAnswers(t, ct.bare, tc.raw, tc.methods...)
			lean = lean[len(lean)-len(bare):]
			for i := range bare {
				if lean[i].Status != bare[i].Status || lean[i].body != bare[i].body {
					t.Errorf("answer %d: HTTPServer %q %q, net/http %q %q", i, lean[i].Status, lean[i].body, bare[i].Status, bare[i].body)
				}
			}
			if ct.srv.handoffs.Load() != before+1 {
				t.Errorf("handed off %d connections, want 1", ct.srv.handoffs.Load()-before)
			}
		})
	}
}

// TestConnAmbiguousFraming: Content-Length with Transfer-Encoding, after a
// plain request on the connection, is answered GuardFraming's 400 and the
// connection closed.
func TestConnAmbiguousFraming(t *testing.T) {
	ct := newConnTest(t, nil)
	raw := "POST /query HTTP/1.1\r\nHost: localhost\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n"
	out := exchange(t, ct.lean, health+raw, false)
	first := answersIn(t, out[:strings.Index(out, "HTTP/1.1 400")], "GET")
	if first[0].StatusCode != 200 || !strings.HasSuffix(out, ambiguousFramingAnswer) {
		t.Fatalf("%q", out)
	}
	if out := exchange(t, ct.lean, raw, false); out != ambiguousFramingAnswer {
		t.Fatalf("alone: %q", out)
	}
}

// TestConnBodyShort: a body shorter than its Content-Length, the client
// then gone, runs nothing.
func TestConnBodyShort(t *testing.T) {
	ct := newConnTest(t, nil)
	ct.c.MustQuery("create collection jobs (n int)")
	seq := ct.db.Seq()
	raw := post("/query", `{"query":"put jobs {n: 1}"}`)
	exchange(t, ct.lean, raw[:len(raw)-3], true)
	time.Sleep(50 * time.Millisecond)
	if ct.db.Seq() != seq {
		t.Fatal("a request whose body was cut short ran")
	}
}

// TestConnHEAD: HEAD is answered with GET's head and no body.
func TestConnHEAD(t *testing.T) {
	ct := newConnTest(t, nil)
	rs := exchangeAnswers(t, ct.lean, strings.Replace(health, "GET", "HEAD", 1)+health, "HEAD", "GET")
	if rs[0].StatusCode != 200 || rs[0].body != "" || rs[0].ContentLength != rs[1].ContentLength || rs[0].Header.Get("Content-Type") != rs[1].Header.Get("Content-Type") {
		t.Fatalf("HEAD %v %d, GET %v %d", rs[0].Header, rs[0].ContentLength, rs[1].Header, rs[1].ContentLength)
	}
	// The console's files: the same head as net/http's (its Date aside).
	console := "HEAD /console/ HTTP/1.1\r\nHost: localhost\r\n\r\nGET /console/ HTTP/1.1\r\nHost: localhost\r\n\r\n"
	lean := exchangeAnswers(t, ct.lean, console, "HEAD", "GET")
	bare := exchangeAnswers(t, ct.bare, console, "HEAD", "GET")
	for i := range lean {
		// net/http sends a body past 2 kB chunked: HTTPServer with its length.
		for _, h := range []http.Header{lean[i].Header, bare[i].Header} {
			h.Del("Date")
			h.Del("Content-Length")
		}
		if lean[i].Status != bare[i].Status || !reflect.DeepEqual(lean[i].Header, bare[i].Header) || lean[i].body != bare[i].body {
			t.Errorf("%s /console/: HTTPServer %s %v, net/http %s %v", lean[i].Request.Method, lean[i].Status, lean[i].Header, bare[i].Status, bare[i].Header)
		}
	}
	if !strings.HasPrefix(lean[1].Header.Get("Content-Type"), "text/html") || lean[0].body != "" || len(lean[1].body) == 0 {
		t.Errorf("/console/: %v %q", lean[1].Header, lean[1].body)
	}
}

// TestConnSlowloris: a head sent too slowly is cut off at the header
// timeout, without an answer (as net/http).
func TestConnSlowloris(t *testing.T) {
	ct := newConnTest(t, func(s *http.Server) { s.ReadHeaderTimeout = 300 * time.Millisecond })
	for _, first := range []string{"", health} {
		c := mustDial(t, ct.lean)
		defer c.Close()
		io.WriteString(c, first)
		if first != "" {
			answersIn(t, readFor(c, 200*time.Millisecond), "GET")
		}
		start := time.Now()
		closed := make(chan string, 1)
		go func() {
			c.SetReadDeadline(time.Now().Add(5 * time.Second))
			b, _ := io.ReadAll(c)
			closed <- string(b)
		}()
		// A byte every 50 ms: the head would take 2 s.
		for _, b := range []byte("GET /_health HTTP/1.1\r\nHost: localhost\r\nX-Slow: " + strings.Repeat("a", 10)) {
			if _, err := c.Write([]byte{b}); err != nil {
				break
			}
			time.Sleep(50 * time.Millisecond)
		}
		out := <-closed
		if took := time.Since(start); out != "" || took > 1500*time.Millisecond {
			t.Fatalf("after %q: slow head answered %q, closed after %v", first, out, took)
		}
	}
}

// readFor reads what c sends within d.
func readFor(c net.Conn, d time.Duration) string {
	c.SetReadDeadline(time.Now().Add(d))
	var out []byte
	buf := make([]byte, 4096)
	for {
		n, err := c.Read(buf)
		out = append(out, buf[:n]...)
		if err != nil {
			c.SetReadDeadline(time.Time{})
			return string(out)
		}
	}
}

// TestConnShutdown: Shutdown closes an idle connection at once, lets an
// active one finish its request (answered with Connection: close), and
// returns once it has.
func TestConnShutdown(t *testing.T) {
	ct := newConnTest(t, nil)
	ct.c.MustQuery("create collection jobs (run_at timestamp @sorted, owner text)")
	idle := mustDial(t, ct.lean)
	defer idle.Close()
	io.WriteString(idle, health)
	answersIn(t, readFor(idle, 200*time.Millisecond), "GET")
	active := mustDial(t, ct.lean)
	defer active.Close()
	// The active request is held 2 s: the idle connection is closed in
	// the first half of it, and Shutdown has not returned 100 ms later,
	// while it is still in flight — bounds that follow from the request,
	// not from how fast a loaded machine goes.
	const held = 2 * time.Second
	io.WriteString(active, post("/query", `{"query":"set jobs {owner: 'w'} where run_at <= now() order run_at limit 1 returning id","params":[]}`, fmt.Sprintf("Fenec-Wait: %d\r\n", held.Milliseconds())))
	awaitHeldIn(t, ct.testServer, 1)
	start := time.Now()
	shut := make(chan error, 1)
	go func() { shut <- ct.srv.Shutdown(context.Background()) }()
	if out := readFor(idle, 2*held); out != "" || time.Since(start) >= held/2 {
		t.Fatalf("idle connection: %q after %v, not closed while the active request was held", out, time.Since(start))
	}
	select {
	case err := <-shut:
		t.Fatalf("Shutdown returned %v with a request in flight", err)
	case <-time.After(100 * time.Millisecond):
	}
	rs := answersIn(t, readFor(active, 2*held), "POST")
	if rs[0].StatusCode != 200 || rs[0].body != "[]\n" || !rs[0].Close {
		t.Fatalf("active request: %d %q close %v", rs[0].StatusCode, rs[0].body, rs[0].Close)
	}
	if err := <-shut; err != nil {
		t.Fatal(err)
	}
	if _, err := net.DialTimeout("tcp", ct.lean, time.Second); err == nil {
		t.Fatal("still accepting after Shutdown")
	}
}

func awaitHeldIn(t *testing.T, ts *testServer, n int) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); heldIn(t, ts) != n; time.Sleep(2 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("held claims: %d, want %d", heldIn(t, ts), n)
		}
	}
}

// heldIn reads fenec_held_claims from /_metrics.
func heldIn(t *testing.T, ts *testServer) int {
	r, err := ts.c.Do("GET", "/_metrics", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(r.Body), "\n") {
		if v, ok := strings.CutPrefix(line, "fenec_held_claims "); ok {
			n, _ := strconv.Atoi(v)
			return n
		}
	}
	return -1
}

// TestConnHeldClaimGone: a held claim whose client closes its connection
// stops holding at once — its own watch, not the one of requests running
// long, which is put off here — and takes no job put after.
func TestConnHeldClaimGone(t *testing.T) {
	ct := newConnTest(t, nil, func(s *HTTPServer) { s.watchAfter = time.Hour })
	ct.c.MustQuery("create collection jobs (run_at timestamp @sorted, owner text)")
	c := mustDial(t, ct.lean)
	io.WriteString(c, post("/query", `{"query":"set jobs {owner: 'gone'} where run_at <= now() order run_at limit 1 returning id","params":[]}`, "Fenec-Wait: 30000\r\n"))
	awaitHeldIn(t, ct.testServer, 1)
	start := time.Now()
	c.Close()
	awaitHeldIn(t, ct.testServer, 0)
	if took := time.Since(start); took > time.Second {
		t.Fatalf("the held claim of a gone client was dropped after %v", took)
	}
	ct.c.MustQuery("put jobs {run_at: now()}")
	if r := ct.c.MustQuery("get jobs select owner"); string(r.Body) != "[{\"owner\":null}]\n" {
		t.Fatalf("the job: %s", r.Body)
	}
}

// TestConnHeldClaimsInTurn: held claims sent one after another on one
// connection, as a worker's loop does, are each answered with the job a
// put woke them for — the watch of each stopped after its answer is out,
// before the next head is read — and the watch of the last still drops it
// when its client goes away.
func TestConnHeldClaimsInTurn(t *testing.T) {
	ct := newConnTest(t, nil, func(s *HTTPServer) { s.watchAfter = time.Hour })
	ct.c.MustQuery("create collection jobs (run_at timestamp @sorted, owner text)")
	c := mustDial(t, ct.lean)
	br := bufio.NewReader(c)
	claim := post("/query", `{"query":"set jobs {owner: 'w', run_at: now() + 30000} where run_at <= now() order run_at limit 1 returning id","params":[]}`, "Fenec-Wait: 30000\r\n")
	for i := 1; i <= 3; i++ {
		io.WriteString(c, claim)
		awaitHeldIn(t, ct.testServer, 1)
		ct.c.MustQuery("put jobs {run_at: now()}")
		c.SetReadDeadline(time.Now().Add(2 * time.Second))
		res, err := http.ReadResponse(br, &http.Request{Method: "POST"})
		if err != nil {
			t.Fatalf("claim %d: %v", i, err)
		}
		body, _ := io.ReadAll(res.Body)
		if want := fmt.Sprintf("[{\"id\":%d}]\n", i); res.StatusCode != 200 || string(body) != want {
			t.Fatalf("claim %d: %d %q, want %q", i, res.StatusCode, body, want)
		}
	}
	io.WriteString(c, claim)
	awaitHeldIn(t, ct.testServer, 1)
	c.Close()
	awaitHeldIn(t, ct.testServer, 0)
	ct.c.MustQuery("put jobs {run_at: now()}")
	if r := ct.c.MustQuery("get jobs where run_at <= now() count"); string(r.Body) != "[{\"count\":1}]\n" {
		t.Fatalf("the job put after the client went away: %s", r.Body)
	}
}

// TestConnHeldClaimPipelined: a request pipelined behind a held claim is
// not taken for the client's end, and is answered after it.
func TestConnHeldClaimPipelined(t *testing.T) {
	ct := newConnTest(t, nil)
	ct.c.MustQuery("create collection jobs (run_at timestamp @sorted, owner text)")
	c := mustDial(t, ct.lean)
	defer c.Close()
	io.WriteString(c, post("/query", `{"query":"set jobs {owner: 'w'} where run_at <= now() order run_at limit 1 returning id","params":[]}`, "Fenec-Wait: 30000\r\n"))
	awaitHeldIn(t, ct.testServer, 1)
	io.WriteString(c, health)
	time.Sleep(50 * time.Millisecond)
	if heldIn(t, ct.testServer) != 1 {
		t.Fatal("a pipelined request ended the held claim")
	}
	ct.c.MustQuery("put jobs {run_at: now()}")
	rs := answersIn(t, readFor(c, time.Second), "POST", "GET")
	if rs[0].body != "[{\"id\":1}]\n" || rs[1].StatusCode != 200 {
		t.Fatalf("%q then %d %q", rs[0].body, rs[1].StatusCode, rs[1].body)
	}
}

// TestConnPanic: a panic past the handler's own recovery ends the
// connection, not the server.
func TestConnPanic(t *testing.T) {
	srv := newHTTPServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/panic" {
			panic("boom")
		}
		w.Write([]byte("ok"))
	}), &http.Server{ErrorLog: log.New(t.Output(), "", 0)})
	ln := serveOn(t, srv)
	if out := exchange(t, ln.Addr().String(), "GET /panic HTTP/1.1\r\nHost: localhost\r\n\r\n", false); out != "" {
		t.Fatalf("answered %q", out)
	}
	rs := exchangeAnswers(t, ln.Addr().String(), "GET / HTTP/1.1\r\nHost: localhost\r\n\r\n", "GET")
	if rs[0].body != "ok" || rs[0].Header.Get("Content-Type") != "text/plain; charset=utf-8" {
		t.Fatalf("after a panic: %q %v", rs[0].body, rs[0].Header)
	}
}

// TestConnLargeAnswer: an answer past what is held is sent as it comes —
// with the handler's Content-Length, else chunked — the same bytes as
// net/http's, and the connection serves on.
func TestConnLargeAnswer(t *testing.T) {
	ct := newConnTest(t, nil)
	ct.c.MustQuery("create collection big (s text)")
	ct.c.MustQuery(`put big [` + strings.Repeat(`{s: "`+strings.Repeat("x", 200)+`"},`, 999) + `{s: "y"}]`)
	raw := post("/query", `{"query":"get big select s"}`) + health
	lean := exchangeAnswers(t, ct.lean, raw, "POST", "GET")
	bare := exchangeAnswers(t, ct.bare, raw, "POST", "GET")
	if len(lean[0].body) < maxBuffered || lean[0].body != bare[0].body || lean[0].ContentLength != int64(len(lean[0].body)) || lean[1].StatusCode != 200 {
		t.Fatalf("%d bytes (net/http: %d), length %d, then %d", len(lean[0].body), len(bare[0].body), lean[0].ContentLength, lean[1].StatusCode)
	}

	piece := strings.Repeat("z", 40<<10)
	srv := newHTTPServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/flush" {
			io.WriteString(w, "a")
			w.(http.Flusher).Flush()
			io.WriteString(w, "b")
			return
		}
		for range 3 {
			io.WriteString(w, piece)
		}
	}), &http.Server{ErrorLog: log.New(t.Output(), "", 0)})
	ln := serveOn(t, srv)
	rs := exchangeAnswers(t, ln.Addr().String(), "GET / HTTP/1.1\r\nHost: localhost\r\n\r\nGET /flush HTTP/1.1\r\nHost: localhost\r\n\r\n", "GET", "GET")
	for i, want := range []string{piece + piece + piece, "ab"} {
		if rs[i].body != want || len(rs[i].TransferEncoding) != 1 || rs[i].TransferEncoding[0] != "chunked" {
			t.Errorf("answer %d: %d bytes, sent %v", i, len(rs[i].body), rs[i].TransferEncoding)
		}
	}
}

// TestConnSlowBody: a body sent too slowly is cut off at the read timeout
// of its request: answered 400, the connection closed, nothing run.
func TestConnSlowBody(t *testing.T) {
	ct := newConnTest(t, func(s *http.Server) { s.ReadHeaderTimeout, s.ReadTimeout = 200*time.Millisecond, 400*time.Millisecond })
	ct.c.MustQuery("create collection jobs (n int)")
	seq := ct.db.Seq()
	c := mustDial(t, ct.lean)
	defer c.Close()
	raw := post("/query", `{"query":"put jobs {n: 1}"}`)
	split := strings.Index(raw, "\r\n\r\n") + 4
	io.WriteString(c, raw[:split])
	start := time.Now()
	closed := make(chan string, 1)
	go func() {
		c.SetReadDeadline(time.Now().Add(5 * time.Second))
		b, _ := io.ReadAll(c)
		closed <- string(b)
	}()
	for _, b := range []byte(raw[split:]) {
		if _, err := c.Write([]byte{b}); err != nil {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	out := <-closed
	rs, err := parseAnswers(out, []string{"POST"})
	if took := time.Since(start); err != nil || rs[0].StatusCode != 408 || !rs[0].Close || took > 1200*time.Millisecond {
		t.Fatalf("slow body: %q after %v", out, took)
	}
	if ct.db.Seq() != seq {
		t.Fatal("a request whose body came too slowly ran")
	}
}

// TestConnBodyTooLarge: a body past --max-body, which the server does not
// read off, is answered 413 to a client still sending it — not reset by
// the connection's close (as net/http, which waits before closing).
func TestConnBodyTooLarge(t *testing.T) {
	ts := newTestServer(t, ":memory:", func(c *Config) { c.MaxBody = 1 << 10 })
	body := strings.Repeat("x", 4<<20)
	for i := range 5 {
		res, err := http.Post(ts.c.Base+"/query", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatalf("attempt %d: %v", i, err)
		}
		b, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if res.StatusCode != 413 || !strings.Contains(string(b), `"too_large"`) || !res.Close {
			t.Fatalf("attempt %d: %d %q close %v", i, res.StatusCode, b, res.Close)
		}
	}
}

// TestConnWatchStreaming: a long request, watched, whose client goes away
// while its answer streams out — no data race between the watch and the
// answer (go test -race), and the server serves on.
func TestConnWatchStreaming(t *testing.T) {
	piece := strings.Repeat("z", maxBuffered+1)
	srv := newHTTPServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		time.Sleep(150 * time.Millisecond) // past watchAfter: watched
		io.WriteString(w, piece)
	}), &http.Server{ErrorLog: log.New(t.Output(), "", 0)})
	ln := serveOn(t, srv)
	c := mustDial(t, ln.Addr().String())
	defer c.Close()
	io.WriteString(c, "GET / HTTP/1.1\r\nHost: localhost\r\n\r\n")
	time.Sleep(100 * time.Millisecond)
	c.(*net.TCPConn).CloseWrite() // the watch reads the end
	rs := answersIn(t, readFor(c, 2*time.Second), "GET")
	if rs[0].body != piece || !rs[0].Close {
		t.Fatalf("%d bytes, close %v", len(rs[0].body), rs[0].Close)
	}
	if rs := exchangeAnswers(t, ln.Addr().String(), "GET / HTTP/1.1\r\nHost: localhost\r\n\r\n", "GET"); rs[0].body != piece {
		t.Fatalf("then %d bytes", len(rs[0].body))
	}
}

// TestConnShutdownNew: at Shutdown, as net/http, a connection that has
// sent nothing yet is left 5 s for its first request — answered, with
// Connection: close — and one silent longer is closed at once.
func TestConnShutdownNew(t *testing.T) {
	ct := newConnTest(t, nil)
	old := mustDial(t, ct.lean)
	defer old.Close()
	time.Sleep(5100 * time.Millisecond)
	young := mustDial(t, ct.lean)
	defer young.Close()
	awaitConns(t, ct.srv, 2)
	shut := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		defer cancel()
		shut <- ct.srv.Shutdown(ctx)
	}()
	old.SetReadDeadline(time.Now().Add(time.Second))
	if n, err := old.Read(make([]byte, 1)); n != 0 || err == nil || isTimeout(err) {
		t.Fatalf("the silent connection: %d %v, want it closed", n, err)
	}
	io.WriteString(young, health)
	rs := answersIn(t, readFor(young, time.Second), "GET")
	if rs[0].StatusCode != 200 || !rs[0].Close {
		t.Fatalf("the new connection: %d close %v", rs[0].StatusCode, rs[0].Close)
	}
	if err := <-shut; err != nil {
		t.Fatal(err)
	}
}

// awaitConns waits until srv serves n connections itself.
func awaitConns(t *testing.T, srv *HTTPServer, n int) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(time.Millisecond) {
		srv.mu.Lock()
		have := len(srv.conns)
		srv.mu.Unlock()
		if have == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d connections, want %d", have, n)
		}
	}
}

// TestConnNoLeak: once their clients close them, the connections of every
// path — served here, handed to net/http, a held claim gone, a body cut
// short — leave no goroutine behind (TestConnLongRequest: a watched one).
func TestConnNoLeak(t *testing.T) {
	ct := newConnTest(t, nil)
	ct.c.MustQuery("create collection jobs (run_at timestamp @sorted, owner text)")
	time.Sleep(50 * time.Millisecond)
	before := runtime.NumGoroutine()
	chunked := "POST /query HTTP/1.1\r\nHost: localhost\r\nTransfer-Encoding: chunked\r\n\r\n" +
		"1a\r\n{\"query\":\"get jobs count\"}\r\n0\r\n\r\n"
	held := post("/query", `{"query":"set jobs {owner: 'w'} where run_at <= now() order run_at limit 1 returning id","params":[]}`, "Fenec-Wait: 30000\r\n")
	raws := []string{health + health, health + chunked, held, health + held, post("/query", `{"query":"get jobs count"}`)[:60]}
	for range 3 {
		var conns []net.Conn
		for _, raw := range raws {
			c := mustDial(t, ct.lean)
			io.WriteString(c, raw)
			conns = append(conns, c)
		}
		awaitHeldIn(t, ct.testServer, 2)
		time.Sleep(100 * time.Millisecond) // past watchAfter: the long ones are watched
		for _, c := range conns {
			c.Close()
		}
	}
	awaitHeldIn(t, ct.testServer, 0)
	awaitGoroutines(t, before)
}

// TestConnLongRequest: a request running past watchAfter is watched: its
// context ends when its client goes away, not when the client pipelines
// its next request (answered after it, its first byte read by the watch),
// and no goroutine is left once the connections close.
func TestConnLongRequest(t *testing.T) {
	cancelled := make(chan bool, 1)
	srv := newHTTPServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/long" {
			io.WriteString(w, "ok")
			return
		}
		longUntilGone(w, r, cancelled)
	}), &http.Server{ErrorLog: log.New(t.Output(), "", 0)})
	ln := serveOn(t, srv)
	time.Sleep(10 * time.Millisecond)
	before := runtime.NumGoroutine()
	long := "GET /long HTTP/1.1\r\nHost: localhost\r\n\r\n"

	c := mustDial(t, ln.Addr().String())
	io.WriteString(c, long)
	time.Sleep(150 * time.Millisecond)
	start := time.Now()
	c.Close()
	if !<-cancelled || time.Since(start) > 500*time.Millisecond {
		t.Fatalf("a long request's client gone: its context ended %v, after %v", false, time.Since(start))
	}

	c = mustDial(t, ln.Addr().String())
	defer c.Close()
	io.WriteString(c, long)
	time.Sleep(150 * time.Millisecond)
	io.WriteString(c, "GET / HTTP/1.1\r\nHost: localhost\r\n\r\n")
	if <-cancelled {
		t.Fatal("a pipelined request ended the long one")
	}
	rs := answersIn(t, readFor(c, 500*time.Millisecond), "GET", "GET")
	if rs[0].body != "long" || rs[1].body != "ok" {
		t.Fatalf("%q then %q", rs[0].body, rs[1].body)
	}
	c.Close()
	awaitGoroutines(t, before)
}

// longUntilGone answers "long" after a second, or once its client went
// away, and says on cancelled which came first.
func longUntilGone(w http.ResponseWriter, r *http.Request, cancelled chan<- bool) {
	select {
	case <-r.Context().Done():
		cancelled <- true
	case <-time.After(time.Second):
		cancelled <- false
	}
	io.WriteString(w, "long")
}

// TestConnLongRequestAfterIdle: the sweeper stops ticking while the
// server is idle (sweep), and a request that then runs past watchAfter is
// still watched: its client going away ends its context.
func TestConnLongRequestAfterIdle(t *testing.T) {
	cancelled := make(chan bool, 1)
	srv := newHTTPServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		longUntilGone(w, r, cancelled)
	}), &http.Server{ErrorLog: log.New(t.Output(), "", 0)})
	ln := serveOn(t, srv)
	c := mustDial(t, ln.Addr().String())
	defer c.Close()
	for deadline := time.Now().Add(2 * time.Second); !srv.asleep.Load(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("an idle server's sweeper still ticks after 2 s")
		}
	}
	io.WriteString(c, "GET /long HTTP/1.1\r\nHost: localhost\r\n\r\n")
	time.Sleep(150 * time.Millisecond)
	if srv.asleep.Load() {
		t.Fatal("the sweeper sleeps while a request runs")
	}
	start := time.Now()
	c.Close()
	if !<-cancelled || time.Since(start) > 500*time.Millisecond {
		t.Fatalf("a long request's client gone after the server was idle: its context ended %v, after %v", false, time.Since(start))
	}
}

// TestConnBodyRoom: a client that declares a body of up to --max-body and
// sends none of it holds little memory: the room for a body grows as its
// bytes come, not to its declared length at once.
func TestConnBodyRoom(t *testing.T) {
	const maxBody, clients = 8 << 20, 8
	ts := newTestServer(t, ":memory:", func(c *Config) { c.MaxBody = maxBody })
	addr := strings.TrimPrefix(ts.c.Base, "http://")
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for range clients {
		c := mustDial(t, addr)
		defer c.Close()
		io.WriteString(c, "POST /query HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: "+strconv.Itoa(maxBody)+"\r\n\r\n{")
	}
	time.Sleep(300 * time.Millisecond) // the handlers wait for the bodies
	runtime.GC()
	runtime.ReadMemStats(&after)
	if grew := int64(after.HeapAlloc) - int64(before.HeapAlloc); grew > clients*maxBody/16 {
		t.Fatalf("%d clients that declared %d-byte bodies and sent 1 byte hold %d bytes", clients, maxBody, grew)
	}
	// A body past that room is read whole; one cut short runs nothing.
	ts.c.MustQuery("create collection docs (s text)")
	big := `{"query":"put docs {s: $1}","params":["` + strings.Repeat("x", 3*maxBodyRoom) + `"]}`
	if rs := exchangeAnswers(t, addr, post("/query", big), "POST"); rs[0].StatusCode != 200 {
		t.Fatalf("a %d-byte body: %d %q", len(big), rs[0].StatusCode, rs[0].body)
	}
	seq := ts.db.Seq()
	raw := post("/query", big)
	exchange(t, addr, raw[:len(raw)-10], true)
	if r := ts.c.MustQuery("get docs count"); string(r.Body) != "[{\"count\":1}]\n" || ts.db.Seq() != seq {
		t.Fatalf("after a body cut short: %s", r.Body)
	}
}

// TestConnSameAnswers: requests HTTPServer reads itself get the answers
// net/http gives them — status, headers (Date aside), body, whether the
// connection closes — and the request after them on the connection too.
func TestConnSameAnswers(t *testing.T) {
	ct := newConnTest(t, nil)
	ct.c.MustQuery("create collection jobs (n int)")
	q := `{"query":"get jobs count"}`
	cases := []struct {
		name, raw string
		methods   []string
	}{
		{"GET with a body", "GET /_health HTTP/1.1\r\nHost: localhost\r\nContent-Length: 5\r\n\r\nhello", []string{"GET"}},
		{"HEAD with a body", "HEAD /_health HTTP/1.1\r\nHost: localhost\r\nContent-Length: 5\r\n\r\nhello", []string{"HEAD"}},
		{"leading zeros", "POST /query HTTP/1.1\r\nHost: localhost\r\nContent-Length: 00" + strconv.Itoa(len(q)) + "\r\n\r\n" + q, []string{"POST"}},
		{"zero length", "POST /query HTTP/1.1\r\nHost: localhost\r\nContent-Length: 0\r\n\r\n", []string{"POST"}},
		{"no length", "POST /query HTTP/1.1\r\nHost: localhost\r\n\r\n", []string{"POST"}},
		{"close", "GET /_health HTTP/1.1\r\nHost: localhost\r\nConnection: CLOSE\r\n\r\n", []string{"GET"}},
		{"keep-alive", "GET /_health HTTP/1.1\r\nHost: localhost\r\nConnection: Keep-Alive\r\n\r\n", []string{"GET"}},
		{"no route", "GET /nowhere HTTP/1.1\r\nHost: localhost\r\n\r\n", []string{"GET"}},
		{"method not allowed", "DELETE /query HTTP/1.1\r\nHost: localhost\r\n\r\n", []string{"DELETE"}},
		{"bad JSON", post("/query", `{"query":`), []string{"POST"}},
		{"bad query", post("/query", `{"query":"get nowhere"}`), []string{"POST"}},
		{"query string", "GET /_health?x=%20y&z HTTP/1.1\r\nHost: localhost\r\nPragma: no-cache\r\n\r\n", []string{"GET"}},
		{"preflight", "OPTIONS /query HTTP/1.1\r\nHost: localhost\r\nOrigin: http://a\r\nAccess-Control-Request-Method: POST\r\n\r\n", []string{"OPTIONS"}},
		{"HEAD", "HEAD /_metrics HTTP/1.1\r\nHost: localhost\r\n\r\n", []string{"HEAD"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			before := ct.srv.handoffs.Load()
			methods, raw := tc.methods, tc.raw
			if tc.name != "close" {
				methods, raw = append(methods, "GET"), raw+health
			}
			lean := exchangeAnswers(t, ct.lean, raw, methods...)
			bare := exchangeAnswers(t, ct.bare, raw, methods...)
			if len(lean) != len(bare) {
				t.Fatalf("HTTPServer %d answers, net/http %d", len(lean), len(bare))
			}
			for i := range bare {
				l, b := lean[i], bare[i]
				l.Header.Del("Date")
				b.Header.Del("Date")
				if l.Request.Method == "HEAD" && b.ContentLength < 0 && l.ContentLength > 2048 {
					// net/http gives a HEAD the length a GET would have
					// only up to 2 kB; HTTPServer gives it always.
					l.Header.Del("Content-Length")
					l.ContentLength = -1
				}
				if l.Status != b.Status || !reflect.DeepEqual(l.Header, b.Header) || l.Close != b.Close || l.ContentLength != b.ContentLength || l.body != b.body {
					t.Errorf("answer %d:\nHTTPServer %s %v close %v length %d %q\nnet/http   %s %v close %v length %d %q", i,
						l.Status, l.Header, l.Close, l.ContentLength, l.body, b.Status, b.Header, b.Close, b.ContentLength, b.body)
				}
			}
			if ct.srv.handoffs.Load() != before {
				t.Error("handed to net/http")
			}
		})
	}
}

// TestConnShutdownWatch: during Shutdown, a long request's client that
// goes away still ends the request's context.
func TestConnShutdownWatch(t *testing.T) {
	cancelled := make(chan bool, 1)
	srv := newHTTPServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
			cancelled <- true
		case <-time.After(2 * time.Second):
			cancelled <- false
		}
	}), &http.Server{ErrorLog: log.New(t.Output(), "", 0)})
	ln := serveOn(t, srv)
	c := mustDial(t, ln.Addr().String())
	io.WriteString(c, "GET / HTTP/1.1\r\nHost: localhost\r\n\r\n")
	awaitConns(t, srv, 1)
	shut := make(chan error, 1)
	go func() { shut <- srv.Shutdown(context.Background()) }()
	time.Sleep(150 * time.Millisecond) // past watchAfter
	start := time.Now()
	c.Close()
	if !<-cancelled || time.Since(start) > 500*time.Millisecond {
		t.Fatalf("the request of a client gone during Shutdown ran on for %v", time.Since(start))
	}
	if err := <-shut; err != nil {
		t.Fatal(err)
	}
}

// TestConnSlowReader: a client that does not read a large answer holds
// its connection no longer than the write timeout, then the connection
// and its goroutine are gone.
func TestConnSlowReader(t *testing.T) {
	big := strings.Repeat("z", 32<<20)
	srv := newHTTPServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, big)
	}), &http.Server{ErrorLog: log.New(io.Discard, "", 0), WriteTimeout: 300 * time.Millisecond})
	ln := serveOn(t, srv)
	time.Sleep(10 * time.Millisecond)
	before := runtime.NumGoroutine()
	c := mustDial(t, ln.Addr().String())
	defer c.Close()
	c.(*net.TCPConn).SetReadBuffer(4 << 10)
	io.WriteString(c, "GET / HTTP/1.1\r\nHost: localhost\r\n\r\n")
	awaitConns(t, srv, 1)
	start := time.Now()
	awaitConns(t, srv, 0)
	if took := time.Since(start); took > 2*time.Second {
		t.Fatalf("a client that reads nothing held its connection %v", took)
	}
	for deadline := time.Now().Add(2 * time.Second); runtime.NumGoroutine() > before; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d goroutines, %d before", runtime.NumGoroutine(), before)
		}
	}
}

// mustDial connects to addr on loopback, failing the test if it cannot.
func mustDial(t testing.TB, addr string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// mustListen listens on a free loopback port, failing the test if it cannot.
func mustListen(t testing.TB) net.Listener {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return ln
}

// awaitGoroutines waits up to 5 s for the goroutines to be no more than
// before, failing with every goroutine's stack if they stay more.
func awaitGoroutines(t testing.TB, before int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > before {
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<20)
			t.Fatalf("%d goroutines, %d before:\n%s", runtime.NumGoroutine(), before, buf[:runtime.Stack(buf, true)])
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// serveOn serves srv on a free loopback port until the test ends.
func serveOn(t testing.TB, srv *HTTPServer) net.Listener {
	t.Helper()
	ln := mustListen(t)
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return ln
}
