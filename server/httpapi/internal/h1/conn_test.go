package h1

import (
	"context"
	"io"
	"log"
	"net"
	"net/http"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/fenecdb/fenec/server/httpapi/internal/h1/h1test"
)

const get = "GET / HTTP/1.1\r\nHost: localhost\r\n\r\n"

// ok answers "ok".
var ok = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") })

// serve serves h on a free loopback port until the test ends, the
// connections handed over going to fallback (nil: a plain net/http server
// whose errors go to the test's log), and returns the server and its
// address.
func serve(t testing.TB, h http.Handler, fallback *http.Server, edits ...func(*Server)) (*Server, string) {
	t.Helper()
	if fallback == nil {
		fallback = &http.Server{ErrorLog: log.New(t.Output(), "", 0)}
	}
	fallback.Handler = h
	srv := New(h, fallback)
	for _, edit := range edits {
		edit(srv)
	}
	ln := h1test.MustListen(t)
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	t.Cleanup(func() {
		srv.Close()
		if err := <-served; err != http.ErrServerClosed {
			t.Errorf("Serve: %v", err)
		}
	})
	return srv, ln.Addr().String()
}

// conns returns how many connections srv serves itself, and how many of
// them are watched.
func (s *Server) connsWatched() (n, watched int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for c := range s.conns {
		n++
		c.mu.Lock()
		if c.watching {
			watched++
		}
		c.mu.Unlock()
	}
	return n, watched
}

// awaitConns waits until srv serves n connections itself.
func awaitConns(t *testing.T, srv *Server, n int) {
	t.Helper()
	h1test.Await(t, func() bool { have, _ := srv.connsWatched(); return have == n }, func() string {
		have, _ := srv.connsWatched()
		return "connections: " + strconv.Itoa(have) + ", want " + strconv.Itoa(n)
	})
}

// awaitWatched waits until a request of srv is watched.
func awaitWatched(t *testing.T, srv *Server) {
	t.Helper()
	h1test.Await(t, func() bool { _, w := srv.connsWatched(); return w > 0 }, func() string { return "no request watched after 5 s" })
}

// TestConnAmbiguousFraming: Content-Length with Transfer-Encoding, after a
// plain request on the connection, is answered GuardFraming's 400 and the
// connection closed.
func TestConnAmbiguousFraming(t *testing.T) {
	t.Parallel()
	_, addr := serve(t, ok, nil)
	raw := "POST /q HTTP/1.1\r\nHost: localhost\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n"
	out := h1test.Exchange(t, addr, get+raw, false)
	i := strings.Index(out, "HTTP/1.1 400")
	if i < 0 {
		t.Fatalf("%q", out)
	}
	first := h1test.AnswersIn(t, out[:i], "GET")
	if first[0].StatusCode != 200 || !strings.HasSuffix(out, ambiguousFramingAnswer) {
		t.Fatalf("%q", out)
	}
	if out := h1test.Exchange(t, addr, raw, false); out != ambiguousFramingAnswer {
		t.Fatalf("alone: %q", out)
	}
}

// TestConnSlowloris: a head sent too slowly is cut off at the header
// timeout, without an answer (as net/http).
func TestConnSlowloris(t *testing.T) {
	t.Parallel()
	_, addr := serve(t, ok, &http.Server{ReadHeaderTimeout: 300 * time.Millisecond, ErrorLog: log.New(io.Discard, "", 0)})
	for _, first := range []string{"", get} {
		c := h1test.MustDial(t, addr)
		defer c.Close()
		io.WriteString(c, first)
		if first != "" {
			h1test.AnswersIn(t, h1test.ReadUntil(c, 2*time.Second, "GET"), "GET")
		}
		// A byte every 50 ms, as a slow client sends them: the head would
		// take 2 s.
		out, took := h1test.Trickle(c, "GET / HTTP/1.1\r\nHost: localhost\r\nX-Slow: "+strings.Repeat("a", 10), 50*time.Millisecond)
		if out != "" || took > 1500*time.Millisecond {
			t.Fatalf("after %q: slow head answered %q, closed after %v", first, out, took)
		}
	}
}

// TestConnPanic: a panic past the handler's own recovery ends the
// connection, not the server.
func TestConnPanic(t *testing.T) {
	t.Parallel()
	_, addr := serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/panic" {
			panic("boom")
		}
		w.Write([]byte("ok"))
	}), &http.Server{ErrorLog: log.New(io.Discard, "", 0)})
	if out := h1test.Exchange(t, addr, "GET /panic HTTP/1.1\r\nHost: localhost\r\n\r\n", false); out != "" {
		t.Fatalf("answered %q", out)
	}
	rs := h1test.ExchangeAnswers(t, addr, get, "GET")
	if rs[0].Text != "ok" || rs[0].Header.Get("Content-Type") != "text/plain; charset=utf-8" {
		t.Fatalf("after a panic: %q %v", rs[0].Text, rs[0].Header)
	}
}

