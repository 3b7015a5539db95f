// Package apitest is for tests that talk to a Fenec server over HTTP: a
// client that checks every answer it receives against openapi.yaml, and a
// starter for the real `fenec serve` binary.
package apitest

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	mrand "math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/fenecdb/fenec/server/internal/syncbuf"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/legacy"

	"github.com/fenecdb/fenec/server/httpapi/gen"
)

var (
	specOnce sync.Once
	spec     *openapi3.T
	router   routers.Router
	specErr  error
)

func loadSpec() (*openapi3.T, routers.Router, error) {
	specOnce.Do(func() {
		spec, specErr = gen.GetSwagger()
		if specErr == nil {
			spec.Servers = nil // match requests by path, whatever the host
			router, specErr = legacy.NewRouter(spec)
		}
	})
	return spec, router, specErr
}

// Client sends requests to one server and fails its test on any answer
// that breaks the spec.
type Client struct {
	T     testing.TB
	Base  string // http://host:port
	Token string
	HTTP  *http.Client // default: a client with a 60 s timeout
}

// Response is an answer, read whole.
type Response struct {
	Status int
	Header http.Header
	Body   []byte
}

// JSON decodes the body into v, failing the test when it cannot.
func (r *Response) JSON(t testing.TB, v any) {
	t.Helper()
	if err := json.Unmarshal(r.Body, v); err != nil {
		t.Fatalf("answer %d %s is not the JSON expected: %v", r.Status, r.Body, err)
	}
}

// Code returns the "code" of an error answer ("" for none).
func (r *Response) Code() string {
	var e struct{ Code string }
	_ = json.Unmarshal(r.Body, &e)
	return e.Code
}

// Query sends POST /query and returns the response; an error is a failure
// to get an answer at all.
func (c *Client) Query(query string, params ...any) (*Response, error) {
	if params == nil {
		params = []any{}
	}
	return c.Do("POST", "/query", map[string]any{"query": query, "params": params}, nil)
}

// MustQuery is Query that fails the test unless the answer is a 200.
func (c *Client) MustQuery(query string, params ...any) *Response {
	c.T.Helper()
	r, err := c.Query(query, params...)
	if err != nil {
		c.T.Fatalf("%s: %v", query, err)
	}
	if r.Status != http.StatusOK {
		c.T.Fatalf("%s: %d %s", query, r.Status, r.Body)
	}
	return r
}

// Do sends a request. body is sent as is when it is a string or []byte,
// as JSON otherwise, and not at all when nil.
func (c *Client) Do(method, path string, body any, header map[string]string) (*Response, error) {
	var raw []byte
	switch b := body.(type) {
	case nil:
	case string:
		raw = []byte(b)
	case []byte:
		raw = b
	default:
		var err error
		if raw, err = json.Marshal(b); err != nil {
			return nil, err
		}
	}
	req, err := http.NewRequest(method, c.Base+path, bytes.NewReader(raw))
	if err != nil {
		return nil, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.Token != "" {
		req.Header.Set("Authorization", "Bearer "+c.Token)
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	hc := c.HTTP
	if hc == nil {
		hc = &http.Client{Timeout: 60 * time.Second}
	}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	got, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	r := &Response{Status: resp.StatusCode, Header: resp.Header, Body: got}
	// The request is rebuilt for the validator: the first one's body is spent.
	vreq, _ := http.NewRequest(method, path, bytes.NewReader(raw))
	vreq.Header = req.Header
	if err := Validate(vreq, r); err != nil {
		c.T.Errorf("%s %s answered %d %s, which breaks openapi.yaml: %v", method, path, r.Status, got, err)
	}
	return r, nil
}

// Validate checks an answer against openapi.yaml. An answer to a request
// the spec has no operation for (404, 405) must still be an Error.
func Validate(req *http.Request, r *Response) error {
	spec, router, err := loadSpec()
	if err != nil {
		return err
	}
	route, params, err := router.FindRoute(req)
	if err != nil {
		if r.Status != http.StatusNotFound && r.Status != http.StatusMethodNotAllowed {
			return fmt.Errorf("no operation for the request, yet status %d", r.Status)
		}
		var v any
		if err := json.Unmarshal(r.Body, &v); err != nil {
			return fmt.Errorf("the error is not JSON: %w", err)
		}
		return spec.Components.Schemas["Error"].Value.VisitJSON(v)
	}
	in := &openapi3filter.ResponseValidationInput{
		RequestValidationInput: &openapi3filter.RequestValidationInput{
			Request: req, PathParams: params, Route: route,
			Options: &openapi3filter.Options{AuthenticationFunc: openapi3filter.NoopAuthenticationFunc},
		},
		Status:  r.Status,
		Header:  r.Header,
		Options: &openapi3filter.Options{IncludeResponseStatus: true, MultiError: true},
	}
	in.SetBodyBytes(r.Body)
	return openapi3filter.ValidateResponse(context.Background(), in)
}

// Process is a running `fenec serve`.
type Process struct {
	URL    string // http://127.0.0.1:<port>; https:// with --tls-cert
	Cmd    *exec.Cmd
	stderr *syncbuf.Buffer
	done   chan struct{}
	err    error
}

// Start runs bin serve with args plus --http 127.0.0.1:0, waits for its
// "listening on" line, and kills it when the test ends.
func Start(t testing.TB, bin string, args ...string) *Process {
	t.Helper()
	cmd := exec.Command(bin, append([]string{"serve", "--http", "127.0.0.1:0"}, args...)...)
	p := &Process{Cmd: cmd, stderr: &syncbuf.Buffer{}, done: make(chan struct{})}
	cmd.Stderr = p.stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	addr := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if a, ok := strings.CutPrefix(sc.Text(), "listening on "); ok {
				addr <- a
			}
		}
	}()
	go func() { p.err = cmd.Wait(); close(p.done) }()
	t.Cleanup(func() { p.Kill() })
	select {
	case a := <-addr:
		p.URL = "http://" + a
		if slices.Contains(args, "--tls-cert") {
			p.URL = "https://" + a
		}
	case <-p.done:
		t.Fatalf("fenec serve %v exited before listening: %v\n%s", args, p.err, p.Log())
	case <-time.After(30 * time.Second):
		t.Fatalf("fenec serve %v did not print \"listening on\" in 30 s\n%s", args, p.Log())
	}
	return p
}

