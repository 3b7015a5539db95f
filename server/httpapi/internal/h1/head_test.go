package h1

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"fmt"
	"io"
	"log"
	"maps"
	"net"
	"net/http"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
)

// FuzzHeadSubset: a head Server reads itself becomes the request
// net/http's reader makes of it, field for field; heads it does not read
// are left to net/http.
func FuzzHeadSubset(f *testing.F) {
	for _, s := range []string{
		"GET / HTTP/1.1\r\nHost: x\r\n\r\n",
		"POST /query HTTP/1.1\r\nHost: 127.0.0.1:8080\r\nContent-Length: 5\r\nContent-Type: application/json\r\nAuthorization: Bearer t\r\nFenec-Wait: 30000\r\n\r\n",
		"GET /_metrics?x=1&y=%20 HTTP/1.1\r\nhost: [::1]:80\r\naccept-ENCODING: gzip\r\nX-A: 1\r\nx-a: 2\r\n\r\n",
		"GET /a%2Fb/../c HTTP/1.1\r\nHost: x\r\nConnection: close\r\nPragma: no-cache\r\n\r\n",
		"HEAD /console/ HTTP/1.1\r\nHost: x\r\nIdempotency-Key:   k \t\r\nEmpty:\r\n\r\n",
		"GET //x/y?#f HTTP/1.1\r\nHost: x\r\nConnection: keep-alive\r\n\r\n",
		"OPTIONS /query HTTP/1.1\r\nHost: x\r\nOrigin: http://a\r\nAccess-Control-Request-Method: POST\r\n\r\n",
		"GET / HTTP/1.1\r\nHost: x\r\nContent-Length: 007\r\n\r\n",
		"GET /;a=b HTTP/1.1\r\nHost: x\r\n\r\n",
		"GET /é HTTP/1.1\r\nHost: x\r\n\r\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		c := &conn{buf: raw, w: len(raw), remote: "r"}
		if c.hd.scan(raw) != headDone || !c.buildRequest() {
			return
		}
		got := &c.req
		want, err := http.ReadRequest(bufio.NewReader(bytes.NewReader(raw)))
		if err != nil {
			t.Fatalf("%q: read here, refused by net/http: %v", raw, err)
		}
		if got.Method != want.Method || !reflect.DeepEqual(got.URL, want.URL) || got.Proto != want.Proto ||
			got.ProtoMajor != want.ProtoMajor || got.ProtoMinor != want.ProtoMinor || got.Host != want.Host ||
			got.RequestURI != want.RequestURI || got.ContentLength != want.ContentLength || got.Close != want.Close {
			t.Fatalf("%q:\nhere     %s %#v %s %q %q %d %v\nnet/http %s %#v %s %q %q %d %v", raw,
				got.Method, got.URL, got.Proto, got.Host, got.RequestURI, got.ContentLength, got.Close,
				want.Method, want.URL, want.Proto, want.Host, want.RequestURI, want.ContentLength, want.Close)
		}
		if (got.Body == http.NoBody) != (want.Body == http.NoBody) {
			t.Fatalf("%q: a body here %v, under net/http %v", raw, got.Body != http.NoBody, want.Body != http.NoBody)
		}
		want.Header.Del("Host") // net/http's server takes it out, as here
		if !reflect.DeepEqual(got.Header, want.Header) {
			t.Fatalf("%q: headers\nhere     %q\nnet/http %q", raw, got.Header, want.Header)
		}
		if c.r != len(raw) && !bytes.HasSuffix(raw[:c.r], []byte("\r\n\r\n")) {
			t.Fatalf("%q: the head ends at %d", raw, c.r)
		}
	})
}

// TestHeadOdd: what net/http reads otherwise, or refuses, is not read
// here.
func TestHeadOdd(t *testing.T) {
	for _, s := range []string{
		"GET / HTTP/1.0\r\nHost: x\r\n\r\n",
		"GET / HTTP/1.1\r\n\r\n",
		"GET / HTTP/1.1\r\nHost: x\r\nHost: y\r\n\r\n",
		"GET / HTTP/1.1\r\nHost: x y\r\n\r\n",
		"GET / HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\nContent-Length: 1\r\n\r\n",
		"GET / HTTP/1.1\r\nHost: x\r\nContent-Length: -1\r\n\r\n",
		"GET / HTTP/1.1\r\nHost: x\r\nContent-Length: \r\n\r\n",
		"GET / HTTP/1.1\r\nHost: x\r\nContent-Length: 1234567890123456789\r\n\r\n",
		"GET / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n",
		"GET / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: identity\r\n\r\n",
		"GET / HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\n\r\n",
		"GET / HTTP/1.1\r\nHost: x\r\nUpgrade: h2c\r\n\r\n",
		"GET / HTTP/1.1\r\nHost: x\r\nConnection: upgrade\r\n\r\n",
		"GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\nConnection: close\r\n\r\n",
		"GET / HTTP/1.1\r\nHost: x\r\nX: a\rb\r\n\r\n",
		"GET / HTTP/1.1\r\nHost: x\r\nX: a\x00b\r\n\r\n",
		"GET / HTTP/1.1\r\nHost: x\r\n X: a\r\n\r\n",
		"GET / HTTP/1.1\r\nHost: x\r\nX : a\r\n\r\n",
		"GET / HTTP/1.1\r\nHost: x\r\nX(: a\r\n\r\n",
		"GET / HTTP/1.1\nHost: x\r\n\r\n",
		"GET / HTTP/1.1\r\nHost: x\n\r\n",
		"GET / HTTP/1.1\r\nHost: x\r\n\n",
		"GET  / HTTP/1.1\r\nHost: x\r\n\r\n",
		"GET / HTTP/1.1 \r\nHost: x\r\n\r\n",
		"GET * HTTP/1.1\r\nHost: x\r\n\r\n",
		"GET http://x/ HTTP/1.1\r\nHost: x\r\n\r\n",
		"CONNECT x:1 HTTP/1.1\r\nHost: x\r\n\r\n",
		"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n",
		"get / HTTP/1.1\r\nHost: x\r\n\r\n",
		"GET /\x7f HTTP/1.1\r\nHost: x\r\n\r\n",
	} {
		if v := new(head).scan([]byte(s)); v != headOdd {
			t.Errorf("%q: %d, want it left to net/http", s, v)
		}
	}
	for _, s := range []string{"", "GET", "GET / HTTP/1.1\r\n", "GET / HTTP/1.1\r\nHost: x\r\n", "GET / HTTP/1.1\r\nHost: x\r\n\r"} {
		if v := new(head).scan([]byte(s)); v != headMore {
			t.Errorf("%q: %d, want more", s, v)
		}
	}
}

