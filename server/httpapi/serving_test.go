package httpapi

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"reflect"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/fenecdb/fenec/server/httpapi/internal/h1"
	"github.com/fenecdb/fenec/server/httpapi/internal/h1/h1test"
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
	srv := h1.New(ts.Server, fallback)
	for _, edit := range edits {
		edit(srv)
	}
	ln := h1test.MustListen(t)
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	bareLn := h1test.MustListen(t)
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

func post(path, body string, extra ...string) string {
	return "POST " + path + " HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n" + strings.Join(extra, "") +
		"Content-Length: " + strconv.Itoa(len(body)) + "\r\n\r\n" + body
}

const health = "GET /_health HTTP/1.1\r\nHost: localhost\r\n\r\n"

// TestConnPipelined: requests sent at once on one connection are
// answered in order, each read by HTTPServer itself.
func TestConnPipelined(t *testing.T) {
	t.Parallel()
	ct := newConnTest(t, nil)
	ct.c.MustQuery("create collection jobs (n int)")
	raw := post("/query", `{"query":"put jobs {n: 1}"}`) + health +
		post("/query", `{"query":"put jobs {n: 2}"}`) + "\r\n" + // a stray CRLF after a POST, as net/http allows
		post("/query", `{"query":"get jobs count"}`, "Connection: close\r\n")
	rs := h1test.AnswersIn(t, h1test.Exchange(t, ct.lean, raw, false), "POST", "GET", "POST", "POST")
	want := []string{`{"affected":1}`, `{"ok":true`, `{"affected":1}`, `[{"count":2}]`}
	for i, r := range rs {
		if r.StatusCode != 200 || !strings.HasPrefix(r.Text, want[i]) || r.Header.Get("Date") == "" || r.ContentLength < 0 {
			t.Errorf("answer %d: %d %v %q", i, r.StatusCode, r.Header, r.Text)
		}
	}
	if !rs[3].Close {
		t.Error("the last answer, to Connection: close, does not say it closes")
	}
	// A CRLF after a POST and then the connection's end: no answer to the
	// CRLF (net/http drops it, then sees the end).
	rs = h1test.AnswersIn(t, h1test.Exchange(t, ct.lean, post("/query", `{"query":"get jobs count"}`)+"\r\n", true), "POST")
	if rs[0].StatusCode != 200 {
		t.Errorf("POST then CRLF: %d %q", rs[0].StatusCode, rs[0].Text)
	}
	if n := ct.srv.Handoffs(); n != 0 {
		t.Errorf("%d connections handed to net/http", n)
	}
}

// TestConnHandOff: a connection that sends a request outside the subset
// is answered from then on by net/http, exactly as net/http alone answers
// the same bytes.
func TestConnHandOff(t *testing.T) {
	t.Parallel()
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
			before := ct.srv.Handoffs()
			// A plain request first, so that the switch comes mid-way.
			first := health
			if tc.name == "too big head" {
				first = ""
			}
			methods := tc.methods
			if first != "" {
				methods = append([]string{"GET"}, methods...)
			}
			lean := h1test.ExchangeAnswers(t, ct.lean, first+tc.raw, methods...)
			bare := h1test.ExchangeAnswers(t, ct.bare, tc.raw, tc.methods...)
			lean = lean[len(lean)-len(bare):]
			for i := range bare {
				if lean[i].Status != bare[i].Status || lean[i].Text != bare[i].Text {
					t.Errorf("answer %d: HTTPServer %q %q, net/http %q %q", i, lean[i].Status, lean[i].Text, bare[i].Status, bare[i].Text)
				}
			}
			if ct.srv.Handoffs() != before+1 {
				t.Errorf("handed off %d connections, want 1", ct.srv.Handoffs()-before)
			}
		})
	}
}

// TestConnBodyShort: a body shorter than its Content-Length, the client
// then gone, runs nothing.
func TestConnBodyShort(t *testing.T) {
	t.Parallel()
	ct := newConnTest(t, nil)
	ct.c.MustQuery("create collection jobs (n int)")
	seq := ct.db.Seq()
	raw := post("/query", `{"query":"put jobs {n: 1}"}`)
	// The exchange ends as the server closes the connection: once the
	// request has ended.
	h1test.Exchange(t, ct.lean, raw[:len(raw)-3], true)
	if ct.db.Seq() != seq {
		t.Fatal("a request whose body was cut short ran")
	}
}

