// Package h1test holds what the tests of internal/h1 and of httpapi share
// to speak HTTP/1.1 byte by byte on loopback: raw exchanges, the answers
// parsed from them, and waits on a condition with a deadline.
package h1test

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/fenecdb/fenec/server/internal/testwait"
)

// Exchange writes raw on a new connection to addr, half-closes it when
// closeWrite, and reads everything until the server closes or the reads
// time out (2 s).
func Exchange(t testing.TB, addr, raw string, closeWrite bool) string {
	t.Helper()
	c := MustDial(t, addr)
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

// Answer is an answer read off a connection, its body read into Text.
type Answer struct {
	*http.Response
	Text string
}

// AnswersIn parses the answers in raw, each to a request with the method
// of methods (HEAD answers have no body), failing the test if raw holds
// other than those.
func AnswersIn(t testing.TB, raw string, methods ...string) []Answer {
	t.Helper()
	out, err := ParseAnswers(raw, methods)
	if err != nil {
		t.Fatalf("%q: %v", raw, err)
	}
	return out
}

// ParseAnswers parses the answers in raw, one to each of methods.
func ParseAnswers(raw string, methods []string) ([]Answer, error) {
	br := bufio.NewReader(strings.NewReader(raw))
	var out []Answer
	for _, m := range methods {
		res, err := http.ReadResponse(br, &http.Request{Method: m})
		if err != nil {
			return nil, fmt.Errorf("answer %d: %v", len(out), err)
		}
		b, err := io.ReadAll(res.Body)
		if err != nil {
			return nil, fmt.Errorf("answer %d body: %v", len(out), err)
		}
		out = append(out, Answer{res, string(b)})
	}
	if rest, _ := io.ReadAll(br); len(rest) > 0 {
		return nil, fmt.Errorf("more than %d answers: %q", len(methods), rest)
	}
	return out, nil
}

// ExchangeAnswers writes raw on a new connection to addr and reads until
// it holds one answer to each of methods, or the server closes, or 2 s
// pass. The connection stays open for writes meanwhile: net/http takes a
// client's half-close for its going away.
func ExchangeAnswers(t testing.TB, addr, raw string, methods ...string) []Answer {
	t.Helper()
	c := MustDial(t, addr)
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
		if out, perr := ParseAnswers(string(got), methods); perr == nil {
			return out
		}
		if err != nil {
			return AnswersIn(t, string(got), methods...)
		}
	}
}

// ReadFor reads what c sends within d.
func ReadFor(c net.Conn, d time.Duration) string {
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

// ReadUntil reads from c until what it read holds one answer to each of
// methods, c ends, or d passes, and returns what it read.
func ReadUntil(c net.Conn, d time.Duration, methods ...string) string {
	c.SetReadDeadline(time.Now().Add(d))
	defer c.SetReadDeadline(time.Time{})
	var out []byte
	buf := make([]byte, 4096)
	for {
		n, err := c.Read(buf)
		out = append(out, buf[:n]...)
		if _, perr := ParseAnswers(string(out), methods); perr == nil || err != nil {
			return string(out)
		}
	}
}

// MustDial connects to addr on loopback, failing the test if it cannot.
func MustDial(t testing.TB, addr string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// MustListen listens on a free loopback port, failing the test if it cannot.
func MustListen(t testing.TB) net.Listener {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return ln
}

// Await polls cond until it holds, failing the test with what() after
// 5 s (testwait.Within).
func Await(t testing.TB, cond func() bool, what func() string) {
	t.Helper()
	if !testwait.Within(5*time.Second, cond) {
		t.Fatal(what())
	}
}

// AwaitGoroutines waits up to 5 s for the goroutines to be no more than
// before, failing with every goroutine's stack if they stay more.
func AwaitGoroutines(t testing.TB, before int) {
	t.Helper()
	Await(t, func() bool { return runtime.NumGoroutine() <= before }, func() string {
		buf := make([]byte, 1<<20)
		return fmt.Sprintf("%d goroutines, %d before:\n%s", runtime.NumGoroutine(), before, buf[:runtime.Stack(buf, true)])
	})
}

// Trickle writes s on c a byte every d, as a slow client does, while it
// reads what the server sends until it closes c (5 s at most); it returns
// what was read and how long from its start until the close.
func Trickle(c net.Conn, s string, d time.Duration) (string, time.Duration) {
	start := time.Now()
	closed := make(chan string, 1)
	go func() {
		c.SetReadDeadline(time.Now().Add(5 * time.Second))
		b, _ := io.ReadAll(c)
		closed <- string(b)
	}()
	for i := 0; i < len(s); i++ {
		if _, err := c.Write([]byte{s[i]}); err != nil {
			break
		}
		time.Sleep(d)
	}
	out := <-closed
	return out, time.Since(start)
}
