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
	// The line is written once the answer is. At debug each is waited for;
	// at info, where none must come, one wait of a second after the last
	// send gives all three time to show.
	logged := func(want string) string {
		for _, l := range strings.Split(out.String(), "\n") {
			if strings.Contains(l, want) {
				return l
			}
		}
		return ""
	}
	for _, s := range sends {
		r, err := ts.c.Do("POST", "/query", s.body, s.header)
		if err != nil {
			t.Fatal(err)
		}
		if r.Status != s.status {
			t.Fatalf("%s: %d %s, want %d", s.body, r.Status, r.Body, s.status)
		}
		if level != slog.LevelDebug {
			continue
		}
		line := ""
		for deadline := time.Now().Add(time.Second); line == "" && time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
			line = logged(s.want)
		}
		switch {
		case line == "":
			t.Errorf("%s: no refusal logged with %q:\n%s", s.body, s.want, out.String())
		case !strings.Contains(line, "msg=refused method=POST path=/query route=/query status="):
			t.Errorf("the refusal's line names no route or status: %s", line)
		}
	}
	if level == slog.LevelDebug {
		return
	}
	for deadline := time.Now().Add(time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		for _, s := range sends {
			if line := logged(s.want); line != "" {
				t.Fatalf("at info, a refusal was logged: %s", line)
			}
		}
	}
}
