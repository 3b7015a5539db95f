package fenecdb_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"iter"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	neturl "net/url"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fenecdb/fenec/sdks/go"
	"github.com/fenecdb/fenec/sdks/go/internal/fenectest"
)

// pulled is a live query's iterator, pulled one event at a time with a
// deadline (the machine may be loaded: a generous one).
type pulled struct {
	t    *testing.T
	next func() (fenecdb.LiveEvent, error, bool)
}

func pull(t *testing.T, seq iter.Seq2[fenecdb.LiveEvent, error]) *pulled {
	next, stop := iter.Pull2(seq)
	t.Cleanup(stop)
	return &pulled{t: t, next: next}
}

func (p *pulled) event() fenecdb.LiveEvent {
	p.t.Helper()
	type got struct {
		ev  fenecdb.LiveEvent
		err error
		ok  bool
	}
	ch := make(chan got, 1)
	go func() {
		ev, err, ok := p.next()
		ch <- got{ev, err, ok}
	}()
	select {
	case g := <-ch:
		if !g.ok {
			p.t.Fatal("the live query ended")
		}
		if g.err != nil {
			p.t.Fatalf("the live query failed: %v", g.err)
		}
		return g.ev
	case <-time.After(15 * time.Second):
		p.t.Fatal("no event in 15 s")
		return fenecdb.LiveEvent{}
	}
}

func (p *pulled) failure() error {
	p.t.Helper()
	ev, err, ok := p.next()
	if !ok || err == nil {
		p.t.Fatalf("want an error, got %+v (more: %v)", ev, ok)
	}
	return err
}

func rowJSON(t *testing.T, r *fenecdb.Row) string {
	t.Helper()
	if r == nil {
		t.Fatal("no row")
	}
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func lastID(t *testing.T, db *fenecdb.Client, where string) int64 {
	t.Helper()
	res, err := db.Query(context.Background(), "get msgs where "+where+" select id")
	if err != nil || len(res.Rows) != 1 {
		t.Fatalf("%s: %v %v", where, res.Rows, err)
	}
	n, err := strconv.ParseInt(fmt.Sprint(res.Rows[0].Get("id")), 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func TestWatchRowsInsertUpdateDelete(t *testing.T) {
	url := fenectest.Start(t, "--token", "sekret")
	db := connect(t, url, fenecdb.WithToken("sekret"))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	mustQuery(t, db, "create collection msgs (room text, body text)")
	mustQuery(t, db, `insert msgs [{room: "lobby", body: "a"}, {room: "lobby", body: "b"}, {room: "attic", body: "c"}]`)

	live := pull(t, db.From("msgs").Where("room", "lobby").Select("body").Watch(ctx))
	first := live.event()
	if first.Name != "rows" || !first.Last || len(first.Rows) != 2 || first.Position == 0 {
		t.Fatalf("first: %+v", first)
	}
	put := mustQuery(t, db, `insert msgs {room: "lobby", body: "d"}`)
	id := lastID(t, db, `body = "d"`)
	ins := live.event()
	if ins.Name != "insert" || ins.Position != put.Seq || rowJSON(t, ins.Row) != `{"id":`+itoa(id)+`,"body":"d"}` {
		t.Fatalf("insert: %+v (%s), want position %d", ins, ins.Data, put.Seq)
	}
	mustQuery(t, db, `insert msgs {room: "attic", body: "not seen"}`)
	upd := mustQuery(t, db, `set msgs {body: "d2"} where id = $1`, id)
	ev := live.event()
	if ev.Name != "update" || ev.Position != upd.Seq || rowJSON(t, ev.Row) != `{"id":`+itoa(id)+`,"body":"d2"}` {
		t.Fatalf("update: %+v (%s)", ev, ev.Data)
	}
	mustQuery(t, db, `set msgs {room: "attic"} where id = $1`, id)
	gone := live.event()
	if gone.Name != "delete" || gone.ID != id {
		t.Fatalf("delete: %+v (%s)", gone, gone.Data)
	}
	cancel()
	if err := live.failure(); !errors.Is(err, context.Canceled) {
		t.Fatalf("after cancel: %v", err)
	}
	// Given up: the server holds no live query open.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		n := subscribers(t, url)
		if n == "0" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("fenec_changes_subscribers %s after the cancel", n)
		}
	}
}

// subscribers reads the server's fenec_changes_subscribers.
func subscribers(t *testing.T, url string) string {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, url+"/_metrics", nil)
	req.Header.Set("Authorization", "Bearer sekret")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "fenec_changes_subscribers "); ok {
			return v
		}
	}
	t.Fatalf("no fenec_changes_subscribers in /_metrics")
	return ""
}

func TestWatchRefused(t *testing.T) {
	url := fenectest.Start(t, "--token", "sekret")
	db := connect(t, url, fenecdb.WithToken("sekret"))
	mustQuery(t, db, "create collection msgs (room text, body text)")
	ctx := context.Background()
	for _, c := range []struct {
		seq  iter.Seq2[fenecdb.LiveEvent, error]
		code fenecdb.ErrorCode
	}{
		{db.From("msgs").Order("body").Watch(ctx), fenecdb.CodeBadRequest},
		{connect(t, url, fenecdb.WithToken("nope")).From("msgs").Watch(ctx), fenecdb.CodeUnauthorized},
		{db.From("nothere").Watch(ctx), fenecdb.CodeNotFound},
		{db.WatchCollection(ctx, "msgs", "room = ", ""), fenecdb.CodeBadRequest},
	} {
		var fe *fenecdb.Error
		if err := pull(t, c.seq).failure(); !errors.As(err, &fe) || fe.Code != c.code {
			t.Errorf("want %s, got %v", c.code, err)
		}
	}
}

