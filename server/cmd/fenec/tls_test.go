package main

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/fenecdb/fenec/server/httpapi/apitest"
	"github.com/fenecdb/fenec/server/tlsfiles/tlstest"
)

// caPool reads a CA file into a pool.
func caPool(t *testing.T, file string) *x509.CertPool {
	t.Helper()
	pem, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	p := x509.NewCertPool()
	if !p.AppendCertsFromPEM(pem) {
		t.Fatalf("%s: no certificate", file)
	}
	return p
}

// httpsClient is a client of url trusting cfg's roots.
func httpsClient(t *testing.T, url string, cfg *tls.Config) *apitest.Client {
	return &apitest.Client{T: t, Base: url, HTTP: &http.Client{Timeout: 10 * time.Second,
		Transport: &http.Transport{Proxy: nil, TLSClientConfig: cfg}}}
}

// TestHTTPS: with --tls-cert the API is served over TLS, the fast path
// and the requests handed to net/http alike; a client that does not trust
// the certificate's CA is refused by its own TLS check, and plain HTTP to
// the port gets no answer.
func TestHTTPS(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ca := tlstest.NewCA(t, dir, "test")
	leaf := ca.Issue("server")
	p := apitest.Start(t, bin, "--file", ":memory:", "--tls-cert", leaf.CertFile, "--tls-key", leaf.KeyFile)
	if !strings.HasPrefix(p.URL, "https://") {
		t.Fatalf("URL %s", p.URL)
	}
	c := httpsClient(t, p.URL, &tls.Config{RootCAs: caPool(t, ca.File)})
	c.MustQuery("create collection notes (s text)")
	c.MustQuery(`put notes {s: "over tls"}`)
	if body := string(c.MustQuery("get notes select s").Body); !strings.Contains(body, "over tls") {
		t.Errorf("read back: %s", body)
	}
	// A head beyond the fast path's buffer goes to net/http, over the same
	// TLS connection.
	r, err := c.Do("GET", "/_health", nil, map[string]string{"X-Padding": strings.Repeat("p", 6000)})
	if err != nil || r.Status != 200 {
		t.Fatalf("a long head over TLS: %v %v", err, r)
	}

	_, err = httpsClient(t, p.URL, &tls.Config{}).Do("GET", "/_health", nil, nil)
	var unknown x509.UnknownAuthorityError
	if !errors.As(err, &unknown) {
		t.Errorf("a client without the CA: %v, want x509.UnknownAuthorityError", err)
	}
	// Plain HTTP to the TLS port: a 400 that says why, as net/http's.
	res, err := (&http.Client{Timeout: 5 * time.Second}).Get(strings.Replace(p.URL, "https://", "http://", 1) + "/_health")
	if err != nil {
		t.Fatalf("plain HTTP to the TLS port: %v", err)
	}
	b, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != 400 || !strings.Contains(string(b), "HTTP request to an HTTPS server") {
		t.Errorf("plain HTTP to the TLS port: %d %q", res.StatusCode, b)
	}
}

// TestHTTPSRotation: certificate files replaced while the server runs
// are served to the next connection.
func TestHTTPSRotation(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ca := tlstest.NewCA(t, dir, "test")
	first := ca.Issue("server")
	p := apitest.Start(t, bin, "--file", ":memory:", "--tls-cert", first.CertFile, "--tls-key", first.KeyFile)
	serial := func() string {
		t.Helper()
		conn, err := tls.Dial("tcp", strings.TrimPrefix(p.URL, "https://"), &tls.Config{RootCAs: caPool(t, ca.File)})
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		return conn.ConnectionState().PeerCertificates[0].SerialNumber.String()
	}
	if got := serial(); got != first.Serial.String() {
		t.Fatalf("served serial %s, want %s", got, first.Serial)
	}
	second := ca.Issue("server")
	if got := serial(); got != second.Serial.String() {
		t.Fatalf("after rotation served serial %s, want the new %s", got, second.Serial)
	}
	c := httpsClient(t, p.URL, &tls.Config{RootCAs: caPool(t, ca.File)})
	if r, err := c.Do("GET", "/_health", nil, nil); err != nil || r.Status != 200 {
		t.Fatalf("after rotation: %v %v", err, r)
	}
}

