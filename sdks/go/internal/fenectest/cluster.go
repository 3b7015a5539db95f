package fenectest

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Cluster is three real `fenec serve` nodes on loopback ports, started
// as server/cmd/fenec/cluster_test.go starts them (docs/cluster.md).
type Cluster struct {
	Nodes []*Node
	Token string
	t     testing.TB
}

// Node is one node of a [Cluster].
type Node struct {
	ID  string
	URL string // http://127.0.0.1:port, its --http and so its Fenec-Leader
	*Server
}

// direct is a client of the test's own: never through $http_proxy, and
// bounded, so a dead node fails a look fast.
var direct = &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{Proxy: nil}}

func freeAddr(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// StartCluster starts n nodes (`--node-id nK --raft … --http … --file …
// --bootstrap n1=…,…`), all with token as --token, and waits until one
// leads and takes writes. They are killed when the test ends.
func StartCluster(t testing.TB, n int, token string) *Cluster {
	t.Helper()
	// A port found free may be taken by another process before a node
	// binds it: then the whole cluster starts again on other ports.
	for try := 1; ; try++ {
		c, err := startCluster(t, n, token)
		if err == nil {
			c.Leader(20 * time.Second)
			return c
		}
		if try == 3 || !strings.Contains(err.Error(), "address already in use") {
			t.Fatal(err)
		}
		t.Logf("starting the cluster again on other ports: %v", err)
	}
}

func startCluster(t testing.TB, n int, token string) (*Cluster, error) {
	dir := t.TempDir()
	c := &Cluster{Token: token, t: t}
	var peers, raft []string
	for i := 1; i <= n; i++ {
		nd := &Node{ID: fmt.Sprintf("n%d", i)}
		raft = append(raft, freeAddr(t))
		peers = append(peers, nd.ID+"="+raft[i-1])
		c.Nodes = append(c.Nodes, nd)
	}
	for i, nd := range c.Nodes {
		http := freeAddr(t)
		nd.URL = "http://" + http
		nd.Server = &Server{t: t, args: []string{"serve", "--node-id", nd.ID, "--raft", raft[i],
			"--file", filepath.Join(dir, nd.ID+".db"), "--bootstrap", strings.Join(peers, ","), "--token", token}}
		if err := nd.tryStart(http); err != nil {
			for _, started := range c.Nodes[:i] {
				started.Kill()
			}
			return nil, err
		}
		t.Cleanup(nd.Kill) // throwaway files: no need for a graceful handover
	}
	return c, nil
}

// Kill stops the node at once (SIGKILL) and waits for it to be gone.
func (s *Server) Kill() {
	if s.cmd == nil {
		return
	}
	s.cmd.Process.Signal(syscall.SIGKILL)
	<-s.done
	s.cmd = nil
}

// Up reports whether the node runs.
func (s *Server) Up() bool { return s.cmd != nil }

// Do sends one request to the node with the cluster's token, and returns
// the status and body; a request that gets no answer is a failure.
func (c *Cluster) Do(nd *Node, method, path string, body any) (int, []byte) {
	c.t.Helper()
	status, b, err := c.do(nd, method, path, body)
	if err != nil {
		c.t.Fatalf("%s %s on %s: %v", method, path, nd.ID, err)
	}
	return status, b
}

func (c *Cluster) do(nd *Node, method, path string, body any) (int, []byte, error) {
	var r io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return 0, nil, err
		}
		r = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, nd.URL+path, r)
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Authorization", "Bearer "+c.Token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := direct.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, b, err
}

// Role returns the node's role in GET /_cluster ("leader", "follower",
// …), or "" when it does not answer.
func (c *Cluster) Role(nd *Node) string {
	if !nd.Up() {
		return ""
	}
	status, b, err := c.do(nd, "GET", "/_cluster", nil)
	var st struct{ Role string }
	if err != nil || status != 200 || json.Unmarshal(b, &st) != nil {
		return ""
	}
	return st.Role
}

// Leader waits until a running node says it leads in GET /_cluster and
// takes a write, and returns it.
func (c *Cluster) Leader(within time.Duration) *Node {
	c.t.Helper()
	for deadline := time.Now().Add(within); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		for _, nd := range c.Nodes {
			if c.Role(nd) != "leader" {
				continue
			}
			status, _, err := c.do(nd, "POST", "/query", map[string]any{"query": "create collection if not exists probes (k int)"})
			if err == nil && status == 200 {
				return nd
			}
		}
	}
	c.t.Fatalf("no node led and took a write within %v", within)
	return nil
}

// Followers returns the running nodes other than leader.
func (c *Cluster) Followers(leader *Node) []*Node {
	var fs []*Node
	for _, nd := range c.Nodes {
		if nd != leader && nd.Up() {
			fs = append(fs, nd)
		}
	}
	return fs
}

// Metric returns the sum of the node's samples of a metric whose line
// starts with prefix (a name, or a name and the start of its labels, as
// `fenec_http_requests_total{route="/query"`).
func (c *Cluster) Metric(nd *Node, prefix string) float64 {
	c.t.Helper()
	status, b := c.Do(nd, "GET", "/_metrics", nil)
	if status != 200 {
		c.t.Fatalf("GET /_metrics on %s: %d %s", nd.ID, status, b)
	}
	var sum float64
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, prefix) {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			c.t.Fatalf("%s: %v", line, err)
		}
		sum += v
	}
	return sum
}
