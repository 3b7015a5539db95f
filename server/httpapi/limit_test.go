package httpapi

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/fenecdb/fenec/server/auth"
	"github.com/fenecdb/fenec/server/httpapi/apitest"
	"github.com/fenecdb/fenec/server/internal/testwait"
)

// longRead fills collection t with n documents and returns a read of
// them that runs for at least least on this machine (an or of many terms,
// each row tested against all), lengthened until it does. Only the
// documents put later with tag "new" match it.
func longRead(t *testing.T, ts *testServer, n int, least time.Duration) string {
	t.Helper()
	ctx := context.Background()
	if _, err := ts.db.Exec(ctx, `create collection t (n int, tag text)`, nil); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < n; i += 1000 {
		var b strings.Builder
		b.WriteString("put t [")
		for j := i; j < i+1000 && j < n; j++ {
			if j > i {
				b.WriteString(",")
			}
			fmt.Fprintf(&b, `{n: %d, tag: "old"}`, j)
		}
		b.WriteString("]")
		if _, err := ts.db.Exec(ctx, b.String(), nil); err != nil {
			t.Fatal(err)
		}
	}
	for terms := 64; ; {
		var b strings.Builder
		b.WriteString("get t select n where ")
		for k := 0; k < terms; k++ {
			fmt.Fprintf(&b, "n = %d or ", -2-k)
		}
		b.WriteString(`tag = "new"`)
		q := b.String()
		start := time.Now()
		if _, err := ts.db.Exec(ctx, q, nil); err != nil {
			t.Fatal(err)
		}
		took := time.Since(start)
		if took >= least || terms >= 1<<16 {
			return q
		}
		// The read's time grows with its terms: once a run is long enough
		// to measure, go straight to the terms it says reach least, with a
		// margin, rather than doubling through every size on the way.
		next := terms * 2
		if took > least/16 {
			next = max(next/2+1, int(float64(terms)*1.3*float64(least)/float64(took)))
		}
		terms = min(next, 1<<16)
	}
}

// holding reports whether the token subject who holds one of its slots
// (tenants): its request has been parsed and is about to run or running.
func holding(ts *testServer, who string) bool {
	ts.tenants.mu.Lock()
	defer ts.tenants.mu.Unlock()
	t := ts.tenants.m[who]
	return t != nil && len(t.slots) > 0
}