// TestHTTPSClientCA: with --tls-client-ca a client must present a
// certificate that CA signed.
func TestHTTPSClientCA(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ca := tlstest.NewCA(t, dir, "server")
	clients := tlstest.NewCA(t, dir, "clients")
	other := tlstest.NewCA(t, dir, "other")
	leaf := ca.Issue("server")
	p := apitest.Start(t, bin, "--file", ":memory:", "--tls-cert", leaf.CertFile, "--tls-key", leaf.KeyFile, "--tls-client-ca", clients.File)
	with := func(l *tlstest.Leaf) (*apitest.Response, error) {
		cfg := &tls.Config{RootCAs: caPool(t, ca.File)}
		if l != nil {
			pair, err := tls.LoadX509KeyPair(l.CertFile, l.KeyFile)
			if err != nil {
				t.Fatal(err)
			}
			cfg.Certificates = []tls.Certificate{pair}
		}
		return httpsClient(t, p.URL, cfg).Do("GET", "/collections", nil, nil)
	}
	good, rogue := clients.Issue("worker"), other.Issue("rogue")
	if r, err := with(&good); err != nil || r.Status != 200 {
		t.Fatalf("a client the CA signed: %v %v", err, r)
	}
	if r, err := with(nil); err == nil {
		t.Errorf("a client without a certificate answered %d", r.Status)
	}
	if r, err := with(&rogue); err == nil {
		t.Errorf("a client of another CA answered %d", r.Status)
	}
}

// TestPlainBeyondLoopbackRefused: beyond loopback, fenec serve wants TLS
// (or --insecure), for HTTP and for raft, and says which flags.
func TestPlainBeyondLoopbackRefused(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ca := tlstest.NewCA(t, dir, "test")
	leaf := ca.Issue("server")
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"--http", "0.0.0.0:0", "--token", "s3cret", "--file", ":memory:"}, "give --tls-cert and --tls-key, or pass --insecure"},
		{[]string{"--http", "127.0.0.1:0", "--file", dir + "/n1.db", "--node-id", "n1", "--raft", "0.0.0.0:0"}, "give --node-cert, --node-key and --node-ca, or pass --insecure"},
		{[]string{"--tls-cert", leaf.CertFile, "--file", ":memory:"}, "--tls-cert and --tls-key go together"},
		{[]string{"--tls-client-ca", ca.File, "--file", ":memory:"}, "--tls-client-ca needs --tls-cert"},
		{[]string{"--tls-cert", leaf.CertFile, "--tls-key", leaf.CertFile, "--file", ":memory:"}, "--tls-cert: certificate " + leaf.CertFile},
		{[]string{"--tls-cert", leaf.CertFile, "--tls-key", leaf.KeyFile, "--tls-client-ca", leaf.KeyFile, "--file", ":memory:"}, "no PEM certificate"},
		{[]string{"--node-cert", leaf.CertFile, "--file", ":memory:"}, "need --node-id"},
		{[]string{"--node-id", "n1", "--raft", "127.0.0.1:0", "--file", dir + "/n2.db", "--node-cert", leaf.CertFile, "--node-key", leaf.KeyFile}, "--node-cert, --node-key and --node-ca go together"},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			out, err := execServe(tt.args...)
			if err == nil {
				t.Fatalf("started; want a refusal naming %q", tt.want)
			}
			if !strings.Contains(out, tt.want) {
				t.Errorf("refusal %q does not name %q", out, tt.want)
			}
		})
	}
	// With TLS, or with --insecure, it starts.
	p := apitest.Start(t, bin, "--file", ":memory:", "--http", "0.0.0.0:0", "--token", "s3cret", "--tls-cert", leaf.CertFile, "--tls-key", leaf.KeyFile)
	_, port, _ := net.SplitHostPort(strings.TrimPrefix(p.URL, "https://"))
	c := httpsClient(t, "https://127.0.0.1:"+port, &tls.Config{RootCAs: caPool(t, ca.File)})
	if r, err := c.Do("GET", "/_health", nil, nil); err != nil || r.Status != 200 {
		t.Fatalf("/_health over TLS beyond loopback: %v %v", err, r)
	}
}

