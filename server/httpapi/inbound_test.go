package httpapi

import (
	"bufio"
	"io"
	"log"
	"net/http"
	"path/filepath"
	"testing"
	"time"

	"github.com/fenecdb/fenec/server/engine"
	"github.com/fenecdb/fenec/server/httpapi/apitest"
	"github.com/fenecdb/fenec/server/httpapi/internal/h1"
	"github.com/fenecdb/fenec/server/httpapi/internal/h1/h1test"
	"github.com/fenecdb/fenec/server/store"
)

// TestConnInbound: every request HTTPServer counts on its way to a commit
// (CountInbound) is let go on each path it may take — a body that fails
// to parse, a read, a write refused, a held claim waiting, a connection
// closed mid-body, a handler's panic — so that a lone write after them is
// not held by the store's sync (store.Inbound), while a request still on
// its way does hold it.
func TestConnInbound(t *testing.T) {
	t.Parallel()
	const hold = 2 * time.Second // far above a sync, so a hold shows
	in := store.NewInbound(hold)
	ts := newTestServerOn(t, engine.Options{File: filepath.Join(t.TempDir(), "in.db"), Sync: store.SyncMode{Kind: store.SyncAlways}, Inbound: in}, nil)
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/panic" {
			panic("boom")
		}
		ts.Server.ServeHTTP(w, r)
	})
	srv := h1.New(h, &http.Server{Handler: h, ErrorLog: log.New(io.Discard, "", 0)})
	srv.CountInbound(in)
	ln := h1test.MustListen(t)
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	addr := ln.Addr().String()
	c := &apitest.Client{T: t, Base: "http://" + addr}
	c.MustQuery("create collection jobs (run_at timestamp @sorted, owner text)")
	c.MustQuery("create collection notes (text text)")

	none := func(after string) {
		t.Helper()
		for deadline := time.Now().Add(5 * time.Second); in.Pending() != 0; time.Sleep(time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("after %s, %d requests still counted on their way", after, in.Pending())
			}
		}
	}
	timedPut := func() time.Duration {
		start := time.Now()
		c.MustQuery("put notes {text: 'x'}")
		return time.Since(start)
	}
	none("two writes")

	// On a connection kept open: its end would let its request go too.
	kept := h1test.MustDial(t, addr)
	defer kept.Close()
	io.WriteString(kept, post("/query", `{"query":`))
	if r, err := http.ReadResponse(bufio.NewReader(kept), nil); err != nil || r.StatusCode != 400 {
		t.Fatalf("a body that fails to parse: %v %v", r, err)
	}
	none("a body that fails to parse")
	c.MustQuery("get jobs")
	none("a read")
	if r, err := c.Query("del jobs where id = 1 require 1"); err != nil || r.Status != 412 {
		t.Fatalf("a refused write: %v %v", r, err)
	}
	none("a write refused")

	held := h1test.MustDial(t, addr)
	io.WriteString(held, post("/query", `{"query":"set jobs {owner: 'w'} where run_at <= now() order run_at limit 1 returning id","params":[]}`, "Fenec-Wait: 30000\r\n"))
	awaitHeldIn(t, ts, 1)
	none("a held claim waiting")

	// A request whose body has not all come is on its way: a lone write
	// meanwhile is held, until its connection closes.
	mid := h1test.MustDial(t, addr)
	io.WriteString(mid, "POST /query HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"query\":")
	for deadline := time.Now().Add(5 * time.Second); in.Pending() != 1; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("a request with half its body: %d counted on their way, want 1", in.Pending())
		}
	}
	took := make(chan time.Duration, 1)
	go func() { took <- timedPut() }()
	// The connection closes a quarter of the hold later: the time the put
	// is held for it (the behaviour under test).
	time.Sleep(hold / 4)
	mid.Close()
	if d := <-took; d < hold/8 || d >= hold {
		t.Fatalf("a write while a request was on its way took %v, want from %v (held) to below the hold, %v (let go at its close)", d, hold/8, hold)
	}
	none("a connection closed mid-body")

	if out := h1test.Exchange(t, addr, post("/panic", `{}`), false); out != "" {
		t.Fatalf("a handler's panic answered %q", out)
	}
	none("a handler's panic")
	held.Close()
	awaitHeldIn(t, ts, 0)
	none("a held claim's connection closed")

	// Past the window in which a connection counts as one writing lately
	// (the put above was this client's, on its connection), a lone write
	// is never held.
	h1test.Await(t, func() bool { return in.Active() == 0 }, func() string { return "a connection still counts as writing lately after 5 s" })
	for range 3 {
		if d := timedPut(); d >= hold/2 {
			t.Fatalf("a lone write after those paths took %v: held", d)
		}
	}
}
