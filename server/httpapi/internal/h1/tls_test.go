package h1

import (
	"crypto/tls"
	"crypto/x509"
	"io"
	"log"
	"net/http"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/fenecdb/fenec/server/httpapi/internal/h1/h1test"
	"github.com/fenecdb/fenec/server/tlsfiles/tlstest"
)

// TestConnTLS: over ServeTLS the requests are served as over TCP: a
// request running past watchAfter whose client goes away ends its
// context (the watch reads the TLS connection while the handler runs), a
// pipelined request does not, a head beyond the fast path is handed to
// net/http on the same TLS connection, and nothing is left running.
func TestConnTLS(t *testing.T) {
	dir := t.TempDir()
	ca := tlstest.NewCA(t, dir, "test")
	leaf := ca.Issue("server")
	pair, err := tls.LoadX509KeyPair(leaf.CertFile, leaf.KeyFile)
	if err != nil {
		t.Fatal(err)
	}
	pem, err := os.ReadFile(ca.File)
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(pem)

	cancelled := make(chan bool, 1)
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/long" {
			io.WriteString(w, "ok")
			return
		}
		longUntilGone(w, r, cancelled)
	})
	srv := New(h, &http.Server{Handler: h, ErrorLog: log.New(t.Output(), "", 0)})
	ln := h1test.MustListen(t)
	go srv.ServeTLS(ln, &tls.Config{Certificates: []tls.Certificate{pair}})
	t.Cleanup(func() { srv.Close() })
	dial := func() *tls.Conn {
		c, err := tls.Dial("tcp", ln.Addr().String(), &tls.Config{RootCAs: roots, ServerName: "localhost"})
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	c := dial()
	c.Close()
	awaitConns(t, srv, 0)
	before := runtime.NumGoroutine()
	long := "GET /long HTTP/1.1\r\nHost: x\r\n\r\n"

	c = dial()
	io.WriteString(c, long)
	awaitWatched(t, srv)
	start := time.Now()
	c.Close()
	if !<-cancelled || time.Since(start) > 500*time.Millisecond {
		t.Fatalf("a long request's client gone: its context did not end within 500 ms (%v)", time.Since(start))
	}

	c = dial()
	longThenPipelined(t, srv, c, cancelled)
	c.Close()

	c = dial()
	io.WriteString(c, "GET / HTTP/1.1\r\nHost: x\r\nX-Pad: "+strings.Repeat("p", 2*connBufSize)+"\r\nConnection: close\r\n\r\n")
	c.SetReadDeadline(time.Now().Add(2 * time.Second))
	out, _ := io.ReadAll(c)
	c.Close()
	if rs := h1test.AnswersIn(t, string(out), "GET"); rs[0].Text != "ok" {
		t.Fatalf("handed to net/http: %q", rs[0].Text)
	}
	if srv.Handoffs() != 1 {
		t.Errorf("%d connections handed to net/http, want 1", srv.Handoffs())
	}
	h1test.AwaitGoroutines(t, before)
}
