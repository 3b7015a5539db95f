package auth

import (
	"context"
	"errors"
	"log/slog"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/fenecdb/fenec/server/clock"
)

// A JWT admitted once is admitted again from the gate's seen tokens, but
// only while a full check would admit it too: past its exp, before its
// nbf (a clock set back), once its key is gone from the key file or
// changed in it, it is refused with the full check's own error; and a
// token one byte off is never taken for one seen.
func TestSeenTokens(t *testing.T) {
	v, clk, path, rk := newTestVerifierKeys(t)
	_, rk2 := testRSA(t)
	v.SetLogger(slog.New(slog.DiscardHandler))
	wall := time.Now()
	v.keys.now = func() time.Time { return wall }
	p, err := ParsePolicy("policy.txt", []byte(workerPolicy))
	if err != nil {
		t.Fatal(err)
	}
	g, err := NewGate("", v, p)
	if err != nil {
		t.Fatal(err)
	}
	admit := func(step, tok, want string) {
		t.Helper()
		g.throttle = NewThrottle(time.Now) // each refusal a first one: one short wait
		r := httptest.NewRequest("POST", "/query", nil)
		r.RemoteAddr = "192.0.2.1:5000"
		r.Header.Set("Authorization", "Bearer "+tok)
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		a, err := g.Admit(ctx, r)
		if want == "" {
			if err != nil || a.Scope == nil || ruleNames(a.Scope) != "2,3,4,5" {
				t.Errorf("%s: %+v %v", step, a, err)
			}
			return
		}
		var te *TokenError
		if !errors.As(err, &te) || !strings.HasPrefix(te.Msg, want) {
			t.Errorf("%s: %v, want %q", step, err, want)
		}
	}
	seen := func() int {
		g.seen.mu.Lock()
		defer g.seen.mu.Unlock()
		return len(g.seen.m)
	}

	// Times: exp in 60 s, nbf now.
	claims := worker(startSec + 60)
	claims["nbf"] = startSec
	hs := mint(t, jwt.SigningMethodHS256, testSecret, "", claims)
	admit("first", hs, "")
	admit("again", hs, "")
	if seen() != 1 {
		t.Fatalf("%d tokens seen, want 1", seen())
	}
	i := len(hs) - 10 // in the signature, away from its last character's spare bits
	off := hs[:i] + map[bool]string{true: "A", false: "B"}[hs[i] != 'A'] + hs[i+1:]
	admit("one byte off", off, "token signature is invalid")
	clk.Set(clock.ManualStart - 1000)
	admit("before its nbf", hs, "token is not valid yet")
	clk.Set(clock.ManualStart + 59_999)
	admit("a millisecond before its exp", hs, "")
	clk.Set(clock.ManualStart + 60_000)
	admit("at its exp", hs, "token expired")
	clk.Set(clock.ManualStart)

	// A key of the key file: removed, then back under its kid with another
	// public key.
	rs := mint(t, jwt.SigningMethodRS256, rk, "r1", worker(startSec+60))
	admit("RS256", rs, "")
	admit("RS256 again", rs, "")
	writeJWKS(t, path, octJWK("h1", otherSecret))
	admit("within a second of the key file's change", rs, "")
	wall = wall.Add(recheck)
	admit("its key removed", rs, `token kid "r1" is not a known key`)
	writeJWKS(t, path, octJWK("h1", otherSecret), rsaJWK("r1", &rk2.PublicKey))
	wall = wall.Add(recheck)
	admit("its kid another key's", rs, "token signature is invalid")
	writeJWKS(t, path, octJWK("h1", otherSecret), rsaJWK("r1", &rk.PublicKey))
	wall = wall.Add(recheck)
	admit("its key back", rs, "")

	// The tokens kept are bounded.
	for i := range maxSeenTokens + 10 {
		admit("many", mint(t, jwt.SigningMethodHS256, testSecret, "", worker(startSec+60+int64(i))), "")
	}
	if n := seen(); n != maxSeenTokens {
		t.Errorf("%d tokens seen, want %d", n, maxSeenTokens)
	}
}

// BenchmarkAdmit is a request's admission with the --token, and with a
// JWT the gate has seen before (HS256 and RS256, held to the test policy):
//
//	cd server && go test ./auth -run '^$' -bench BenchmarkAdmit -benchmem
func BenchmarkAdmit(b *testing.B) {
	rk, _ := testRSA(b)
	path := filepath.Join(b.TempDir(), "jwks.json")
	writeJWKS(b, path, rsaJWK("r1", &rk.PublicKey))
	v, err := NewVerifier(testSecret, path, clock.NewManual())
	if err != nil {
		b.Fatal(err)
	}
	p, err := ParsePolicy("policy.txt", []byte(workerPolicy))
	if err != nil {
		b.Fatal(err)
	}
	g, err := NewGate("fenec-test-token-0123456789abcdef0123456789", v, p)
	if err != nil {
		b.Fatal(err)
	}
	for _, c := range []struct {
		name string
		tok  string
	}{
		{"token", "fenec-test-token-0123456789abcdef0123456789"},
		{"HS256", mint(b, jwt.SigningMethodHS256, testSecret, "", worker(startSec+3600))},
		{"RS256", mint(b, jwt.SigningMethodRS256, rk, "r1", worker(startSec+3600))},
	} {
		b.Run(c.name, func(b *testing.B) {
			r := httptest.NewRequest("POST", "/query", nil)
			r.Header.Set("Authorization", "Bearer "+c.tok)
			for b.Loop() {
				if _, err := g.Admit(context.Background(), r); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