// TestConnHEAD: HEAD is answered with GET's head and no body.
func TestConnHEAD(t *testing.T) {
	t.Parallel()
	ct := newConnTest(t, nil)
	rs := h1test.ExchangeAnswers(t, ct.lean, strings.Replace(health, "GET", "HEAD", 1)+health, "HEAD", "GET")
	if rs[0].StatusCode != 200 || rs[0].Text != "" || rs[0].ContentLength != rs[1].ContentLength || rs[0].Header.Get("Content-Type") != rs[1].Header.Get("Content-Type") {
		t.Fatalf("HEAD %v %d, GET %v %d", rs[0].Header, rs[0].ContentLength, rs[1].Header, rs[1].ContentLength)
	}
	// The console's files: the same head as net/http's (its Date aside).
	console := "HEAD /console/ HTTP/1.1\r\nHost: localhost\r\n\r\nGET /console/ HTTP/1.1\r\nHost: localhost\r\n\r\n"
	lean := h1test.ExchangeAnswers(t, ct.lean, console, "HEAD", "GET")
	bare := h1test.ExchangeAnswers(t, ct.bare, console, "HEAD", "GET")
	for i := range lean {
		// net/http sends a body past 2 kB chunked: HTTPServer with its length.
		for _, h := range []http.Header{lean[i].Header, bare[i].Header} {
			h.Del("Date")
			h.Del("Content-Length")
		}
		if lean[i].Status != bare[i].Status || !reflect.DeepEqual(lean[i].Header, bare[i].Header) || lean[i].Text != bare[i].Text {
			t.Errorf("%s /console/: HTTPServer %s %v, net/http %s %v", lean[i].Request.Method, lean[i].Status, lean[i].Header, bare[i].Status, bare[i].Header)
		}
	}
	if !strings.HasPrefix(lean[1].Header.Get("Content-Type"), "text/html") || lean[0].Text != "" || len(lean[1].Text) == 0 {
		t.Errorf("/console/: %v %q", lean[1].Header, lean[1].Text)
	}
}

