package httpapi

import (
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/fenecdb/fenec/server/internal/syncbuf"
)

// TestRefusedLoggedAtDebug: at debug level every refused request is
// logged with its route, status, code and reason — those refused before
// any statement runs (a bad header, a body that is not JSON) as well as a
// statement's — and at info none is.
func TestRefusedLoggedAtDebug(t *testing.T) {
	t.Parallel()
	for _, level := range []slog.Level{slog.LevelDebug, slog.LevelInfo} {
		t.Run(level.String(), func(t *testing.T) {
			t.Parallel()
			refusedLoggedAt(t, level)
		})
	}
}

func refusedLoggedAt(t *testing.T, level slog.Level) {
	var out syncbuf.Buffer
	ts := newTestServer(t, ":memory:", func(c *Config) {
		c.Log = slog.New(slog.NewTextHandler(&out, &slog.HandlerOptions{Level: level}))
	})
	sends := []struct {
		body   string
		header map[string]string
		status int
		want   string
	}{
		{`{"query": "get jobs"}`, map[string]string{"Fenec-Wait": "1.5"}, 400, `code=bad_request error="Fenec-Wait must be a whole number`},
		{`{"query": `, nil, 400, `error="the body is not valid JSON`},
		{`{"query": "get nope"}`, nil, 404, `code=not_found error="position 1: no collection nope"`},
	}
	for _, s := range sends {
		r, err := ts.c.Do("POST", "/query", s.body, s.header)
		if err != nil {
			t.Fatal(err)
		}
		if r.Status != s.status {
			t.Fatalf("%s: %d %s, want %d", s.body, r.Status, r.Body, s.status)
		}
		// The line is written once the answer is: wait for it (at
		// info, as long, for one that must not come).
		line := ""
		for deadline := time.Now().Add(time.Second); line == "" && time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
			for _, l := range strings.Split(out.String(), "\n") {
				if strings.Contains(l, s.want) {
					line = l
				}
			}
		}
		switch {
		case level == slog.LevelDebug && line == "":
			t.Errorf("%s: no refusal logged with %q:\n%s", s.body, s.want, out.String())
		case level == slog.LevelDebug && !strings.Contains(line, "msg=refused method=POST path=/query route=/query status="):
			t.Errorf("the refusal's line names no route or status: %s", line)
		case level == slog.LevelInfo && line != "":
			t.Errorf("at info, a refusal was logged: %s", line)
		}
	}
}