// Kill sends SIGKILL and waits for the process to end.
func (p *Process) Kill() {
	_ = p.Cmd.Process.Signal(syscall.SIGKILL)
	<-p.done
}

// Stop sends SIGTERM and returns how the process exited (nil: status 0).
func (p *Process) Stop(timeout time.Duration) error {
	_ = p.Cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
		return p.err
	case <-time.After(timeout):
		p.Kill()
		return fmt.Errorf("did not exit %v after SIGTERM", timeout)
	}
}

// Build compiles the fenec binary into dir and returns its path. Call it
// once per test package, from TestMain. It builds in the server's module
// whichever module the test is in (the benchmark's, bench/, is another).
func Build(dir string) (string, error) {
	bin := dir + "/fenec"
	cmd := exec.Command("go", "build", "-o", bin, "github.com/fenecdb/fenec/server/cmd/fenec")
	if _, file, _, ok := runtime.Caller(0); ok {
		cmd.Dir = filepath.Join(filepath.Dir(file), "..", "..") // server/, from server/httpapi/apitest
	}
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	return bin, cmd.Run()
}

// From returns an HTTP client whose connections come from the loopback
// address host (127.0.0.2, 127.0.0.3, …: on Linux every 127.0.0.0/8
// address is the loopback's). The server tells clients apart by address
// (a refused token slows down its address's next refusals, connections are
// counted per address), so a test that must not meet its own earlier
// refusals sends each from an address of its own.
func From(host string) *http.Client {
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(host)}, Timeout: 10 * time.Second}
	return &http.Client{Timeout: 60 * time.Second, Transport: &http.Transport{DialContext: d.DialContext}}
}

// Log returns what the process wrote to stderr so far.
func (p *Process) Log() string { return p.stderr.String() }

// handed is every address FreeAddr answered in this process.
var (
	handedMu sync.Mutex
	handed   = map[string]bool{}
)

// FreeAddr returns a loopback address free now, on a port below the
// kernel's ephemeral range: a port from that range (a listener on :0)
// may be handed to any outgoing connection on the machine — a client's
// of this very test — between its release here and a node's bind, and a
// node restarted after a kill must bind its raft address again. It never
// returns one address twice in a process: addresses picked together are
// all free when picked but none bound yet, so a repeat would give two
// nodes one port.
func FreeAddr(t testing.TB) string {
	t.Helper()
	low := 32768
	if b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range"); err == nil {
		if f := strings.Fields(string(b)); len(f) == 2 {
			if n, err := strconv.Atoi(f[0]); err == nil && n > 12000 {
				low = n
			}
		}
	}
	for try := 0; try < 1000; try++ {
		addr := fmt.Sprintf("127.0.0.1:%d", 10000+mrand.IntN(low-10000))
		handedMu.Lock()
		again := handed[addr]
		handedMu.Unlock()
		if again {
			continue
		}
		if ln, err := net.Listen("tcp", addr); err == nil {
			ln.Close()
			handedMu.Lock()
			again = handed[addr] // another goroutine's pick meanwhile
			handed[addr] = true
			handedMu.Unlock()
			if !again {
				return addr
			}
		}
	}
	t.Fatal("no free port below the ephemeral range in 1000 tries")
	return ""
}
