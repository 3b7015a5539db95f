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
)

// TestLiveQueryOutlivesTimeouts: a live query lasts past the connection's
// read and write timeouts, which are made for one answer — on the
// server's own HTTP/1.1 reader and on net/http (a head it hands over) —
// and still brings the events of the writes that come after them.
func TestLiveQueryOutlivesTimeouts(t *testing.T) {
	const timeout = 300 * time.Millisecond
	ts := newTestServer(t, ":memory:", func(c *Config) { c.Changes = changes.Options{Heartbeat: 50 * time.Millisecond} })
	fallback := &http.Server{Handler: ts.Server, ReadHeaderTimeout: timeout, ReadTimeout: timeout, WriteTimeout: timeout,
		IdleTimeout: timeout, ErrorLog: slog.NewLogLogger(slog.DiscardHandler, slog.LevelWarn)}
	srv := newHTTPServer(ts.Server, fallback)
	ln := mustListen(t)
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
		before := srv.handoffs.Load()
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		if handed := srv.handoffs.Load() > before; handed != odd {
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