// A read that runs for seconds holds up neither a write, nor a point
// read, nor GET /_health: each is answered in milliseconds while the
// read still runs, and the read then answers the state after the write.
func TestSlowReadStallsNothing(t *testing.T) {
	// The read may take longer than --read-timeout on a loaded machine.
	// It is sent under a token held to a policy, whose slot (tenants)
	// shows when the server has taken it in.
	ts, client := scopedServer(t, "t read\n", func(c *Config) { c.TokenConcurrency, c.ReadTimeout = DefaultTokenConcurrency, time.Minute })
	// The put, the point read and GET /_health are each answered within
	// bound (200 ms) or the test fails: a read of 700 ms outlasts the three.
	q := longRead(t, ts, 10000, 700*time.Millisecond)
	reader := client(jwt.MapClaims{"sub": "reader"})
	// The client checks each answer against openapi.yaml, loaded at its
	// first: loaded now, so that the times below are the server's.
	ts.c.MustQuery(`get t where id = 1`)
	var done atomic.Bool
	type answered struct {
		r   *apitest.Response
		err error
	}
	out := make(chan answered, 1)
	start := time.Now()
	go func() {
		r, err := reader.Query(q)
		done.Store(true)
		out <- answered{r, err}
	}()
	testwait.Until(t, "the slow read taken in", func() bool { return holding(ts, "sub:reader") })
	const bound = 200 * time.Millisecond
	timed := func(what string, do func() *apitest.Response) {
		t.Helper()
		at := time.Now()
		r := do()
		if d := time.Since(at); d > bound {
			t.Errorf("%s took %v beside the slow read; want < %v", what, d, bound)
		}
		if r.Status != http.StatusOK {
			t.Errorf("%s: %d %s", what, r.Status, r.Body)
		}
		if done.Load() {
			t.Fatalf("the slow read ended before %s was answered: it tested nothing", what)
		}
		t.Logf("%s: %v", what, time.Since(at))
	}
	timed("a put", func() *apitest.Response { return ts.c.MustQuery(`put t {n: -1, tag: "new"}`) })
	timed("a point read", func() *apitest.Response { return ts.c.MustQuery(`get t where id = 7`) })
	timed("GET /_health", func() *apitest.Response {
		r, err := ts.c.Do("GET", "/_health", nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		return r
	})
	a := <-out
	if a.err != nil {
		t.Fatal(a.err)
	}
	if a.r.Status != http.StatusOK || string(a.r.Body) != "[{\"n\":-1}]\n" {
		t.Fatalf("the slow read: %d %s, want the row put while it ran", a.r.Status, a.r.Body)
	}
	t.Logf("the slow read took %v", time.Since(start))
}

// A read past --read-timeout is stopped and names that flag; writes keep
// --statement-timeout.
func TestReadTimeout(t *testing.T) {
	ts := newTestServer(t, ":memory:", func(c *Config) { c.ReadTimeout = 50 * time.Millisecond })
	q := longRead(t, ts, 2000, 300*time.Millisecond)
	r, err := ts.c.Query(q)
	if err != nil {
		t.Fatal(err)
	}
	if r.Status != http.StatusServiceUnavailable || r.Code() != "statement_timeout" || !strings.Contains(string(r.Body), "--read-timeout") {
		t.Fatalf("a read past --read-timeout: %d %s", r.Status, r.Body)
	}
	// The same filter in a write runs to its end.
	w := ts.c.MustQuery(strings.Replace(q, "get t select n where", "set t {tag: tag} where", 1))
	if string(w.Body) != "{\"affected\":0}\n" {
		t.Fatalf("the write: %s", w.Body)
	}
}

const testSecret = "fenec-test-secret-0123456789abcdef0123456789"

// scopedServer is a test server whose tokens are JWTs held to policy.
func scopedServer(t *testing.T, policy string, edit func(*Config)) (*testServer, func(claims jwt.MapClaims) *apitest.Client) {
	t.Helper()
	var ts *testServer
	ts = newTestServer(t, ":memory:", func(c *Config) {
		v, err := auth.NewVerifier([]byte(testSecret), "", c.Clock)
		if err != nil {
			t.Fatal(err)
		}
		p, err := auth.ParsePolicy("policy.txt", []byte(policy))
		if err != nil {
			t.Fatal(err)
		}
		if c.Gate, err = auth.NewGate("fenec-admin-token-0123456789abcdef0123456789", v, p); err != nil {
			t.Fatal(err)
		}
		c.Token = "fenec-admin-token-0123456789abcdef0123456789"
		if edit != nil {
			edit(c)
		}
	})
	ts.c.Token = "fenec-admin-token-0123456789abcdef0123456789"
	client := func(claims jwt.MapClaims) *apitest.Client {
		claims["exp"] = ts.clock.NowMS()/1000 + 3600
		s, err := jwt.NewWithClaims(jwt.SigningMethodHS256, claims).SignedString([]byte(testSecret))
		if err != nil {
			t.Fatal(err)
		}
		return &apitest.Client{T: t, Base: ts.c.Base, Token: s}
	}
	return ts, client
}

// One token subject running --token-concurrency requests gets 429
// too_busy for one more, after a short wait; another subject is answered
// at once.
func TestTokenConcurrency(t *testing.T) {
	ts, client := scopedServer(t, "t read\n", func(c *Config) { c.TokenConcurrency, c.ReadTimeout = 1, time.Minute })
	// b's read is answered within 200 ms and a2 is refused after
	// tokenQueue (250 ms), or the test fails: a read of 1 s outlasts both.
	q := longRead(t, ts, 4000, time.Second)
	a1, a2, b := client(jwt.MapClaims{"sub": "a"}), client(jwt.MapClaims{"sub": "a"}), client(jwt.MapClaims{"sub": "b"})
	var done atomic.Bool
	out := make(chan *apitest.Response, 1)
	go func() {
		r, err := a1.Query(q)
		if err != nil {
			t.Error(err)
		}
		done.Store(true)
		out <- r
	}()
	testwait.Until(t, "a's slow read taken in", func() bool { return holding(ts, "sub:a") })
	at := time.Now()
	r, err := b.Query(`get t where id = 1 select n`)
	if err != nil || r.Status != http.StatusOK || time.Since(at) > 200*time.Millisecond {
		t.Errorf("another subject: %v %v after %v", err, r, time.Since(at))
	}
	r, err = a2.Query(`get t where id = 1 select n`)
	if err != nil {
		t.Fatal(err)
	}
	if r.Status != http.StatusTooManyRequests || r.Code() != "too_busy" || r.Header.Get("Retry-After") != "1" {
		t.Errorf("a second request of the same subject: %d %s %v", r.Status, r.Body, r.Header)
	}
	if done.Load() {
		t.Fatal("the slow read ended before the refusal: it tested nothing")
	}
	if r := <-out; r == nil || r.Status != http.StatusOK {
		t.Fatalf("the slow read: %v", r)
	}
	// Its slot given back, the subject runs again.
	if r, err := a2.Query(`get t where id = 1 select n`); err != nil || r.Status != http.StatusOK {
		t.Fatalf("after: %v %v", err, r)
	}
	if len(ts.tenants.m) != 0 {
		t.Errorf("subjects left counted: %v", ts.tenants.m)
	}
}
