package httpapi

import (
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/fenecdb/fenec/server/httpapi/apitest"
	"github.com/fenecdb/fenec/server/internal/syncbuf"
)

func TestClock(t *testing.T) {
	t.Parallel()
	tests := []struct {
		body   string
		status int
		nowMS  int64
	}{
		{`{"advance_ms": 20000}`, 200, 1777800020000},
		{`{"advance_ms": 0}`, 200, 1777800020000},
		{`{"set_ms": 1777800000000}`, 200, 1777800000000},
		{`{"advance_ms": 253402300799999}`, 400, 0},
		{`{}`, 400, 0},
	}
	ts := newTestServer(t, ":memory:", nil)
	for _, tt := range tests {
		r, err := ts.c.Do("POST", "/_clock", tt.body, nil)
		if err != nil {
			t.Fatal(err)
		}
		if r.Status != tt.status {
			t.Errorf("%s: %d %s, want %d", tt.body, r.Status, r.Body, tt.status)
			continue
		}
		if tt.status == 200 {
			var now struct {
				NowMS int64 `json:"now_ms"`
				Now   string
			}
			r.JSON(t, &now)
			if now.NowMS != tt.nowMS || ts.clock.NowMS() != tt.nowMS {
				t.Errorf("%s: now %d (clock %d), want %d", tt.body, now.NowMS, ts.clock.NowMS(), tt.nowMS)
			}
		}
	}
}

func TestClockNeedsManual(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, ":memory:", func(c *Config) { c.Clock = nil })
	r, err := ts.c.Do("POST", "/_clock", `{"advance_ms": 1}`, nil)
	if err != nil || r.Status != 404 || r.Code() != "not_found" {
		t.Fatalf("%v %v", err, r)
	}
}

func TestCollections(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, ":memory:", nil)
	ts.c.MustQuery("create collection jobs (payload json, run_at timestamp @sorted, owner text @hash)")
	ts.c.MustQuery("create collection places (at geo @geo, name text @unique)")
	ts.c.MustQuery(`put places {at: [29.01, 41.04], name: "a"}`)
	r, err := ts.c.Do("GET", "/collections", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	const want = `{"collections":[` +
		`{"name":"jobs","documents":0,"fields":[{"name":"payload","type":"json","index":null},{"name":"run_at","type":"timestamp","index":"sorted"},{"name":"owner","type":"text","index":"hash"}]},` +
		`{"name":"places","documents":1,"fields":[{"name":"at","type":"geo","index":"geo"},{"name":"name","type":"text","index":"unique"}]}]}` + "\n"
	if string(r.Body) != want {
		t.Errorf("got  %s\nwant %s", r.Body, want)
	}
}

// TestCollectionsTTL: a @ttl field shows its duration, and a lapsed
// document, not swept yet, is not counted.
func TestCollectionsTTL(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, ":memory:", nil)
	ts.c.MustQuery("create collection sessions (key text @unique, seen timestamp @sorted @ttl(30m), at timestamp @ttl(2h))")
	ts.c.MustQuery(`put sessions [{key: "a", seen: now()}, {key: "b", seen: now()}, {key: "c", seen: now() - 1800000}, {key: "d", at: now() - 7200000}]`)
	r, err := ts.c.Do("GET", "/collections", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	const want = `{"collections":[{"name":"sessions","documents":2,"fields":[` +
		`{"name":"key","type":"text","index":"unique"},{"name":"seen","type":"timestamp","index":"sorted","ttl_ms":1800000},{"name":"at","type":"timestamp","index":null,"ttl_ms":7200000}]}]}` + "\n"
	if string(r.Body) != want {
		t.Errorf("got  %s\nwant %s", r.Body, want)
	}
}

func TestToken(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, ":memory:", func(c *Config) { c.Token = "s3cret" })
	tests := []struct {
		path, auth string
		status     int
	}{
		{"/_health", "", 200},
		{"/collections", "", 401},
		{"/collections", "Bearer s3cret", 200},
		{"/collections", "bearer s3cret", 200},
		{"/collections", "Bearer s3cre", 401},
		{"/collections", "Bearer s3crett", 401},
		{"/collections", "Basic s3cret", 401},
		{"/collections", "s3cret", 401},
		{"/_metrics", "", 401},
		{"/_metrics", "Bearer s3cret", 200},
	}
	c := *ts.c
	c.Token = ""
	for i, tt := range tests {
		// Each from an address of its own: from one, the refusals would
		// wait 0.1 + 0.2 + … + 3.2 s (the throttle, tested in auth).
		c.HTTP = apitest.From(fmt.Sprintf("127.0.0.%d", 10+i))
		h := map[string]string{}
		if tt.auth != "" {
			h["Authorization"] = tt.auth
		}
		r, err := c.Do("GET", tt.path, nil, h)
		if err != nil {
			t.Fatal(err)
		}
		if r.Status != tt.status {
			t.Errorf("%s with %q: %d, want %d", tt.path, tt.auth, r.Status, tt.status)
		}
		if tt.status == 401 && (r.Code() != "unauthorized" || r.Header.Get("WWW-Authenticate") == "") {
			t.Errorf("%s with %q: %s %v", tt.path, tt.auth, r.Body, r.Header)
		}
	}
}

// TestSlowLog: a request whose statements run --slow-ms or longer is
// logged with its statement.
func TestSlowLog(t *testing.T) {
	t.Parallel()
	buf := &syncbuf.Buffer{}
	log := slog.New(slog.NewTextHandler(buf, nil))
	ts := newTestServer(t, ":memory:", func(c *Config) { c.Slow = time.Nanosecond; c.Log = log })
	ts.c.MustQuery("create collection slowpoke (n int)")
	if !strings.Contains(buf.String(), "slow request") || !strings.Contains(buf.String(), "create collection slowpoke") {
		t.Errorf("log: %s", buf.String())
	}
}

// TestColumnNamesAreJSON: a column is named by its text, which may hold
// control characters; the answer must still be JSON (the client checks it
// against the spec).
func TestColumnNamesAreJSON(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, ":memory:", nil)
	ts.c.MustQuery("create collection t (n int)")
	ts.c.MustQuery("put t {n: 1}")
	r := ts.c.MustQuery("get t select \"a\u0001\u007f\u2028\"")
	var rows []map[string]string
	r.JSON(t, &rows)
	if len(rows) != 1 || rows[0]["\"a\u0001\u007f\u2028\""] != "a\u0001\u007f\u2028" {
		t.Errorf("%q", r.Body)
	}
}
