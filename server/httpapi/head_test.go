package httpapi

import (
	"bufio"
	"bytes"
	"net/http"
	"reflect"
	"testing"
)

// FuzzHeadSubset: a head HTTPServer reads itself becomes the request
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
