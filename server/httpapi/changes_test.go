package httpapi

import (
	"bufio"
	"context"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/fenecdb/fenec/server/changes"
	"github.com/fenecdb/fenec/server/httpapi/internal/h1"
	"github.com/fenecdb/fenec/server/httpapi/internal/h1/h1test"
	"github.com/fenecdb/fenec/server/internal/testwait"
)

// TestLiveQueryOutlivesTimeouts: a live query lasts past the connection's
// read and write timeouts, which are made for one answer — on the
// server's own HTTP/1.1 reader and on net/http (a head it hands over) —
// and still brings the events of the writes that come after them.
func TestLiveQueryOutlivesTimeouts(t *testing.T) {
	t.Parallel()
	const timeout = 300 * time.Millisecond
	ts := newTestServer(t, ":memory:", func(c *Config) { c.Changes = changes.Options{Heartbeat: 50 * time.Millisecond} })
	fallback := &http.Server{Handler: ts.Server, ReadHeaderTimeout: timeout, ReadTimeout: timeout, WriteTimeout: timeout,
		IdleTimeout: timeout, ErrorLog: slog.NewLogLogger(slog.DiscardHandler, slog.LevelWarn)}
	srv := h1.New(ts.Server, fallback)
	ln := h1test.MustListen(t)
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	ts.c.MustQuery(`create collection msgs (text text)`)

	for _, odd := range []bool{false, true} {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		req, _ := http.NewRequestWithContext(ctx, "GET", "http://"+ln.Addr().String()+"/msgs/changes", nil)
		req.Header.Set("Accept", "text/event-stream")
		if odd {
			req.Header.Set("X-Via", "é") // not ASCII: handed to net/http
		}
		before := srv.Handoffs()
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		if handed := srv.Handoffs() > before; handed != odd {
			t.Fatalf("handed to net/http: %v, want %v", handed, odd)
		}
		lines := make(chan string, 100)
		go func() {
			sc := bufio.NewScanner(resp.Body)
			for sc.Scan() {
				lines <- sc.Text()
			}
			close(lines)
		}()
		// Past both timeouts, heartbeats still come, then a write's event.
		start := time.Now()
		for time.Since(start) < 3*timeout {
			if _, ok := <-lines; !ok {
				t.Fatalf("odd %v: the stream ended after %v", odd, time.Since(start))
			}
		}
		ts.c.MustQuery(`put msgs {text: "late"}`)
		deadline := time.After(10 * time.Second)
		for found := false; !found; {
			select {
			case l, ok := <-lines:
				if !ok {
					t.Fatalf("odd %v: the stream ended before the write's event", odd)
				}
				found = strings.HasPrefix(l, "data: ") && strings.Contains(l, `"late"`)
			case <-deadline:
				t.Fatalf("odd %v: no event for the write", odd)
			}
		}
		cancel()
		resp.Body.Close()
	}
}

// TestChangesMetrics: /_metrics counts the live queries open, the events
// sent, and each consumer's lag in positions and seconds (by the
// database's clock). The subscribers dropped are counted in the changes
// package's TestLiveQueryBehind.
func TestChangesMetrics(t *testing.T) {
	ts := newTestServer(t, t.TempDir()+"/m.db", nil)
	ts.c.MustQuery(`create collection msgs (text text)`)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "POST", ts.c.Base+"/query", strings.NewReader(`{"query": "get msgs"}`))
	req.Header.Set("Accept", "text/event-stream")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() && !strings.HasPrefix(sc.Text(), "data: ") {
	}
	// An event is counted once sent, just after the client may read it.
	fams := scrape(t, ts)
	testwait.Within(testwait.Timeout, func() bool {
		fams = scrape(t, ts)
		return value(fams, "fenec_changes_events_total", nil) >= 1
	})
	if got := value(fams, "fenec_changes_subscribers", nil); got != 1 {
		t.Errorf("subscribers %v, want 1", got)
	}
	if got := value(fams, "fenec_changes_events_total", nil); got != 1 {
		t.Errorf("events %v, want 1 (the first rows)", got)
	}

	// A consumer that acked, then 3 writes it has not read, the first 2 s
	// before the scrape.
	r, err := ts.c.Do("GET", "/_changes?consumer=lagging", nil, nil)
	if err != nil || r.Status != 200 {
		t.Fatalf("read: %v %v", err, r)
	}
	head := ts.db.Seq()
	if r, err := ts.c.Do("POST", "/_changes/ack", map[string]any{"consumer": "lagging", "position": head}, nil); err != nil || r.Status != 200 {
		t.Fatalf("ack: %v %v", err, r)
	}
	ts.c.MustQuery(`put msgs {text: "a"}`)
	ts.clock.Advance(2000)
	ts.c.MustQuery(`put msgs {text: "b"}`)
	ts.c.MustQuery(`put msgs {text: "c"}`)
	// The live query's three events, then its client goes away.
	for n := 0; n < 3 && sc.Scan(); {
		if strings.HasPrefix(sc.Text(), "data: ") {
			n++
		}
	}
	cancel()
	deadline := time.Now().Add(10 * time.Second)
	for {
		fams = scrape(t, ts)
		if value(fams, "fenec_changes_subscribers", nil) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the live query whose client went away is still counted")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if got := value(fams, "fenec_changes_events_total", nil); got != 4 {
		t.Errorf("events %v, want 4", got)
	}
	lagging := map[string]string{"consumer": "lagging"}
	// The ack's own commit is a position too, before the 3 writes.
	if got, want := value(fams, "fenec_changes_consumer_lag_positions", lagging), float64(ts.db.Seq()-head); got != want || want != 4 {
		t.Errorf("lag positions %v, want %v", got, want)
	}
	if got := value(fams, "fenec_changes_consumer_lag_seconds", lagging); got != 2 {
		t.Errorf("lag seconds %v, want 2", got)
	}
}
