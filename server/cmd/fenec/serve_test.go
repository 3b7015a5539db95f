package main

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/fenecdb/fenec/server/httpapi/apitest"
)

// TestSIGTERMClosesCleanly: SIGTERM ends the server with status 0 and the
// file holds what it answered.
func TestSIGTERMClosesCleanly(t *testing.T) {
	t.Parallel()
	file := t.TempDir() + "/term.db"
	p, c := start(t, "--file", file, "--sync", "off")
	c.MustQuery("create collection notes (s text)")
	c.MustQuery(`put notes {s: "kept"}`)
	if err := p.Stop(30 * time.Second); err != nil {
		t.Fatalf("after SIGTERM: %v\n%s", err, p.Log())
	}
	_, c = start(t, "--file", file)
	if body := string(c.MustQuery("get notes select s").Body); !strings.Contains(body, "kept") {
		t.Errorf("after a clean stop under --sync off, the note is gone: %s", body)
	}
}

// TestRefusesToStart: flags that would make an unsafe or broken server.
func TestRefusesToStart(t *testing.T) {
	t.Parallel()
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"--http", "0.0.0.0:0", "--file", ":memory:"}, "no --token"},
		{[]string{"--http", ":0", "--file", ":memory:"}, "no --token"},
		{[]string{"--http", ":0", "--file", ":memory:"}, "--insecure-open"},
		{[]string{"--max-conns", "-1", "--file", ":memory:"}, "--max-conns"},
		{[]string{"--max-conns-per-addr", "-1", "--file", ":memory:"}, "--max-conns-per-addr"},
		{[]string{"--idle-timeout", "0s", "--file", ":memory:"}, "--idle-timeout"},
		{[]string{"--changes-retain", "0", "--file", ":memory:"}, "--changes-retain"},
		{[]string{"--changes-heartbeat", "0s", "--file", ":memory:"}, "--changes-heartbeat"},
		{[]string{"--host", "", "--file", ":memory:"}, "not a host name"},
		{[]string{"--sync", "sometimes", "--file", ":memory:"}, "--sync"},
		{[]string{"--clock", "sundial", "--file", ":memory:"}, "--clock"},
		{[]string{"--max-body", "0", "--file", ":memory:"}, "--max-body"},
		{[]string{"--memory", "0", "--file", ":memory:"}, `invalid value "0" for flag -memory: "0" is not a size`},
		{[]string{"--memory", "lots", "--file", ":memory:"}, `"lots" is not a size`},
		{[]string{"--memory", "-1GiB", "--file", ":memory:"}, `"-1GiB" is not a size`},
		{[]string{"--memory", "1.5GiB", "--file", ":memory:"}, `"1.5GiB" is not a size`},
		{[]string{"--idempotency-ttl", "-1s", "--file", ":memory:"}, "--idempotency-ttl"},
		{[]string{"--statement-timeout", "0s", "--file", ":memory:"}, "--statement-timeout"},
		{[]string{"--nope"}, "flag provided but not defined"},
		{[]string{"--cors-origin", "*", "--file", ":memory:"}, `invalid value "*" for flag -cors-origin: "*" is not an origin`},
		{[]string{"--cors-origin", "https://app.example.com/", "--file", ":memory:"}, `a browser sends this origin as "https://app.example.com"`},
		{[]string{"--raft", "127.0.0.1:0", "--file", ":memory:"}, "need --node-id"},
		{[]string{"--node-id", "n1", "--file", ":memory:"}, "--node-id needs --raft"},
		{[]string{"--node-id", "n1", "--raft", "127.0.0.1:0", "--file", ":memory:"}, "a cluster node needs a --file"},
		{[]string{"--node-id", "n1", "--raft", "127.0.0.1:0", "--file", "x.db", "--sync", "off"}, "not off"},
		{[]string{"--node-id", "n1", "--raft", "127.0.0.1:0", "--file", "x.db", "--bootstrap", "n2=127.0.0.1:1"}, "does not name this node"},
		{[]string{"--node-id", "n1", "--raft", "127.0.0.1:0", "--file", "x.db", "--bootstrap", "n1"}, "want id=host:port"},
		{[]string{"--node-id", "n1", "--raft", "127.0.0.1:0", "--file", "x.db", "--raft-snapshot-check", "0s"}, "--raft-snapshot-check 0s: want 10ms or more"},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			out, err := exec.Command(bin, append([]string{"serve"}, tt.args...)...).CombinedOutput()
			if err == nil {
				t.Fatalf("started; want a refusal naming %q", tt.want)
			}
			if !strings.Contains(string(out), tt.want) {
				t.Errorf("refusal %q does not name %q", out, tt.want)
			}
		})
	}
}