// TestConnLargeAnswer: an answer past what is held is sent as it comes —
// with the handler's Content-Length, else chunked — and the connection
// serves on.
func TestConnLargeAnswer(t *testing.T) {
	t.Parallel()
	piece := strings.Repeat("z", 40<<10)
	_, addr := serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/flush":
			io.WriteString(w, "a")
			w.(http.Flusher).Flush()
			io.WriteString(w, "b")
			return
		case "/length":
			w.Header().Set("Content-Length", strconv.Itoa(3*len(piece)))
		}
		for range 3 {
			io.WriteString(w, piece)
		}
	}), nil)
	rs := h1test.ExchangeAnswers(t, addr, "GET / HTTP/1.1\r\nHost: localhost\r\n\r\nGET /flush HTTP/1.1\r\nHost: localhost\r\n\r\n"+
		"GET /length HTTP/1.1\r\nHost: localhost\r\n\r\n", "GET", "GET", "GET")
	for i, want := range []string{piece + piece + piece, "ab"} {
		if rs[i].Text != want || len(rs[i].TransferEncoding) != 1 || rs[i].TransferEncoding[0] != "chunked" {
			t.Errorf("answer %d: %d bytes, sent %v", i, len(rs[i].Text), rs[i].TransferEncoding)
		}
	}
	if rs[2].Text != piece+piece+piece || rs[2].ContentLength != int64(3*len(piece)) || len(rs[2].TransferEncoding) != 0 {
		t.Errorf("with its length: %d bytes, length %d, sent %v", len(rs[2].Text), rs[2].ContentLength, rs[2].TransferEncoding)
	}
}

// TestConnWatchStreaming: a long request, watched, whose client goes away
// while its answer streams out — no data race between the watch and the
// answer (go test -race), and the server serves on.
func TestConnWatchStreaming(t *testing.T) {
	t.Parallel()
	piece := strings.Repeat("z", MaxBuffered+1)
	var srv *Server
	watched := make(chan struct{}, 1)
	srv, addr := serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/long" {
			// Past watchAfter, the sweeper watches the request.
			for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
				if _, w := srv.connsWatched(); w > 0 {
					break
				}
			}
			watched <- struct{}{}
			select { // the watch reads the client's end
			case <-r.Context().Done():
			case <-time.After(5 * time.Second):
			}
		}
		io.WriteString(w, piece)
	}), nil)
	c := h1test.MustDial(t, addr)
	defer c.Close()
	io.WriteString(c, "GET /long HTTP/1.1\r\nHost: localhost\r\n\r\n")
	<-watched
	c.(*net.TCPConn).CloseWrite()
	rs := h1test.AnswersIn(t, h1test.ReadFor(c, 5*time.Second), "GET")
	if rs[0].Text != piece || !rs[0].Close {
		t.Fatalf("%d bytes, close %v", len(rs[0].Text), rs[0].Close)
	}
	if rs := h1test.ExchangeAnswers(t, addr, get, "GET"); rs[0].Text != piece {
		t.Fatalf("then %d bytes", len(rs[0].Text))
	}
}

// TestConnShutdownNew: at Shutdown, as net/http, a connection that has
// sent nothing yet is left newGrace (5 s; less here) for its first
// request — answered, with Connection: close — and one silent longer is
// closed at once.
func TestConnShutdownNew(t *testing.T) {
	t.Parallel()
	const grace = time.Second
	srv, addr := serve(t, ok, nil, func(s *Server) { s.newGrace = grace })
	old := h1test.MustDial(t, addr)
	defer old.Close()
	awaitConns(t, srv, 1)
	// The first connection grows older than the grace.
	h1test.Await(t, func() bool {
		srv.mu.Lock()
		defer srv.mu.Unlock()
		for c := range srv.conns {
			return time.Since(c.accepted) > grace
		}
		return false
	}, func() string { return "the connection is not older than the grace after 5 s" })
	young := h1test.MustDial(t, addr)
	defer young.Close()
	awaitConns(t, srv, 2)
	shut := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		defer cancel()
		shut <- srv.Shutdown(ctx)
	}()
	old.SetReadDeadline(time.Now().Add(time.Second))
	if n, err := old.Read(make([]byte, 1)); n != 0 || err == nil || isTimeout(err) {
		t.Fatalf("the silent connection: %d %v, want it closed", n, err)
	}
	io.WriteString(young, get)
	rs := h1test.AnswersIn(t, h1test.ReadFor(young, time.Second), "GET")
	if rs[0].StatusCode != 200 || !rs[0].Close {
		t.Fatalf("the new connection: %d close %v", rs[0].StatusCode, rs[0].Close)
	}
	if err := <-shut; err != nil {
		t.Fatal(err)
	}
}

