package auth

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

func TestThrottle(t *testing.T) {
	now := time.Unix(0, 0)
	th := NewThrottle(func() time.Time { return now })
	ms := func(d time.Duration) int64 { return d.Milliseconds() }

	// Refused one after the other, each answer awaited: 100 ms, doubling,
	// at most 5 s.
	var waits []int64
	for range 9 {
		w := th.Fail("a")
		waits = append(waits, ms(w))
		now = now.Add(w)
	}
	if got, want := waits, []int64{100, 200, 400, 800, 1600, 3200, 5000, 5000, 5000}; !equalInts(got, want) {
		t.Errorf("waits %v, want %v", got, want)
	}
	if w := th.Fail("b"); ms(w) != 100 {
		t.Errorf("another address starts at the first delay: %v", w)
	}
	// Refusals side by side are spaced out, not answered together.
	if a, b := th.Fail("a"), th.Fail("a"); ms(a) != 5000 || ms(b) != 10000 {
		t.Errorf("side by side: %v %v", a, b)
	}
	// An address gone quiet is forgotten, and starts again.
	now = now.Add(2 * forget)
	th.Fail("c")
	if _, kept := th.addrs["a"]; kept {
		t.Error("an idle penalty was kept")
	}
	if w := th.Fail("a"); ms(w) != 100 {
		t.Errorf("after a quiet spell the delay starts again: %v", w)
	}
}

func equalInts(a, b []int64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestNewGate(t *testing.T) {
	v, _ := newTestVerifier(t)
	p, _ := ParsePolicy("p", []byte("jobs read"))
	if _, err := NewGate("", v, nil); err == nil || !strings.Contains(err.Error(), "need --policy") {
		t.Errorf("JWT without policy: %v", err)
	}
	if _, err := NewGate("t", nil, p); err == nil || !strings.Contains(err.Error(), "--policy needs --jwt-secret or --jwt-keys") {
		t.Errorf("policy without JWT: %v", err)
	}
	g, err := NewGate("", nil, nil)
	if err != nil || !g.Open() {
		t.Errorf("open gate: %v", err)
	}
}

func TestGate(t *testing.T) {
	v, _ := newTestVerifier(t)
	p, err := ParsePolicy("policy.txt", []byte(workerPolicy))
	if err != nil {
		t.Fatal(err)
	}
	g, err := NewGate("root-token", v, p)
	if err != nil {
		t.Fatal(err)
	}
	// Short timings stand in for the real ones: the first delay here is
	// this test's clock step.
	now := time.Now()
	g.throttle.now = func() time.Time { return now }

	admit := func(header string) (Access, error) {
		r := httptest.NewRequest("POST", "/query", nil)
		r.RemoteAddr = "192.0.2.1:5000"
		if header != "" {
			r.Header.Set("Authorization", header)
		}
		return g.Admit(context.Background(), r)
	}
	a, err := admit("Bearer root-token")
	if err != nil || a.Scope != nil || a.Key != "" {
		t.Fatalf("--token: %+v %v", a, err)
	}
	tok := mint(t, jwt.SigningMethodHS256, testSecret, "", worker(startSec+60))
	a, err = admit("bearer " + tok)
	if err != nil || a.Scope == nil || ruleNames(a.Scope) != "2,3,4,5" || !strings.HasPrefix(a.Key, "jwt:") {
		t.Fatalf("worker JWT: %+v %v", a, err)
	}
	for _, c := range []struct{ header, want string }{
		{"", "missing bearer token"},
		{"Basic dTpw", "the Authorization header must be Bearer <token>"},
		{"Bearer root-tokem", "invalid bearer token"},
		{"Bearer " + tok + "x", "token signature is invalid"},
	} {
		now = now.Add(MaxDelay) // past any wait
		_, err := admit(c.header)
		var te *TokenError
		if !errors.As(err, &te) || !strings.HasPrefix(te.Msg, c.want) {
			t.Errorf("%q: %v, want %q", c.header, err, c.want)
		}
	}
	// The address has been refused four times: a good token is admitted at
	// once all the same, without waiting its turn, and a context that ends
	// while a refusal is held gives up.
	start := time.Now()
	// Held, it would wait FirstDelay at least (the throttle's shortest).
	if _, err := admit("Bearer root-token"); err != nil || time.Since(start) >= FirstDelay {
		t.Fatalf("a good token from a guessing address: %v after %v", err, time.Since(start))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	r := httptest.NewRequest("POST", "/query", nil)
	r.RemoteAddr = "192.0.2.1:5001"
	r.Header.Set("Authorization", "Bearer wrong")
	if _, err := g.Admit(ctx, r); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a refusal held past the context: %v", err)
	}
}

// TestGoodTokensNeverWait: while sixteen connections from one address send
// wrong tokens (as clients behind one proxy share an address), a good token
// from that address is answered at once, and the refusals are held.
func TestGoodTokensNeverWait(t *testing.T) {
	g, err := NewGate("root-token", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req := func(token string) *http.Request {
		r := httptest.NewRequest("POST", "/query", nil)
		r.RemoteAddr = "192.0.2.7:4000"
		r.Header.Set("Authorization", "Bearer "+token)
		return r
	}
	var wg sync.WaitGroup
	var refused atomic.Int64
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				if _, err := g.Admit(ctx, req("guess")); err != nil && ctx.Err() == nil {
					refused.Add(1)
				}
			}
		}()
	}
	// The guessers run 300 ms: their penalty builds up, and the refusals
	// counted below are counted over that time (the behaviour under test).
	time.Sleep(300 * time.Millisecond)
	for range 20 {
		start := time.Now()
		if _, err := g.Admit(ctx, req("root-token")); err != nil {
			t.Fatal(err)
		}
		// Held behind the refusals, it would wait their turn: seconds by
		// now, and never less than FirstDelay.
		if d := time.Since(start); d >= FirstDelay {
			t.Fatalf("a good token waited %v behind refused ones", d)
		}
	}
	cancel()
	wg.Wait()
	// Refusals are spaced out: in 300 ms and then some, far fewer than one
	// per connection per millisecond were answered.
	if n := refused.Load(); n > 16 {
		t.Errorf("%d refusals answered: the throttle held none", n)
	}
}

func TestOpenGate(t *testing.T) {
	g, _ := NewGate("", nil, nil)
	a, err := g.Admit(context.Background(), httptest.NewRequest("GET", "/", nil))
	if err != nil || a.Scope != nil {
		t.Errorf("%+v %v", a, err)
	}
}