// TestNonLoopbackWithTokenOrInsecure: a token, or --insecure-open, lets the
// server listen beyond loopback (it is still reached on 127.0.0.1 here);
// without TLS, --insecure is needed either way (tls_test.go). The token
// then guards every route but /_health.
func TestNonLoopbackWithTokenOrInsecure(t *testing.T) {
	t.Parallel()
	tests := []struct {
		flags       []string
		collections int // GET /collections without a token
	}{
		{[]string{"--token=s3cret", "--insecure"}, 401},
		{[]string{"--insecure-open", "--insecure"}, 200},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.flags, " "), func(t *testing.T) {
			p := apitest.Start(t, bin, append([]string{"--file", ":memory:", "--http", "0.0.0.0:0"}, tt.flags...)...)
			_, port, _ := net.SplitHostPort(strings.TrimPrefix(p.URL, "http://"))
			c := &apitest.Client{T: t, Base: "http://127.0.0.1:" + port}
			if r, err := c.Do("GET", "/_health", nil, nil); err != nil || r.Status != 200 {
				t.Fatalf("/_health: %v %v", err, r)
			}
			r, err := c.Do("GET", "/collections", nil, nil)
			if err != nil || r.Status != tt.collections {
				t.Fatalf("/collections without a token: %v %v, want %d", err, r, tt.collections)
			}
			if tt.collections == 401 {
				if got := r.Header.Get("WWW-Authenticate"); !strings.HasPrefix(got, "Bearer") {
					t.Errorf("WWW-Authenticate: %q", got)
				}
				c.Token = "s3cret"
				if r, err := c.Do("GET", "/collections", nil, nil); err != nil || r.Status != 200 {
					t.Errorf("/collections with the token: %v %v", err, r)
				}
			}
		})
	}
}

// TestServeKeepsSysmonAwake: fenec serve runs with GODEBUG's schedtrace
// set (httpapi.SchedEnv), read from the environment the running process
// was started with — its own exec of itself — and a GODEBUG that names
// schedtrace already is the one it runs with.
func TestServeKeepsSysmonAwake(t *testing.T) {
	godebug := func(p *apitest.Process) string {
		t.Helper()
		raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", p.Cmd.Process.Pid))
		if err != nil {
			t.Skipf("no /proc here: %v", err)
		}
		for _, kv := range strings.Split(string(raw), "\x00") {
			if v, ok := strings.CutPrefix(kv, "GODEBUG="); ok {
				return v
			}
		}
		return ""
	}
	t.Setenv("GODEBUG", "gctrace=0")
	p, _ := start(t, "--file", ":memory:")
	if got := godebug(p); got != "gctrace=0,schedtrace=2147483647" {
		t.Errorf("fenec serve runs with GODEBUG=%q, want gctrace=0,schedtrace=2147483647", got)
	}
	t.Setenv("GODEBUG", "schedtrace=0")
	p, _ = start(t, "--file", ":memory:")
	if got := godebug(p); got != "schedtrace=0" {
		t.Errorf("with GODEBUG=schedtrace=0 fenec serve runs with GODEBUG=%q", got)
	}
}

// TestMemoryFlag: --memory is the collector's soft limit, and once the file
// is loaded the collector's target is back at the server's 400 (loading
// ran at httpapi.LoadGCPercent, so that the load's garbage does not become
// the server's resident memory).
func TestMemoryFlag(t *testing.T) {
	t.Parallel()
	gauges := func(c *apitest.Client) map[string]float64 {
		r, err := c.Do("GET", "/_metrics", nil, nil)
		if err != nil || r.Status != 200 {
			t.Fatalf("/_metrics: %v %v", err, r)
		}
		out := map[string]float64{}
		for _, line := range strings.Split(string(r.Body), "\n") {
			for _, name := range []string{"go_gc_gomemlimit_bytes", "go_gc_gogc_percent"} {
				if v, ok := strings.CutPrefix(line, name+" "); ok {
					out[name], _ = strconv.ParseFloat(v, 64)
				}
			}
		}
		return out
	}
	file := filepath.Join(t.TempDir(), "m.db")
	for _, tt := range []struct {
		arg   string
		limit float64
	}{{"300MiB", 300 << 20}, {"2GB", 2e9}, {"123456789", 123456789}} {
		p, c := start(t, "--file", file, "--memory", tt.arg)
		c.MustQuery("create collection if not exists m (payload json)")
		c.MustQuery("put m {payload: {a: 1}}")
		g := gauges(c)
		if g["go_gc_gomemlimit_bytes"] != tt.limit || g["go_gc_gogc_percent"] != 400 {
			t.Errorf("--memory %s: the runtime's limit %v and GOGC %v; want %v and 400", tt.arg, g["go_gc_gomemlimit_bytes"], g["go_gc_gogc_percent"], tt.limit)
		}
		if err := p.Stop(10 * time.Second); err != nil {
			t.Fatal(err)
		}
	}
}
