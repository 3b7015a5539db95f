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
	"github.com/fenecdb/fenec/sdks/go/internal/fenectest"
)

// The rules of docs/sdks.md, "Several nodes", where no real server can
// make the case: a leader named over https → http, and the bound on
// follows. The cluster's own cases are in cluster_test.go.

// refuser answers every request as a cluster's node refuses a write
// unrun: 403 forbidden naming leader, as a follower does, or with none
// 503 no_leader, as a node does that knows no leader or was just elected
// (docs/cluster.md); and records what it was sent.
type refuser struct {
	leader string
	mu     sync.Mutex
	got    []string // method path | Idempotency-Key | Fenec-Wait | Authorization | body
	// answer, when set, answers the nth request (from 1) instead.
	answer func(n int, w http.ResponseWriter)
}

func (n *refuser) ServeHTTP(w http.ResponseWriter, r *http.Request) {
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
	if n.leader == "" {
		noLeader(w)
		return
	}
	w.Header().Set("Fenec-Leader", n.leader)
	w.WriteHeader(http.StatusForbidden)
	io.WriteString(w, `{"error":"this node is not the cluster's leader: send writes to the leader at `+n.leader+`","code":"forbidden"}`)
}

// noLeader answers 503 no_leader; its message is not what the client goes by.
func noLeader(w http.ResponseWriter) {
	w.WriteHeader(http.StatusServiceUnavailable)
	io.WriteString(w, `{"error":"no leader is elected now: send the write again shortly, to any node","code":"no_leader"}`)
}

// affected1 answers a write's success.
func affected1(w http.ResponseWriter) { io.WriteString(w, `{"affected": 1}`) }

func (n *refuser) requests() []string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return append([]string(nil), n.got...)
}

func stubNode(t *testing.T, n *refuser) string {
	srv := httptest.NewServer(n)
	t.Cleanup(srv.Close)
	return srv.URL
}