// FuzzConnSame: any bytes a client sends on a connection (then ending its
// writes) get the same answers — byte for byte, Date aside — from
// Server as from net/http alone (behind GuardFraming), from a handler
// that echoes every request as it read it: the two never frame a stream
// of requests differently.
func FuzzConnSame(f *testing.F) {
	for _, s := range []string{
		"GET / HTTP/1.1\r\nHost: x\r\n\r\nGET /a?b HTTP/1.1\r\nHost: y\r\n\r\n",
		"POST /q HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\nabc\r\nGET / HTTP/1.1\r\nHost: x\r\n\r\n",
		"POST /q HTTP/1.1\r\nHost: x\r\nContent-Length: 003\r\n\r\nabcGET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\nGET / HTTP/1.1\r\nHost: x\r\n\r\n",
		"GET / HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\nhiHEAD / HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\n\r\n!",
		"POST /q HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\nGET / HTTP/1.1\r\nHost: x\r\n\r\n",
		"GET / HTTP/1.1\r\nHost: x\r\n\r\nPOST /q HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
		"POST /q HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\nabc",
		"GET / HTTP/1.1\r\nHost: x\r\nX: a\r\n b\r\n\r\nGET / HTTP/1.1\r\nHost: x\r\n\r\n",
		"GET / HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\nContent-Length: 1\r\n\r\nxGET / HTTP/1.1\r\nHost: x\r\n\r\n",
		"GET / HTTP/1.1\r\nHost: x\r\n\r\nGET / HTTP/1.0\r\n\r\n",
		"POST / HTTP/1.1\r\nHost: x\r\n\r\n\r\n\r\n\r\nGET / HTTP/1.1\r\nHost: x\r\n\r\n",
		// Fewer than 4 bytes after a request, then the end: no answer.
		"HEAD / HTTP/1.1\r\nHost:0\r\n\r\n0",
		"POST / HTTP/1.1\r\nHost: x\r\n\r\n\r\nG",
		"GET / HTTP/1.1\r\nHost: x\r\n\r\n0\r\n",
		"GET / HTTP/1.1\r\nHost: x\r\n\r\n0\r\n\r\n",
	} {
		f.Add([]byte(s))
	}
	echo := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, err := io.ReadAll(r.Body)
		var d strings.Builder
		fmt.Fprintf(&d, "%s %q %s %q %v %d\n", r.Method, r.RequestURI, r.Proto, r.Host, r.Close, r.ContentLength)
		keys := slices.Sorted(maps.Keys(r.Header))
		for _, k := range keys {
			fmt.Fprintf(&d, "%s: %q\n", k, r.Header[k])
		}
		fmt.Fprintf(&d, "body %q %v\n", b, err)
		sum := sha256.Sum256([]byte(d.String()))
		fmt.Fprintf(w, "%x %.300q\n", sum, d.String())
	})
	quiet := log.New(io.Discard, "", 0)
	srv := New(echo, &http.Server{Handler: echo, ErrorLog: quiet})
	lean, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		f.Fatal(err)
	}
	go srv.Serve(lean)
	defer srv.Close()
	bare := &http.Server{Handler: echo, ErrorLog: quiet}
	bareLn, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		f.Fatal(err)
	}
	go bare.Serve(GuardFraming(bareLn))
	defer bare.Close()
	// Whether an answer says Connection: close is compared by the answers
	// that follow it, not by the header: net/http does not always say it
	// (a body cut short) where it closes.
	date := regexp.MustCompile(`\r\n(Date: [^\r]*|Connection: close)`)
	send := func(t *testing.T, addr string, raw []byte) string {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		c.Write(raw)
		c.(*net.TCPConn).CloseWrite()
		c.SetReadDeadline(time.Now().Add(5 * time.Second))
		out, err := io.ReadAll(c)
		if isTimeout(err) {
			t.Fatalf("%s: no end of the answers to %q", addr, raw)
		}
		return date.ReplaceAllString(string(out), "")
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		if len(raw) > 8<<10 {
			return
		}
		l, b := send(t, lean.Addr().String(), raw), send(t, bareLn.Addr().String(), raw)
		if strings.HasSuffix(b, date.ReplaceAllString(ambiguousFramingAnswer, "")) {
			// GuardFraming drops what it read with the refused head, the
			// requests before it too; Server answers those first.
			b = b[strings.LastIndex(b, "HTTP/1.1 400"):]
			l = l[max(0, strings.LastIndex(l, "HTTP/1.1 400")):]
		}
		if l != b {
			t.Fatalf("%q:\nServer %q\nnet/http   %q", raw, l, b)
		}
	})
}