// rogueLayer dials raft ports with cfg (nil: plain TCP); it accepts nothing.
type rogueLayer struct {
	net.Listener
	cfg *tls.Config
}

func (l rogueLayer) Dial(addr raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	d := &net.Dialer{Timeout: timeout}
	if l.cfg == nil {
		return d.Dial("tcp", string(addr))
	}
	return tls.DialWithDialer(d, "tcp", string(addr), l.cfg)
}

// rogue is a raft client that dials with cfg.
func rogue(t *testing.T, cfg *tls.Config) *raft.NetworkTransport {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	tr := raft.NewNetworkTransport(rogueLayer{ln, cfg}, 1, 3*time.Second, os.Stderr)
	t.Cleanup(func() { tr.Close() })
	return tr
}

// term returns a node's raft term, from GET /_cluster.
func (c *testCluster) term(nd *clusterNode) int64 {
	c.t.Helper()
	var st struct {
		Term int64 `json:"term"`
	}
	r, err := c.client(nd).Do("GET", "/_cluster", nil, nil)
	if err != nil || r.Status != 200 {
		c.t.Fatalf("/_cluster on %s: %v %v", nd.id, err, r)
	}
	r.JSON(c.t, &st)
	return st.Term
}

// TestClusterMutualTLS: nodes started with --node-cert, --node-key and
// --node-ca elect a leader and replicate over TLS; a process dialing a
// raft port without a certificate, or with one of another CA, is refused
// and what it sends — an AppendEntries of a far later term, which a node
// would follow — changes nothing; the same call with a certificate of the
// cluster's CA does move the node's term (so the check can fail). The
// nodes' certificates are then replaced on disk: each node serves its new
// one to the next connection, and after the leader is killed the others,
// dialing each other anew, elect one and take writes.
func TestClusterMutualTLS(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ca := tlstest.NewCA(t, dir, "cluster")
	otherCA := tlstest.NewCA(t, dir, "other")
	var nodes []*clusterNode
	leaves := map[string]tlstest.Leaf{}
	for i := 1; i <= 3; i++ {
		nd := &clusterNode{id: fmt.Sprintf("n%d", i), http: apitest.FreeAddr(t), raft: apitest.FreeAddr(t)}
		nodes = append(nodes, nd)
		leaves[nd.id] = ca.Issue(nd.id)
	}
	c := startCluster(t, &testCluster{t: t, nodes: nodes, binOf: func(*clusterNode) string { return bin },
		argsOf: func(nd *clusterNode) []string {
			l := leaves[nd.id]
			return []string{"--node-cert", l.CertFile, "--node-key", l.KeyFile, "--node-ca", ca.File}
		}})
	c.write("k1", "create collection notes (s text)")
	c.write("k2", `put notes {s: "one"}`)
	lead := c.leader(10 * time.Second)
	var follower *clusterNode
	for _, nd := range c.nodes {
		if nd != lead {
			follower = nd
		}
	}
	before := c.term(follower)
	leap := func(tr *raft.NetworkTransport, nd *clusterNode) error {
		req := &raft.AppendEntriesRequest{
			RPCHeader: raft.RPCHeader{ProtocolVersion: raft.ProtocolVersionMax, ID: []byte("rogue"), Addr: []byte(tr.LocalAddr())},
			Term:      uint64(before + 100), PrevLogEntry: 0, PrevLogTerm: 0, LeaderCommitIndex: 0,
		}
		var resp raft.AppendEntriesResponse
		return tr.AppendEntries("n0", raft.ServerAddress(nd.raft), req, &resp)
	}
	otherLeaf := otherCA.Issue("intruder")
	otherPair, err := tls.LoadX509KeyPair(otherLeaf.CertFile, otherLeaf.KeyFile)
	if err != nil {
		t.Fatal(err)
	}
	for name, cfg := range map[string]*tls.Config{
		"no TLS":                      nil,
		"TLS without a certificate":   {InsecureSkipVerify: true},
		"a certificate of another CA": {InsecureSkipVerify: true, Certificates: []tls.Certificate{otherPair}},
	} {
		for _, nd := range c.nodes {
			if err := leap(rogue(t, cfg), nd); err == nil {
				t.Errorf("%s: %s took an AppendEntries", name, nd.id)
			}
		}
	}
	for _, nd := range c.nodes {
		if got := c.term(nd); got >= before+100 {
			t.Fatalf("%s's term is %d after the rogues' AppendEntries of term %d", nd.id, got, before+100)
		}
	}
	if got := string(c.client(lead).MustQuery("get notes select s").Body); !strings.Contains(got, "one") || strings.Count(got, `"s"`) != 1 {
		t.Fatalf("after the rogues: %s", got)
	}

	// Rotation: every node's certificate and key replaced.
	for _, nd := range c.nodes {
		leaves[nd.id] = ca.Issue(nd.id)
	}
	good := ca.Issue("probe")
	goodPair, err := tls.LoadX509KeyPair(good.CertFile, good.KeyFile)
	if err != nil {
		t.Fatal(err)
	}
	member := &tls.Config{InsecureSkipVerify: true, Certificates: []tls.Certificate{goodPair}}
	for _, nd := range c.nodes {
		conn, err := tls.Dial("tcp", nd.raft, member)
		if err != nil {
			t.Fatalf("a certificate of the cluster's CA, to %s: %v", nd.id, err)
		}
		got := conn.ConnectionState().PeerCertificates[0].SerialNumber
		conn.Close()
		if got.Cmp(leaves[nd.id].Serial) != 0 {
			t.Errorf("%s serves serial %v after rotation, want %v", nd.id, got, leaves[nd.id].Serial)
		}
	}
	c.write("k3", `put notes {s: "two"}`)
	lead = c.leader(10 * time.Second)
	lead.p.Kill()
	lead.p = nil
	c.last = nil
	next := c.leader(20 * time.Second)
	c.write("k4", `put notes {s: "three"}`)
	t.Logf("after rotation and %s's kill, %s leads", lead.id, next.id)

	// The control: a member's certificate gets the same call taken.
	var other *clusterNode
	for _, nd := range c.nodes {
		if nd.p != nil && nd != next {
			other = nd
		}
	}
	before = c.term(other)
	if err := leap(rogue(t, member), other); err != nil {
		t.Fatalf("with a certificate of the cluster's CA: %v", err)
	}
	// At least: the node, left without the rogue's heartbeats, may have
	// begun an election since.
	if got := c.term(other); got < before+100 {
		t.Errorf("a member's AppendEntries of term %d left %s at term %d", before+100, other.id, got)
	}
}

