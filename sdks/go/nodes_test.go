package fenecdb_test

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fenecdb/fenec/sdks/go"
)

// The rules of docs/sdks.md, "Several nodes", where no real server can
// make the case: a leader named over https → http, and the bound on
// follows. The cluster's own cases are in cluster_test.go.

// node403 answers every request 403 forbidden naming leader, as a
// cluster's follower does (with none: "no leader is known now"), and
// records what it was sent.
type node403 struct {
	leader string
	mu     sync.Mutex
	got    []string // method path | Idempotency-Key | Fenec-Wait | Authorization | body
	// answer, when set, answers the nth request (from 1) instead.
	answer func(n int, w http.ResponseWriter)
}

func (n *node403) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	n.mu.Lock()
	n.got = append(n.got, strings.Join([]string{r.Method + " " + r.URL.Path, r.Header.Get("Idempotency-Key"),
		r.Header.Get("Fenec-Wait"), r.Header.Get("Authorization"), string(b)}, " | "))
	count := len(n.got)
	n.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	if n.answer != nil {
		n.answer(count, w)
		return
	}
	msg := "this node is not the cluster's leader and no leader is known now: retry shortly"
	if n.leader != "" {
		w.Header().Set("Fenec-Leader", n.leader)
		msg = "this node is not the cluster's leader: send writes to the leader at " + n.leader
	}
	w.WriteHeader(http.StatusForbidden)
	io.WriteString(w, `{"error":"`+msg+`","code":"forbidden"}`)
}

func (n *node403) requests() []string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return append([]string(nil), n.got...)
}

func stubNode(t *testing.T, n *node403) string {
	srv := httptest.NewServer(n)
	t.Cleanup(srv.Close)
	return srv.URL
}

// TestFollowsAtMostThreeTimes: each node names the next as its leader; a
// call follows three of them with the same request, and answers the
// fourth's 403 with the leader it named, which is sent nothing.
func TestFollowsAtMostThreeTimes(t *testing.T) {
	nodes := make([]*node403, 5)
	urls := make([]string, 5)
	for i := 4; i >= 0; i-- {
		nodes[i] = &node403{}
		if i < 4 {
			nodes[i].leader = urls[i+1]
		}
		urls[i] = stubNode(t, nodes[i])
	}
	db := connect(t, urls[0], fenecdb.WithToken("tok"))
	_, err := db.Wait(2*time.Second).Query(context.Background(), "set jobs {owner: 'w'} where run_at <= now() limit 1 returning id",
		fenecdb.IdempotencyKey("k1"))
	var fe *fenecdb.Error
	if !errors.As(err, &fe) || !errors.Is(err, fenecdb.ErrForbidden) || fe.Status != 403 || fe.Leader != urls[4] {
		t.Fatalf("got %v (leader %q), want the fourth node's 403 naming %s", err, fe.Leader, urls[4])
	}
	first := nodes[0].requests()
	if len(first) != 1 || !strings.Contains(first[0], "POST /query | k1 | 2000 | Bearer tok | {") {
		t.Fatalf("the first node was sent %q", first)
	}
	for i := 1; i < 4; i++ {
		if got := nodes[i].requests(); len(got) != 1 || got[0] != first[0] {
			t.Errorf("node %d was sent %q, want the same request %q", i, got, first[0])
		}
	}
	if got := nodes[4].requests(); len(got) != 0 {
		t.Errorf("the fifth node, a fourth follow, was sent %q", got)
	}
	// The client's current node is the last it followed: its next call
	// starts there.
	db.Query(context.Background(), "get jobs")
	if got := nodes[3].requests(); len(got) != 2 {
		t.Errorf("the next call went elsewhere than the last node followed: it was sent %q", got)
	}
}

// TestNeverFollowsHTTPSToHTTP: a node reached over https naming a leader
// at http:// is not followed (the token would go in clear): its 403 is
// the call's error, naming the leader.
func TestNeverFollowsHTTPSToHTTP(t *testing.T) {
	plain := &node403{}
	p := httptest.NewServer(plain)
	t.Cleanup(p.Close)
	secure := &node403{leader: p.URL}
	s := httptest.NewTLSServer(secure)
	t.Cleanup(s.Close)
	db := connect(t, s.URL, fenecdb.WithToken("secret"), fenecdb.WithHTTPClient(s.Client()))
	_, err := db.Query(context.Background(), "put jobs {owner: 'w'}")
	var fe *fenecdb.Error
	if !errors.As(err, &fe) || fe.Code != fenecdb.CodeForbidden || fe.Leader != p.URL {
		t.Fatalf("got %v, want the https node's 403 naming %s", err, p.URL)
	}
	if len(secure.requests()) != 1 || len(plain.requests()) != 0 {
		t.Fatalf("sent %q over https and %q over http, want one and none", secure.requests(), plain.requests())
	}
}

// TestNoLeaderWithOneURL: one URL's 403 without Fenec-Leader is raised at
// once, its Leader empty.
func TestNoLeaderWithOneURL(t *testing.T) {
	n := &node403{}
	url := stubNode(t, n)
	start := time.Now()
	_, err := connect(t, url).Query(context.Background(), "put jobs {owner: 'w'}")
	var fe *fenecdb.Error
	if !errors.As(err, &fe) || fe.Code != fenecdb.CodeForbidden || fe.Leader != "" || len(n.requests()) != 1 || time.Since(start) > 2*time.Second {
		t.Fatalf("got %v after %v and %d requests, want the 403 at once", err, time.Since(start), len(n.requests()))
	}
}

