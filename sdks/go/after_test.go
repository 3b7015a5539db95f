package fenecdb_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strconv"
	"sync"
	"testing"

	"github.com/fenecdb/fenec/sdks/go"
	"github.com/fenecdb/fenec/sdks/go/internal/fenectest"
)

// afterProxy forwards to a real server and records the Fenec-After of
// every /query and /batch it forwards ("" when none was sent).
type afterProxy struct {
	mu   sync.Mutex
	sent []string
}

func (p *afterProxy) last() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.sent) == 0 {
		return "(no request)"
	}
	return p.sent[len(p.sent)-1]
}

func (p *afterProxy) count() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.sent)
}

func startAfterProxy(t *testing.T, target string) (*afterProxy, string) {
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	rp := httputil.NewSingleHostReverseProxy(u)
	p := &afterProxy{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/query" || r.URL.Path == "/batch" {
			p.mu.Lock()
			p.sent = append(p.sent, r.Header.Get("Fenec-After"))
			p.mu.Unlock()
		}
		rp.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return p, srv.URL
}

// TestAfter: fenecdb.After(seq) is sent as Fenec-After with the value
// given, on a query, a batch and a builder read; a lone server answers a
// seq beyond its own writes with a 400 at once (docs/http.md); a bad seq
// is the call's error, sent nothing.
func TestAfter(t *testing.T) {
	ctx := context.Background()
	server := fenectest.StartServer(t, "--clock", "manual", "--file", ":memory:")
	p, proxied := startAfterProxy(t, server.URL)
	db := connect(t, proxied)
	if _, err := db.Query(ctx, "create collection notes (body text)"); err != nil {
		t.Fatal(err)
	}
	res, err := db.Query(ctx, "insert notes {body: $1}", "x")
	if err != nil {
		t.Fatal(err)
	}
	if got := p.last(); got != "" {
		t.Fatalf("sent Fenec-After %q without After, want none (one URL)", got)
	}
	want := strconv.FormatInt(res.Seq, 10)
	notes := db.From("notes")
	if n, err := notes.Count(ctx, fenecdb.After(res.Seq)); err != nil || n != 1 {
		t.Fatalf("count after %d: %d, %v", res.Seq, n, err)
	}
	if got := p.last(); got != want {
		t.Errorf("count sent Fenec-After %q, want %q", got, want)
	}
	if _, err := db.Query(ctx, "get notes", fenecdb.After(res.Seq)); err != nil {
		t.Fatal(err)
	}
	if got := p.last(); got != want {
		t.Errorf("query sent Fenec-After %q, want %q", got, want)
	}
	if _, err := db.Batch(ctx, []fenecdb.Statement{{Query: "get notes"}}, fenecdb.After(res.Seq)); err != nil {
		t.Fatal(err)
	}
	if got := p.last(); got != want {
		t.Errorf("batch sent Fenec-After %q, want %q", got, want)
	}

	// A lone server has no other node to wait for: refused at once.
	_, err = notes.Count(ctx, fenecdb.After(res.Seq+1000))
	var e *fenecdb.Error
	if !errors.As(err, &e) || e.Status != 400 || e.Code != fenecdb.CodeBadRequest {
		t.Fatalf("count after %d: %v, want the server's 400", res.Seq+1000, err)
	}
	if got, want := p.last(), strconv.FormatInt(res.Seq+1000, 10); got != want {
		t.Errorf("sent Fenec-After %q, want %q", got, want)
	}

	before := p.count()
	for _, bad := range []int64{-1, 1 << 53} {
		if _, err := notes.Count(ctx, fenecdb.After(bad)); err == nil {
			t.Errorf("After(%d): no error", bad)
		}
	}
	if p.count() != before {
		t.Errorf("a bad After was sent")
	}
}

// TestAfterTakesTheLarger: given several URLs, the client sends the larger
// of After's seq and the highest Fenec-Seq its nodes returned.
func TestAfterTakesTheLarger(t *testing.T) {
	ctx := context.Background()
	server := fenectest.StartServer(t, "--clock", "manual", "--file", ":memory:")
	p, proxied := startAfterProxy(t, server.URL)
	// The second URL is never reached: the first answers.
	db := connect(t, proxied+","+server.URL)
	if _, err := db.Query(ctx, "create collection notes (body text)"); err != nil {
		t.Fatal(err)
	}
	res, err := db.Query(ctx, "insert notes {body: $1}", "x")
	if err != nil {
		t.Fatal(err)
	}
	seq := strconv.FormatInt(res.Seq, 10)
	if _, err := db.From("notes").Count(ctx, fenecdb.After(0)); err != nil {
		t.Fatal(err)
	}
	if got := p.last(); got != seq {
		t.Errorf("After(0) with the nodes at %d: sent %q, want %q", res.Seq, got, seq)
	}
	_, err = db.From("notes").Count(ctx, fenecdb.After(res.Seq+5))
	var e *fenecdb.Error
	if !errors.As(err, &e) || e.Status != 400 {
		t.Fatalf("count after %d: %v, want the server's 400", res.Seq+5, err)
	}
	if got, want := p.last(), strconv.FormatInt(res.Seq+5, 10); got != want {
		t.Errorf("After(%d): sent %q, want %q", res.Seq+5, got, want)
	}
}