// lastEventIDs keeps the Last-Event-ID of each live request.
type lastEventIDs struct {
	mu   sync.Mutex
	sent []string
}

func (r *lastEventIDs) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Header.Get("Accept") == "text/event-stream" {
		r.mu.Lock()
		r.sent = append(r.sent, req.Header.Get("Last-Event-ID"))
		r.mu.Unlock()
	}
	return http.DefaultTransport.RoundTrip(req)
}

func TestWatchAcrossRestart(t *testing.T) {
	file := filepath.Join(t.TempDir(), "live.db")
	s := fenectest.StartServer(t, "--clock", "manual", "--file", file, "--sync", "always", "--token", "sekret")
	db := connect(t, s.URL, fenecdb.WithToken("sekret"))
	rec := &lastEventIDs{}
	watcher := connect(t, s.URL, fenecdb.WithToken("sekret"), fenecdb.WithHTTPClient(&http.Client{Transport: rec}))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	mustQuery(t, db, "create collection msgs (room text, body text)")
	mustQuery(t, db, `insert msgs {room: "lobby", body: "a"}`)

	live := pull(t, watcher.WatchCollection(ctx, "msgs", `room = "lobby"`, "", fenecdb.WatchRetries(200, 50*time.Millisecond)))
	if ev := live.event(); ev.Name != "rows" || len(ev.Rows) != 1 {
		t.Fatalf("first: %+v", ev)
	}
	put := mustQuery(t, db, `insert msgs {room: "lobby", body: "b"}`)
	if ev := live.event(); ev.Name != "insert" || ev.Position != put.Seq {
		t.Fatalf("insert: %+v", ev)
	}
	s.Stop()
	closing := live.event()
	if closing.Name != "closing" || closing.Reason != "shutdown" {
		t.Fatalf("at the stop: %+v (%s)", closing, closing.Data)
	}
	s.Restart()
	mustQuery(t, db, `insert msgs {room: "lobby", body: "after"}`)
	id := lastID(t, db, `body = "after"`)
	seen := false
	for i := 0; i < 10 && !seen; i++ {
		ev := live.event()
		switch ev.Name {
		case "reset":
			seen = slices.ContainsFunc(ev.Rows, func(r fenecdb.Row) bool { return r.Get("id") == json.Number(itoa(id)) })
		case "insert":
			seen = ev.Row.Get("id") == json.Number(itoa(id))
		case "gap":
		default:
			t.Fatalf("after the restart: %+v (%s)", ev, ev.Data)
		}
	}
	if !seen {
		t.Fatal("the row written after the restart was never seen")
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	want := closing.Position
	if want == 0 {
		want = put.Seq
	}
	if len(rec.sent) < 2 || rec.sent[0] != "" || rec.sent[len(rec.sent)-1] != itoa(want) {
		t.Fatalf("Last-Event-ID sent: %q, want the last one %d", rec.sent, want)
	}
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// TestWatchRetriesUnavailable: an answer that may succeed later — a
// server shutting down answers 503 unavailable, as a live query's
// reconnect can meet during a restart — is tried again like a dropped
// connection, within the retries; one that cannot (a 400) is not.
func TestWatchRetriesUnavailable(t *testing.T) {
	target := fenectest.Start(t)
	db := connect(t, target)
	mustQuery(t, db, "create collection msgs (room text, body text)")
	mustQuery(t, db, `insert msgs {room: "lobby", body: "a"}`)
	u, _ := neturl.Parse(target)
	rp := httputil.NewSingleHostReverseProxy(u)
	rp.FlushInterval = -1
	var refused atomic.Int32
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Accept") == "text/event-stream" && refused.Add(1) <= 2 {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusServiceUnavailable)
			w.Write([]byte(`{"code":"unavailable","error":"the server is shutting down"}`))
			return
		}
		rp.ServeHTTP(w, r)
	}))
	defer front.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	live := pull(t, connect(t, front.URL).From("msgs").Watch(ctx, fenecdb.WatchRetries(5, 10*time.Millisecond)))
	if first := live.event(); first.Name != "rows" || len(first.Rows) != 1 {
		t.Fatalf("first: %+v", first)
	}
	if n := refused.Load(); n != 3 {
		t.Fatalf("%d live requests, want the two refused and the one answered", n)
	}
	// Past the retries the live query ends, saying why.
	refused.Store(-100)
	live = pull(t, connect(t, front.URL).From("msgs").Watch(ctx, fenecdb.WatchRetries(2, time.Millisecond)))
	var fe *fenecdb.Error
	if err := live.failure(); !errors.As(err, &fe) || fe.Code != fenecdb.CodeUnavailable || !strings.Contains(err.Error(), "shutting down") {
		t.Fatalf("after the retries: %v", err)
	}
}
