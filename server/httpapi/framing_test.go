package httpapi

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// serveGuarded serves s on a loopback listener behind GuardFraming.
func serveGuarded(t *testing.T, s *Server) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hs := &http.Server{Handler: s}
	go hs.Serve(GuardFraming(ln))
	t.Cleanup(func() { hs.Close() })
	return ln.Addr().String()
}

// rawExchange sends text on a new connection and returns everything read back
// until the server closes it or a second passes.
func rawExchange(t *testing.T, addr, text string) string {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(time.Second))
	if _, err := io.WriteString(c, text); err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(c)
	return string(got)
}

func TestAmbiguousFramingRefused(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, ":memory:", nil)
	ts.c.MustQuery("create collection jobs (n int)")
	addr := serveGuarded(t, ts.Server)
	put := `{"query": "put jobs {n: 1}"}`
	chunked := fmt.Sprintf("%x\r\n%s\r\n0\r\n\r\n", len(put), put)
	blank := "{\"query\":\r\n\r\n \"put jobs {n: 2}\"}" // blank lines in a JSON body
	get := `{"query":"get jobs"}`

	// Both headers, in either order and any case: 400, closed, nothing run.
	for _, head := range []string{
		"Content-Length: 4\r\nTransfer-Encoding: chunked\r\n",
		"transfer-encoding: chunked\r\nCONTENT-LENGTH: 4\r\n",
	} {
		seq := ts.db.Seq()
		got := rawExchange(t, addr, "POST /query HTTP/1.1\r\nHost: localhost\r\n"+head+"\r\n"+chunked)
		if !strings.HasPrefix(got, "HTTP/1.1 400 ") || strings.Count(got, "HTTP/1.1 ") != 1 || !strings.Contains(got, `"code":"bad_request"`) || !strings.Contains(got, "both Content-Length and Transfer-Encoding") {
			t.Errorf("%q: answered %q", head, got)
		}
		if ts.db.Seq() != seq {
			t.Errorf("%q: the put ran", head)
		}
	}
	// Either alone is served, and so are requests after one another on one
	// connection whose bodies hold blank lines.
	r := bufio.NewReader(strings.NewReader(rawExchange(t, addr,
		"POST /query HTTP/1.1\r\nHost: localhost\r\nTransfer-Encoding: chunked\r\n\r\n"+chunked+
			fmt.Sprintf("POST /query HTTP/1.1\r\nHost: localhost\r\nContent-Length: %d\r\n\r\n%s", len(blank), blank)+
			fmt.Sprintf("POST /query HTTP/1.1\r\nHost: localhost\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s", len(get), get))))
	for i := range 3 {
		resp, err := http.ReadResponse(r, nil)
		if err != nil {
			t.Fatalf("answer %d: %v", i, err)
		}
		body, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != 200 {
			t.Errorf("answer %d: %d %s", i, resp.StatusCode, body)
		}
		if i == 2 && !strings.Contains(string(body), `"n":2`) {
			t.Errorf("the get answered %s", body)
		}
	}
}

// HEAD is answered for every GET route, without a body.
func TestHead(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, ":memory:", func(c *Config) { c.Token = "s3cret" })
	for _, c := range []struct {
		path, token string
		status      int
	}{
		{"/_health", "", 200},
		{"/collections", "s3cret", 200},
		{"/collections", "", 401},
		{"/_metrics", "s3cret", 200},
	} {
		req, _ := http.NewRequest("HEAD", ts.c.Base+c.path, nil)
		if c.token != "" {
			req.Header.Set("Authorization", "Bearer "+c.token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != c.status || len(body) != 0 {
			t.Errorf("HEAD %s: %d with %d bytes", c.path, resp.StatusCode, len(body))
		}
	}
	req, _ := http.NewRequest("HEAD", ts.c.Base+"/query", nil)
	req.Header.Set("Authorization", "Bearer s3cret")
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != 405 || resp.Header.Get("Allow") != "POST" {
		t.Errorf("HEAD /query: %v %v", resp, err)
	}
}