// execServe runs fenec serve with args to its end, answering its output.
func execServe(args ...string) (string, error) {
	cmd := exec.Command(bin, append([]string{"serve"}, args...)...)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// TestBackupAndExportOverHTTPS: fenec backup and fenec export reach a
// server whose certificate a CA of the operator's own signed with --ca,
// and are refused, saying why, without it.
func TestBackupAndExportOverHTTPS(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ca := tlstest.NewCA(t, dir, "ops")
	leaf := ca.Issue("server")
	const token = "operator-token-over-tls"
	p := apitest.Start(t, bin, "--file", filepath.Join(dir, "live.db"), "--token", token, "--tls-cert", leaf.CertFile, "--tls-key", leaf.KeyFile)
	c := httpsClient(t, p.URL, &tls.Config{RootCAs: caPool(t, ca.File)})
	c.Token = token
	c.MustQuery("create collection notes (s text)")
	c.MustQuery(`put notes {s: "kept"}`)
	env := []string{"FENEC_TOKEN=" + token}
	if out, failed := fenecCmd(t, env, "backup", "--from", p.URL, "--to", filepath.Join(dir, "refused.db")); !failed || !strings.Contains(out, "certificate") {
		t.Errorf("a backup without --ca: %s", out)
	}
	mustFenec(t, env, "backup", "--from", p.URL, "--ca", ca.File, "--to", filepath.Join(dir, "copy.db"))
	out := mustFenec(t, env, "export", "--from", p.URL, "--ca", ca.File)
	if !strings.Contains(out, `"kept"`) {
		t.Errorf("the export over https: %s", out)
	}
}