func closedAddr(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}

// TestNoLeaderTriesTheNext: with several URLs, a node that knows no leader
// now sends the call to the next, whose answer it is.
func TestNoLeaderTriesTheNext(t *testing.T) {
	none := &node403{}
	ok := &node403{answer: func(_ int, w http.ResponseWriter) { io.WriteString(w, `{"affected": 1}`) }}
	db := connect(t, stubNode(t, none)+","+stubNode(t, ok))
	res, err := db.Query(context.Background(), "put jobs {owner: 'w'}", fenecdb.IdempotencyKey("k2"))
	if err != nil || res.Affected != 1 {
		t.Fatalf("got %+v %v, want the second node's answer", res, err)
	}
	if a, b := none.requests(), ok.requests(); len(a) != 1 || len(b) != 1 || a[0] != b[0] {
		t.Fatalf("sent %q and %q, want the same request once to each", a, b)
	}
}

// TestTakingOffice: a leader's "taking office" 503 was refused unrun: the
// same node is sent it again after the pauses (50 ms, then 100 ms), even
// with one URL; any other 503 is raised at once.
func TestTakingOffice(t *testing.T) {
	office := &node403{answer: func(n int, w http.ResponseWriter) {
		if n <= 2 {
			w.WriteHeader(http.StatusServiceUnavailable)
			io.WriteString(w, `{"error":"this node is taking office as leader: retry shortly: the write's outcome in the cluster is unknown (elected, applying the earlier terms' writes)","code":"unavailable"}`)
			return
		}
		io.WriteString(w, `{"affected": 1}`)
	}}
	start := time.Now()
	res, err := connect(t, stubNode(t, office)).Query(context.Background(), "put jobs {owner: 'w'}")
	if took := time.Since(start); err != nil || res.Affected != 1 || len(office.requests()) != 3 || took < 150*time.Millisecond {
		t.Fatalf("got %+v %v after %v and %d requests, want the third's answer after 150 ms", res, err, took, len(office.requests()))
	}

	unknown := &node403{answer: func(_ int, w http.ResponseWriter) {
		w.WriteHeader(http.StatusServiceUnavailable)
		io.WriteString(w, `{"error":"the write was not committed: the write's outcome in the cluster is unknown","code":"unavailable"}`)
	}}
	_, err = connect(t, stubNode(t, unknown)+","+stubNode(t, &node403{})).Query(context.Background(), "put jobs {owner: 'w'}")
	if !errors.Is(err, fenecdb.ErrUnavailable) || len(unknown.requests()) != 1 {
		t.Fatalf("got %v after %d requests, want the 503 at once", err, len(unknown.requests()))
	}
}

// TestSeveralNodesDown: with several URLs and none reachable, a call
// tries them round after round until its timeout, then answers the last
// network error (not a timeout); the caller's cancel ends it with
// context.Canceled. A URL listed twice is one: alone, its failure is at
// once.
func TestSeveralNodesDown(t *testing.T) {
	a, b := closedAddr(t), closedAddr(t)
	db := connect(t, "http://"+a+", http://"+b, fenecdb.WithTimeout(400*time.Millisecond))
	start := time.Now()
	_, err := db.Query(context.Background(), "get jobs")
	took := time.Since(start)
	var fe *fenecdb.Error
	if !errors.As(err, &fe) || fe.Code != fenecdb.CodeNetwork || !strings.Contains(err.Error(), "connection refused") ||
		took < 350*time.Millisecond || took > 3*time.Second {
		t.Fatalf("got %v after %v, want a network error after the 400ms timeout", err, took)
	}

	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(100*time.Millisecond, cancel)
	if _, err := connect(t, "http://"+a+",http://"+b).Query(ctx, "get jobs"); !errors.Is(err, context.Canceled) {
		t.Fatalf("a cancelled call: got %v, want context.Canceled", err)
	}

	start = time.Now()
	_, err = connect(t, "http://"+a+",http://"+a+"/").Query(context.Background(), "get jobs")
	if !errors.Is(err, fenecdb.ErrNetwork) || time.Since(start) > 2*time.Second {
		t.Fatalf("one URL listed twice: got %v after %v, want a network error at once", err, time.Since(start))
	}
}

// TestConnectRefusesABadURLAmongSeveral: the error names the bad URL and
// its position.
func TestConnectRefusesABadURLAmongSeveral(t *testing.T) {
	for raw, want := range map[string]string{
		"http://a:1,b:2,http://c:3":   `node 2 of 3: "b:2"`,
		"http://a:1,http://b:2,":      `node 3 of 3: ""`,
		"http://a:1, ftp://b:2":       `node 2 of 2: "ftp://b:2"`,
		"http://a:1,http://,http://c": `node 2 of 3: "http://"`,
	} {
		if _, err := fenecdb.Connect(raw); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Connect(%q): %v, want an error naming %s", raw, err, want)
		}
	}
	if _, err := fenecdb.Connect(" http://a:1 , https://b:2/ "); err != nil {
		t.Error(err)
	}
}