// TestConnLongRequest: a request running past watchAfter is watched: its
// context ends when its client goes away, not when the client pipelines
// its next request (answered after it, its first byte read by the watch),
// and no goroutine is left once the connections close. Not parallel: it
// counts the goroutines.
func TestConnLongRequest(t *testing.T) {
	cancelled := make(chan bool, 1)
	srv, addr := serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/long" {
			io.WriteString(w, "ok")
			return
		}
		longUntilGone(w, r, cancelled)
	}), nil)
	// Served once, the server runs all its goroutines.
	h1test.ExchangeAnswers(t, addr, get, "GET")
	awaitConns(t, srv, 0)
	before := runtime.NumGoroutine()
	long := "GET /long HTTP/1.1\r\nHost: localhost\r\n\r\n"

	c := h1test.MustDial(t, addr)
	io.WriteString(c, long)
	awaitWatched(t, srv)
	start := time.Now()
	c.Close()
	if !<-cancelled || time.Since(start) > 500*time.Millisecond {
		t.Fatalf("a long request's client gone: its context ended %v, after %v", false, time.Since(start))
	}

	c = h1test.MustDial(t, addr)
	defer c.Close()
	longThenPipelined(t, srv, c, cancelled)
	c.Close()
	h1test.AwaitGoroutines(t, before)
}

// longThenPipelined sends a long request on c, then, once it is watched,
// a request after it, which must neither end the long one nor be answered
// before it.
func longThenPipelined(t *testing.T, srv *Server, c net.Conn, cancelled <-chan bool) {
	t.Helper()
	io.WriteString(c, "GET /long HTTP/1.1\r\nHost: localhost\r\n\r\n")
	awaitWatched(t, srv)
	io.WriteString(c, get)
	if <-cancelled {
		t.Fatal("a pipelined request ended the long one")
	}
	rs := h1test.AnswersIn(t, h1test.ReadUntil(c, 2*time.Second, "GET", "GET"), "GET", "GET")
	if rs[0].Text != "long" || rs[1].Text != "ok" {
		t.Fatalf("%q then %q", rs[0].Text, rs[1].Text)
	}
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
	t.Parallel()
	cancelled := make(chan bool, 1)
	srv, addr := serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		longUntilGone(w, r, cancelled)
	}), nil)
	c := h1test.MustDial(t, addr)
	defer c.Close()
	h1test.Await(t, srv.asleep.Load, func() string { return "an idle server's sweeper still ticks after 5 s" })
	io.WriteString(c, "GET /long HTTP/1.1\r\nHost: localhost\r\n\r\n")
	awaitWatched(t, srv)
	if srv.asleep.Load() {
		t.Fatal("the sweeper sleeps while a request runs")
	}
	start := time.Now()
	c.Close()
	if !<-cancelled || time.Since(start) > 500*time.Millisecond {
		t.Fatalf("a long request's client gone after the server was idle: its context ended %v, after %v", false, time.Since(start))
	}
}

// TestConnShutdownWatch: during Shutdown, a long request's client that
// goes away still ends the request's context.
func TestConnShutdownWatch(t *testing.T) {
	t.Parallel()
	cancelled := make(chan bool, 1)
	srv, addr := serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
			cancelled <- true
		case <-time.After(2 * time.Second):
			cancelled <- false
		}
	}), nil)
	c := h1test.MustDial(t, addr)
	io.WriteString(c, get)
	awaitConns(t, srv, 1)
	shut := make(chan error, 1)
	go func() { shut <- srv.Shutdown(context.Background()) }()
	awaitWatched(t, srv) // past watchAfter
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
// and its goroutine are gone. Not parallel: it counts the goroutines.
func TestConnSlowReader(t *testing.T) {
	big := strings.Repeat("z", 32<<20)
	srv, addr := serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/small" {
			io.WriteString(w, "ok")
			return
		}
		io.WriteString(w, big)
	}), &http.Server{ErrorLog: log.New(io.Discard, "", 0), WriteTimeout: 300 * time.Millisecond})
	// Served once, the server runs all its goroutines.
	h1test.ExchangeAnswers(t, addr, "GET /small HTTP/1.1\r\nHost: localhost\r\n\r\n", "GET")
	awaitConns(t, srv, 0)
	before := runtime.NumGoroutine()
	c := h1test.MustDial(t, addr)
	defer c.Close()
	c.(*net.TCPConn).SetReadBuffer(4 << 10)
	io.WriteString(c, get)
	awaitConns(t, srv, 1)
	start := time.Now()
	awaitConns(t, srv, 0)
	if took := time.Since(start); took > 2*time.Second {
		t.Fatalf("a client that reads nothing held its connection %v", took)
	}
	h1test.AwaitGoroutines(t, before)
}