// TestConnShutdown: Shutdown closes an idle connection at once, lets an
// active one finish its request (answered with Connection: close), and
// returns once it has.
func TestConnShutdown(t *testing.T) {
	t.Parallel()
	ct := newConnTest(t, nil)
	ct.c.MustQuery("create collection jobs (run_at timestamp @sorted, owner text)")
	idle := h1test.MustDial(t, ct.lean)
	defer idle.Close()
	io.WriteString(idle, health)
	h1test.AnswersIn(t, h1test.ReadFor(idle, 200*time.Millisecond), "GET")
	active := h1test.MustDial(t, ct.lean)
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
	if out := h1test.ReadFor(idle, 2*held); out != "" || time.Since(start) >= held/2 {
		t.Fatalf("idle connection: %q after %v, not closed while the active request was held", out, time.Since(start))
	}
	select {
	case err := <-shut:
		t.Fatalf("Shutdown returned %v with a request in flight", err)
	case <-time.After(100 * time.Millisecond):
	}
	rs := h1test.AnswersIn(t, h1test.ReadFor(active, 2*held), "POST")
	if rs[0].StatusCode != 200 || rs[0].Text != "[]\n" || !rs[0].Close {
		t.Fatalf("active request: %d %q close %v", rs[0].StatusCode, rs[0].Text, rs[0].Close)
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
	ct := newConnTest(t, nil, func(s *HTTPServer) { s.SetWatchAfter(time.Hour) })
	ct.c.MustQuery("create collection jobs (run_at timestamp @sorted, owner text)")
	c := h1test.MustDial(t, ct.lean)
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
	t.Parallel()
	ct := newConnTest(t, nil, func(s *HTTPServer) { s.SetWatchAfter(time.Hour) })
	ct.c.MustQuery("create collection jobs (run_at timestamp @sorted, owner text)")
	c := h1test.MustDial(t, ct.lean)
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
	t.Parallel()
	ct := newConnTest(t, nil)
	ct.c.MustQuery("create collection jobs (run_at timestamp @sorted, owner text)")
	c := h1test.MustDial(t, ct.lean)
	defer c.Close()
	io.WriteString(c, post("/query", `{"query":"set jobs {owner: 'w'} where run_at <= now() order run_at limit 1 returning id","params":[]}`, "Fenec-Wait: 30000\r\n"))
	awaitHeldIn(t, ct.testServer, 1)
	io.WriteString(c, health)
	// The watch has read the pipelined request's first byte: a watch that
	// took it for the client's end would have dropped the claim.
	h1test.Await(t, func() bool { return ct.srv.Pipelined() == 1 }, func() string { return "the watch never read the pipelined request" })
	if heldIn(t, ct.testServer) != 1 {
		t.Fatal("a pipelined request ended the held claim")
	}
	ct.c.MustQuery("put jobs {run_at: now()}")
	rs := h1test.AnswersIn(t, h1test.ReadFor(c, time.Second), "POST", "GET")
	if rs[0].Text != "[{\"id\":1}]\n" || rs[1].StatusCode != 200 {
		t.Fatalf("%q then %d %q", rs[0].Text, rs[1].StatusCode, rs[1].Text)
	}
}

// TestConnLargeAnswer: an answer past what is held is sent as it comes —
// with the handler's Content-Length, else chunked — the same bytes as
// net/http's, and the connection serves on.
func TestConnLargeAnswer(t *testing.T) {
	t.Parallel()
	ct := newConnTest(t, nil)
	ct.c.MustQuery("create collection big (s text)")
	ct.c.MustQuery(`put big [` + strings.Repeat(`{s: "`+strings.Repeat("x", 200)+`"},`, 999) + `{s: "y"}]`)
	raw := post("/query", `{"query":"get big select s"}`) + health
	lean := h1test.ExchangeAnswers(t, ct.lean, raw, "POST", "GET")
	bare := h1test.ExchangeAnswers(t, ct.bare, raw, "POST", "GET")
	if len(lean[0].Text) < h1.MaxBuffered || lean[0].Text != bare[0].Text || lean[0].ContentLength != int64(len(lean[0].Text)) || lean[1].StatusCode != 200 {
		t.Fatalf("%d bytes (net/http: %d), length %d, then %d", len(lean[0].Text), len(bare[0].Text), lean[0].ContentLength, lean[1].StatusCode)
	}
}

// TestConnSlowBody: a body sent too slowly is cut off at the read timeout
// of its request: answered 400, the connection closed, nothing run.
func TestConnSlowBody(t *testing.T) {
	ct := newConnTest(t, func(s *http.Server) { s.ReadHeaderTimeout, s.ReadTimeout = 200*time.Millisecond, 400*time.Millisecond })
	ct.c.MustQuery("create collection jobs (n int)")
	seq := ct.db.Seq()
	c := h1test.MustDial(t, ct.lean)
	defer c.Close()
	raw := post("/query", `{"query":"put jobs {n: 1}"}`)
	split := strings.Index(raw, "\r\n\r\n") + 4
	io.WriteString(c, raw[:split])
	out, took := h1test.Trickle(c, raw[split:], 50*time.Millisecond)
	rs, err := h1test.ParseAnswers(out, []string{"POST"})
	if err != nil || rs[0].StatusCode != 408 || !rs[0].Close || took > 1200*time.Millisecond {
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
	t.Parallel()
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

// TestConnNoLeak: once their clients close them, the connections of every
// path — served here, handed to net/http, a held claim gone, a body cut
// short — leave no goroutine behind (TestConnLongRequest: a watched one).
func TestConnNoLeak(t *testing.T) {
	ct := newConnTest(t, nil)
	ct.c.MustQuery("create collection jobs (run_at timestamp @sorted, owner text)")
	// Served once, the connection server runs all its goroutines.
	h1test.ExchangeAnswers(t, ct.lean, health, "GET")
	h1test.Await(t, func() bool { return ct.srv.Conns() == 0 }, func() string { return "the first connection is still served after 5 s" })
	before := runtime.NumGoroutine()
	chunked := "POST /query HTTP/1.1\r\nHost: localhost\r\nTransfer-Encoding: chunked\r\n\r\n" +
		"1a\r\n{\"query\":\"get jobs count\"}\r\n0\r\n\r\n"
	held := post("/query", `{"query":"set jobs {owner: 'w'} where run_at <= now() order run_at limit 1 returning id","params":[]}`, "Fenec-Wait: 30000\r\n")
	raws := []string{health + health, health + chunked, held, health + held, post("/query", `{"query":"get jobs count"}`)[:60]}
	for range 3 {
		var conns []net.Conn
		for _, raw := range raws {
			c := h1test.MustDial(t, ct.lean)
			io.WriteString(c, raw)
			conns = append(conns, c)
		}
		// Held, the claims are watched (they ask it at once).
		awaitHeldIn(t, ct.testServer, 2)
		for _, c := range conns {
			c.Close()
		}
	}
	awaitHeldIn(t, ct.testServer, 0)
	h1test.AwaitGoroutines(t, before)
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
		c := h1test.MustDial(t, addr)
		defer c.Close()
		io.WriteString(c, "POST /query HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: "+strconv.Itoa(maxBody)+"\r\n\r\n{")
	}
	// Every handler waits for its body's bytes (its goroutine is in the
	// body's read): what they hold now is what is measured.
	h1test.Await(t, func() bool { return readingBodies() == clients }, func() string {
		return fmt.Sprintf("%d of %d handlers reading their bodies after 5 s", readingBodies(), clients)
	})
	runtime.GC()
	runtime.ReadMemStats(&after)
	if grew := int64(after.HeapAlloc) - int64(before.HeapAlloc); grew > clients*maxBody/16 {
		t.Fatalf("%d clients that declared %d-byte bodies and sent 1 byte hold %d bytes", clients, maxBody, grew)
	}
	// A body past that room is read whole; one cut short runs nothing.
	ts.c.MustQuery("create collection docs (s text)")
	big := `{"query":"put docs {s: $1}","params":["` + strings.Repeat("x", 3*maxBodyRoom) + `"]}`
	if rs := h1test.ExchangeAnswers(t, addr, post("/query", big), "POST"); rs[0].StatusCode != 200 {
		t.Fatalf("a %d-byte body: %d %q", len(big), rs[0].StatusCode, rs[0].Text)
	}
	seq := ts.db.Seq()
	raw := post("/query", big)
	h1test.Exchange(t, addr, raw[:len(raw)-10], true)
	if r := ts.c.MustQuery("get docs count"); string(r.Body) != "[{\"count\":1}]\n" || ts.db.Seq() != seq {
		t.Fatalf("after a body cut short: %s", r.Body)
	}
}

// readingBodies returns how many of the process's goroutines are in a
// handler reading its request's body (Server.readBody).
func readingBodies() int {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	count := 0
	for _, g := range strings.Split(string(buf), "\n\n") {
		if strings.Contains(g, "httpapi.(*Server).readBody(") {
			count++
		}
	}
	return count
}

// TestConnSameAnswers: requests HTTPServer reads itself get the answers
// net/http gives them — status, headers (Date aside), body, whether the
// connection closes — and the request after them on the connection too.
func TestConnSameAnswers(t *testing.T) {
	t.Parallel()
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
			before := ct.srv.Handoffs()
			methods, raw := tc.methods, tc.raw
			if tc.name != "close" {
				methods, raw = append(methods, "GET"), raw+health
			}
			lean := h1test.ExchangeAnswers(t, ct.lean, raw, methods...)
			bare := h1test.ExchangeAnswers(t, ct.bare, raw, methods...)
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
				if l.Status != b.Status || !reflect.DeepEqual(l.Header, b.Header) || l.Close != b.Close || l.ContentLength != b.ContentLength || l.Text != b.Text {
					t.Errorf("answer %d:\nHTTPServer %s %v close %v length %d %q\nnet/http   %s %v close %v length %d %q", i,
						l.Status, l.Header, l.Close, l.ContentLength, l.Text, b.Status, b.Header, b.Close, b.ContentLength, b.Text)
				}
			}
			if ct.srv.Handoffs() != before {
				t.Error("handed to net/http")
			}
		})
	}
}
