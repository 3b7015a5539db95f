package httpapi

import (
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/fenecdb/fenec/server/httpapi/internal/h1/h1test"
)

// refusedConn sends a request on c and reports whether it was answered
// the 503 of Limits, the connection then closed.
func refusedConn(t *testing.T, c net.Conn) bool {
	t.Helper()
	io.WriteString(c, health)
	c.SetReadDeadline(time.Now().Add(3 * time.Second))
	var got []byte
	buf := make([]byte, 4096)
	for {
		n, err := c.Read(buf)
		got = append(got, buf[:n]...)
		if rs, perr := h1test.ParseAnswers(string(got), []string{"GET"}); perr == nil {
			return rs[0].StatusCode == 503 && strings.Contains(rs[0].Text, `"too_many_connections"`) && rs[0].Close
		}
		if err != nil {
			t.Fatalf("no answer: %q %v", got, err)
		}
	}
}

// TestLimitsMaxConns: past MaxConns a new connection is answered 503 and
// closed at once; a connection closed (one handed to net/http too) makes
// room again; refusals are counted in the metrics.
func TestLimitsMaxConns(t *testing.T) {
	t.Parallel()
	var ct *connTest
	ct = newConnTest(t, nil, func(s *HTTPServer) {
		s.Limit(Limits{MaxConns: 3, Refused: func(r string) { ct.metrics.ConnRefused(r) }})
	})
	held := make([]net.Conn, 3)
	for i := range held {
		held[i] = h1test.MustDial(t, ct.lean)
		defer held[i].Close()
		raw := health
		if i == 0 {
			raw = handedOff(health) // counted until net/http closes it
		}
		io.WriteString(held[i], raw)
		h1test.AnswersIn(t, h1test.ReadFor(held[i], 200*time.Millisecond), "GET")
	}
	extra := h1test.MustDial(t, ct.lean)
	defer extra.Close()
	if !refusedConn(t, extra) {
		t.Fatal("a fourth connection was not refused")
	}
	held[0].Close()
	awaitRoom(t, ct) // the handed-off connection closed: room again
	held[1].Close()
	awaitRoom(t, ct)
	r, err := ct.c.Do("GET", "/_metrics", nil, nil)
	if err != nil || !strings.Contains(string(r.Body), `fenec_http_connections_refused_total{reason="max_conns"}`) ||
		strings.Contains(string(r.Body), `fenec_http_connections_refused_total{reason="max_conns"} 0`) {
		t.Errorf("metrics: %v %.200s", err, r.Body)
	}
}

// awaitRoom waits until the server takes a connection again.
func awaitRoom(t *testing.T, ct *connTest) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		c := h1test.MustDial(t, ct.lean)
		ok := !refusedConn(t, c)
		c.Close()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("no room")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestLimitsPerAddr: MaxConnsPerAddr caps one client address, not another.
func TestLimitsPerAddr(t *testing.T) {
	t.Parallel()
	ct := newConnTest(t, nil, func(s *HTTPServer) { s.Limit(Limits{MaxConnsPerAddr: 2}) })
	for range 2 {
		c := h1test.MustDial(t, ct.lean)
		defer c.Close()
		io.WriteString(c, health)
		h1test.AnswersIn(t, h1test.ReadFor(c, 200*time.Millisecond), "GET")
	}
	c := h1test.MustDial(t, ct.lean)
	defer c.Close()
	if !refusedConn(t, c) {
		t.Fatal("a third connection from 127.0.0.1 was not refused")
	}
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 2)}}
	other, err := d.Dial("tcp", ct.lean)
	if err != nil {
		t.Skipf("no 127.0.0.2 here: %v", err)
	}
	defer other.Close()
	if refusedConn(t, other) {
		t.Error("a connection from 127.0.0.2 was refused")
	}
}

// TestLimitsIdleTimeout: Limits.IdleTimeout closes a connection idle
// after its request, on both paths.
func TestLimitsIdleTimeout(t *testing.T) {
	t.Parallel()
	ct := newConnTest(t, nil, func(s *HTTPServer) { s.Limit(Limits{IdleTimeout: 200 * time.Millisecond}) })
	onBothPaths(t, ct, health, func(t *testing.T, raw string) {
		c := h1test.MustDial(t, ct.lean)
		defer c.Close()
		start := time.Now()
		io.WriteString(c, raw)
		c.SetReadDeadline(time.Now().Add(5 * time.Second))
		out, err := io.ReadAll(c)
		if err != nil || time.Since(start) > 3*time.Second {
			t.Fatalf("the idle connection was not closed: %v after %v", err, time.Since(start))
		}
		h1test.AnswersIn(t, string(out), "GET")
	})
}