// TestFollowsAtMostThreeTimes: each node names the next as its leader; a
// call follows three of them with the same request, and answers the
// fourth's 403 with the leader it named, which is sent nothing.
func TestFollowsAtMostThreeTimes(t *testing.T) {
	nodes := make([]*refuser, 5)
	urls := make([]string, 5)
	for i := 4; i >= 0; i-- {
		nodes[i] = &refuser{}
		if i < 4 {
			nodes[i].leader = urls[i+1]
		} else {
			nodes[i].answer = func(_ int, w http.ResponseWriter) { affected1(w) }
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
	plain := &refuser{}
	p := httptest.NewServer(plain)
	t.Cleanup(p.Close)
	secure := &refuser{leader: p.URL}
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

// TestNoLeaderWithOneURL: with one URL, a 503 no_leader was refused
// unrun: the same node is sent the call again after each pause (50 ms,
// then 100 ms) and its answer is the call's; a node that answers no_leader
// until the call's deadline has the call answer ErrNoLeader then.
func TestNoLeaderWithOneURL(t *testing.T) {
	office := &refuser{answer: func(n int, w http.ResponseWriter) {
		if n <= 2 {
			noLeader(w)
			return
		}
		affected1(w)
	}}
	start := time.Now()
	res, err := connect(t, stubNode(t, office)).Query(context.Background(), "put jobs {owner: 'w'}", fenecdb.IdempotencyKey("k3"))
	if took := time.Since(start); err != nil || res.Affected != 1 || len(office.requests()) != 3 || took < 150*time.Millisecond {
		t.Fatalf("got %+v %v after %v and %d requests, want the third's answer after 150 ms", res, err, took, len(office.requests()))
	}
	if got := office.requests(); got[0] != got[1] || got[1] != got[2] {
		t.Fatalf("sent %q, want the same request three times", got)
	}

	none := &refuser{}
	start = time.Now()
	_, err = connect(t, stubNode(t, none), fenecdb.WithTimeout(300*time.Millisecond)).Query(context.Background(), "put jobs {owner: 'w'}")
	took := time.Since(start)
	var fe *fenecdb.Error
	if !errors.As(err, &fe) || !errors.Is(err, fenecdb.ErrNoLeader) || fe.Status != 503 || took < 250*time.Millisecond || took > 2*time.Second {
		t.Fatalf("got %v after %v, want ErrNoLeader at the 300 ms deadline", err, took)
	}
	if n := len(none.requests()); n < 3 || n > 5 {
		t.Fatalf("%d requests, want 3 to 5 (pauses of 50, 100, 200 ms within 300 ms)", n)
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

// TestNoLeaderTriesTheNext: with several URLs, a 503 no_leader sends the
// same request to the next node after each pause, round robin, until one
// answers.
func TestNoLeaderTriesTheNext(t *testing.T) {
	var mu sync.Mutex
	total := 0
	var order []string
	mk := func(name string, serves bool) string {
		return stubNode(t, &refuser{answer: func(_ int, w http.ResponseWriter) {
			mu.Lock()
			total++
			n := total
			order = append(order, name)
			mu.Unlock()
			if serves && n >= 4 {
				affected1(w)
				return
			}
			noLeader(w)
		}})
	}
	a, b, c := mk("a", false), mk("b", true), mk("c", false)
	db := connect(t, a+","+b+","+c)
	start := time.Now()
	res, err := db.Query(context.Background(), "put jobs {owner: 'w'}", fenecdb.IdempotencyKey("k2"))
	took := time.Since(start)
	if err != nil || res.Affected != 1 {
		t.Fatalf("got %+v %v, want b's answer", res, err)
	}
	if got := strings.Join(order, ","); got != "a,b,c,a,b" {
		t.Fatalf("sent to %s, want a,b,c,a,b", got)
	}
	if took < 750*time.Millisecond {
		t.Fatalf("took %v, want a pause before each resend (50+100+200+400 ms)", took)
	}
	if db.Node() != b {
		t.Fatalf("current node %s, want %s", db.Node(), b)
	}
}

// TestMidElectionFollowsSinceThePause: two followers name a leader that
// answers no_leader four times (just elected) before it serves: 1 + 4
// follows in the call, at most one between two pauses, so the bound of 3
// follows does not end it while the deadline allows.
func TestMidElectionFollowsSinceThePause(t *testing.T) {
	leader := &refuser{answer: func(n int, w http.ResponseWriter) {
		if n <= 4 {
			noLeader(w)
			return
		}
		affected1(w)
	}}
	l := stubNode(t, leader)
	fa, fb := &refuser{leader: l}, &refuser{leader: l}
	db := connect(t, stubNode(t, fa)+","+stubNode(t, fb))
	res, err := db.Query(context.Background(), "put jobs {owner: 'w'}")
	if err != nil || res.Affected != 1 {
		t.Fatalf("got %+v %v, want the leader's answer", res, err)
	}
	if a, b, got := len(fa.requests()), len(fb.requests()), len(leader.requests()); a != 3 || b != 2 || got != 5 {
		t.Fatalf("sent %d, %d to the followers and %d to the leader, want 3, 2 and 5", a, b, got)
	}
	if db.Node() != l {
		t.Fatalf("current node %s, want the leader %s", db.Node(), l)
	}
}

// TestOtherRefusalsAnsweredAtOnce: with several URLs, a 503 other than
// no_leader (a write whose outcome is unknown) and a 403 of a token's
// rules (no Fenec-Leader) are the call's answer, sent nowhere else.
func TestOtherRefusalsAnsweredAtOnce(t *testing.T) {
	unknown := &refuser{answer: func(_ int, w http.ResponseWriter) {
		w.WriteHeader(http.StatusServiceUnavailable)
		io.WriteString(w, `{"error":"the write was not committed: the write's outcome in the cluster is unknown","code":"unavailable"}`)
	}}
	other := &refuser{answer: func(_ int, w http.ResponseWriter) { affected1(w) }}
	_, err := connect(t, stubNode(t, unknown)+","+stubNode(t, other)).Query(context.Background(), "put jobs {owner: 'w'}")
	if !errors.Is(err, fenecdb.ErrUnavailable) || len(unknown.requests()) != 1 || len(other.requests()) != 0 {
		t.Fatalf("got %v after %d requests, want the 503 at once", err, len(unknown.requests()))
	}

	rules := &refuser{answer: func(_ int, w http.ResponseWriter) {
		w.WriteHeader(http.StatusForbidden)
		io.WriteString(w, `{"error":"the token may not write jobs","code":"forbidden"}`)
	}}
	start := time.Now()
	_, err = connect(t, stubNode(t, rules)+","+stubNode(t, other)).Query(context.Background(), "put jobs {owner: 'w'}")
	var fe *fenecdb.Error
	if !errors.As(err, &fe) || fe.Code != fenecdb.CodeForbidden || fe.Leader != "" || len(rules.requests()) != 1 ||
		len(other.requests()) != 0 || time.Since(start) > 2*time.Second {
		t.Fatalf("got %v after %v and %d requests, want the token's 403 at once", err, time.Since(start), len(rules.requests()))
	}
}

// TestSeveralNodesDown: with several URLs and none reachable, a call
// tries them round after round until its timeout, then returns the last
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

// TestReadYourWritesAfterMovingNode: the client sends the highest Fenec-Seq
// it was answered as Fenec-After, so a node it moves to answers only once it
// has applied those writes. Two lone servers stand in for a node and one
// that has not applied the client's writes (a lone server refuses at once,
// with a 400, a Fenec-After beyond its own last write): moved to the second,
// the client is refused rather than answered as if its writes were not there.
func TestReadYourWritesAfterMovingNode(t *testing.T) {
	ctx := context.Background()
	first := fenectest.StartServer(t, "--clock", "manual", "--file", ":memory:")
	second := fenectest.StartServer(t, "--clock", "manual", "--file", ":memory:")
	db := connect(t, first.URL+","+second.URL)
	if _, err := db.Query(ctx, "create collection jobs (payload json, run_at timestamp @sorted, owner text, attempts int)"); err != nil {
		t.Fatal(err)
	}
	jobs := db.From("jobs")
	if _, err := jobs.Insert(ctx, fenecdb.D("attempts", 0)); err != nil {
		t.Fatal(err)
	}
	// Sent with Fenec-After: the first node made the write.
	if n, err := jobs.Count(ctx); err != nil || n != 1 {
		t.Fatalf("count on the first node: %d, %v", n, err)
	}
	first.Stop()
	_, err := jobs.Count(ctx)
	var e *fenecdb.Error
	if !errors.As(err, &e) || e.Status != 400 || !strings.Contains(e.Error(), "Fenec-After") {
		t.Fatalf("count on the second node: %v, want a 400 for its Fenec-After", err)
	}
	if db.Node() != second.URL {
		t.Errorf("node %s, want %s", db.Node(), second.URL)
	}
}
