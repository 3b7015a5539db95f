package auth

import (
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"log/slog"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/fenecdb/fenec/server/clock"
)

var (
	testSecret  = []byte("0123456789abcdef0123456789abcdef")
	otherSecret = []byte("fedcba9876543210fedcba9876543210")
	rsaOnce     sync.Once
	rsaKeys     [2]*rsa.PrivateKey
)

// testRSA returns two 2048-bit keys, made once: making them is slow.
func testRSA(t testing.TB) (*rsa.PrivateKey, *rsa.PrivateKey) {
	t.Helper()
	rsaOnce.Do(func() {
		for i := range rsaKeys {
			k, err := rsa.GenerateKey(rand.Reader, 2048)
			if err != nil {
				panic(err)
			}
			rsaKeys[i] = k
		}
	})
	return rsaKeys[0], rsaKeys[1]
}

func b64(b []byte) string { return base64.RawURLEncoding.EncodeToString(b) }

func octJWK(kid string, secret []byte) map[string]any {
	return map[string]any{"kty": "oct", "kid": kid, "alg": "HS256", "k": b64(secret)}
}

func rsaJWK(kid string, pub *rsa.PublicKey) map[string]any {
	return map[string]any{"kty": "RSA", "kid": kid, "use": "sig", "n": b64(pub.N.Bytes()), "e": b64(big.NewInt(int64(pub.E)).Bytes())}
}

func writeJWKS(t testing.TB, path string, keys ...map[string]any) {
	t.Helper()
	data, err := json.Marshal(map[string]any{"keys": keys})
	if err != nil {
		t.Fatal(err)
	}
	// Written beside and renamed over, as a careful operator rotates.
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// mint signs claims with method and key; kid "" sets none.
func mint(t testing.TB, method jwt.SigningMethod, key any, kid string, claims jwt.MapClaims) string {
	t.Helper()
	tok := jwt.NewWithClaims(method, claims)
	if kid != "" {
		tok.Header["kid"] = kid
	}
	s, err := tok.SignedString(key)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// critical mints an HS256 token whose header names a critical extension.
func critical(t testing.TB, claims jwt.MapClaims) string {
	t.Helper()
	tok := jwt.NewWithClaims(jwt.SigningMethodHS256, claims)
	tok.Header["crit"] = []string{"b64"}
	tok.Header["b64"] = false
	s, err := tok.SignedString(testSecret)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// The manual clock's start, as JWT seconds.
const startSec = clock.ManualStart / 1000

func worker(exp int64) jwt.MapClaims {
	return jwt.MapClaims{"sub": "w1", "role": "worker", "queue": "mail", "exp": exp}
}

func newTestVerifier(t *testing.T) (*Verifier, *clock.Manual) {
	t.Helper()
	v, clk, _, _ := newTestVerifierKeys(t)
	return v, clk
}

// newTestVerifierKeys is newTestVerifier with its key file's path and the
// RSA key under kid r1, for a test that rewrites the file.
func newTestVerifierKeys(t *testing.T) (*Verifier, *clock.Manual, string, *rsa.PrivateKey) {
	t.Helper()
	rk, _ := testRSA(t)
	path := filepath.Join(t.TempDir(), "jwks.json")
	writeJWKS(t, path, octJWK("h1", otherSecret), rsaJWK("r1", &rk.PublicKey))
	clk := clock.NewManual()
	v, err := NewVerifier(testSecret, path, clk)
	if err != nil {
		t.Fatal(err)
	}
	return v, clk, path, rk
}

func TestVerify(t *testing.T) {
	v, _ := newTestVerifier(t)
	rk, stranger := testRSA(t)
	exp := startSec + 3600
	good := mint(t, jwt.SigningMethodHS256, testSecret, "", worker(exp))
	pubPEM := pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: must(x509.MarshalPKIXPublicKey(&rk.PublicKey))})
	none := mint(t, jwt.SigningMethodNone, jwt.UnsafeAllowNoneSignatureType, "", worker(exp))
	parts := strings.Split(good, ".")
	forged := jwt.MapClaims{"sub": "w2", "role": "worker", "queue": "mail", "exp": exp}
	forgedPayload := b64(must(json.Marshal(forged)))

	for _, c := range []struct {
		name, token, want string
	}{
		{"HS256 by the secret", good, ""},
		{"HS256 by a JWKS oct key", mint(t, jwt.SigningMethodHS256, otherSecret, "h1", worker(exp)), ""},
		{"RS256 by a JWKS RSA key", mint(t, jwt.SigningMethodRS256, rk, "r1", worker(exp)), ""},
		{"nbf passed", mint(t, jwt.SigningMethodHS256, testSecret, "", jwt.MapClaims{"exp": exp, "nbf": startSec - 1}), ""},

		{"expired", mint(t, jwt.SigningMethodHS256, testSecret, "", worker(startSec-1)), "token expired (exp 2026-05-03T09:19:59Z)"},
		{"not yet valid", mint(t, jwt.SigningMethodHS256, testSecret, "", jwt.MapClaims{"exp": exp, "nbf": startSec + 60}), "token is not valid yet (nbf 2026-05-03T09:21:00Z)"},
		{"no exp", mint(t, jwt.SigningMethodHS256, testSecret, "", jwt.MapClaims{"sub": "w1"}), "token has no exp"},
		{"exp not a number", mint(t, jwt.SigningMethodHS256, testSecret, "", jwt.MapClaims{"exp": "soon"}), "token has invalid claims"},
		{"tampered payload", parts[0] + "." + forgedPayload + "." + parts[2], "token signature is invalid"},
		{"wrong secret", mint(t, jwt.SigningMethodHS256, otherSecret, "", worker(exp)), "token signature is invalid"},
		{"wrong RSA key", mint(t, jwt.SigningMethodRS256, stranger, "r1", worker(exp)), "token signature is invalid"},
		{"alg none", none, `token alg "none" is not allowed`},
		{"alg none, signature dropped", strings.TrimSuffix(none, "."), "token is malformed"},
		{"alg HS512", mint(t, jwt.SigningMethodHS512, testSecret, "", worker(exp)), `token alg "HS512" is not allowed`},
		{"HS256 keyed with the RSA public key", mint(t, jwt.SigningMethodHS256, pubPEM, "r1", worker(exp)), `token alg "HS256" is not allowed: key "r1" is RS256`},
		{"RS256 naming an oct key", mint(t, jwt.SigningMethodRS256, rk, "h1", worker(exp)), `token alg "RS256" is not allowed: key "h1" is HS256`},
		{"RS256 without a kid", mint(t, jwt.SigningMethodRS256, rk, "", worker(exp)), `token alg "RS256" is not allowed: the --jwt-secret key is HS256`},
		{"unknown kid", mint(t, jwt.SigningMethodHS256, testSecret, "k9", worker(exp)), `token kid "k9" is not a known key`},
		{"crit header", critical(t, worker(exp)), "token header crit [b64] names extensions this server does not understand"},
		{"exp 1e30", mint(t, jwt.SigningMethodHS256, testSecret, "", jwt.MapClaims{"exp": 1e30}), "token exp 1e+30 is invalid"},
		{"exp negative", mint(t, jwt.SigningMethodHS256, testSecret, "", jwt.MapClaims{"exp": -5}), "token exp -5 is invalid"},
		{"nbf past 9999", mint(t, jwt.SigningMethodHS256, testSecret, "", jwt.MapClaims{"exp": exp, "nbf": 253402300800}), "token nbf 253402300800 is invalid"},
		{"garbage", "not-a-token", "token is malformed"},
		{"bad base64", "a.b.c", "token is malformed"},
	} {
		claims, err := v.Verify(c.token)
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s: refused: %v", c.name, err)
		case c.want == "" && claims["exp"] == nil:
			t.Errorf("%s: claims %v", c.name, claims)
		case c.want != "" && (err == nil || !strings.HasPrefix(err.Error(), c.want)):
			t.Errorf("%s: %v, want %q", c.name, err, c.want)
		}
		if _, ok := err.(*TokenError); err != nil && !ok {
			t.Errorf("%s: %T is not a *TokenError", c.name, err)
		}
	}
}

// Claims arrive as encoding/json decodes them with UseNumber, so an
// integer claim stays an integer in FenecQL.
func TestVerifyClaimNumbers(t *testing.T) {
	v, _ := newTestVerifier(t)
	claims, err := v.Verify(mint(t, jwt.SigningMethodHS256, testSecret, "", jwt.MapClaims{"exp": startSec + 60, "tenant": 7}))
	if err != nil {
		t.Fatal(err)
	}
	if n, ok := claims["tenant"].(json.Number); !ok || n.String() != "7" {
		t.Errorf("tenant %#v", claims["tenant"])
	}
}

// Expiry reads the server's clock.
func TestVerifyClock(t *testing.T) {
	v, clk := newTestVerifier(t)
	tok := mint(t, jwt.SigningMethodHS256, testSecret, "", worker(startSec+30))
	if _, err := v.Verify(tok); err != nil {
		t.Fatal(err)
	}
	clk.Advance(31_000)
	if _, err := v.Verify(tok); err == nil || !strings.HasPrefix(err.Error(), "token expired") {
		t.Fatalf("after exp: %v", err)
	}
}

func TestNewVerifierErrors(t *testing.T) {
	clk := clock.NewManual()
	if _, err := NewVerifier([]byte("short"), "", clk); err == nil || !strings.Contains(err.Error(), "--jwt-secret has 5 bytes; HS256 needs at least 32") {
		t.Errorf("short secret: %v", err)
	}
	if _, err := NewVerifier(nil, "", clk); err == nil {
		t.Error("no keys at all accepted")
	}
	if _, err := NewVerifier(nil, filepath.Join(t.TempDir(), "missing.json"), clk); err == nil || !strings.Contains(err.Error(), "no such file") {
		t.Errorf("missing file: %v", err)
	}
}

func TestParseJWKSErrors(t *testing.T) {
	rk, _ := testRSA(t)
	small, err := rsa.GenerateKey(rand.Reader, 1024)
	if err != nil {
		t.Fatal(err)
	}
	good := rsaJWK("r1", &rk.PublicKey)
	with := func(m map[string]any, k string, v any) map[string]any {
		c := map[string]any{}
		for a, b := range m {
			c[a] = b
		}
		if v == nil {
			delete(c, k)
		} else {
			c[k] = v
		}
		return c
	}
	for _, c := range []struct {
		name string
		keys []map[string]any
		want string
	}{
		{"1024-bit RSA", []map[string]any{rsaJWK("r0", &small.PublicKey)}, `key 1 (kid "r0"): the RSA key has 1024 bits; at least 2048 are needed`},
		{"short oct", []map[string]any{octJWK("h0", []byte("short"))}, `key 1 (kid "h0"): the secret has 5 bytes; HS256 needs at least 32`},
		{"no kid", []map[string]any{with(good, "kid", nil)}, "key 1: no kid"},
		{"kid twice", []map[string]any{good, good}, `key 2: kid "r1" is taken by an earlier key`},
		{"EC", []map[string]any{{"kty": "EC", "kid": "e1"}}, `key 1 (kid "e1"): kty "EC" is not supported`},
		{"RSA for HS256", []map[string]any{with(good, "alg", "HS256")}, `alg "HS256": an RSA key verifies RS256`},
		{"oct for RS256", []map[string]any{with(octJWK("h1", testSecret), "alg", "RS256")}, `alg "RS256": an oct key verifies HS256`},
		{"encryption key", []map[string]any{with(good, "use", "enc")}, `use is "enc"`},
		{"bad n", []map[string]any{with(good, "n", "***")}, "n: illegal base64"},
		{"even e", []map[string]any{with(good, "e", b64([]byte{2}))}, "e is not a usable RSA exponent"},
		{"no keys", nil, "no keys"},
	} {
		data, _ := json.Marshal(map[string]any{"keys": c.keys})
		if _, err := parseJWKS(data); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", c.name, err, c.want)
		}
	}
	if _, err := parseJWKS([]byte(`[1]`)); err == nil || !strings.HasPrefix(err.Error(), "not a JWKS file") {
		t.Errorf("not JWKS: %v", err)
	}
}

// Keys rotate without a restart: add a key, sign with it, remove the old
// one. A file that fails to read keeps the keys read before.
func TestJWKSRotation(t *testing.T) {
	rk, rk2 := testRSA(t)
	path := filepath.Join(t.TempDir(), "jwks.json")
	writeJWKS(t, path, rsaJWK("old", &rk.PublicKey))
	v, err := NewVerifier(nil, path, clock.NewManual())
	if err != nil {
		t.Fatal(err)
	}
	v.SetLogger(slog.New(slog.DiscardHandler))
	wall := time.Now()
	v.keys.now = func() time.Time { return wall }
	tick := func() { wall = wall.Add(recheck) }
	oldTok := mint(t, jwt.SigningMethodRS256, rk, "old", worker(startSec+60))
	newTok := mint(t, jwt.SigningMethodRS256, rk2, "new", worker(startSec+60))
	check := func(step, tok, want string) {
		t.Helper()
		_, err := v.Verify(tok)
		if (want == "") != (err == nil) || (err != nil && !strings.HasPrefix(err.Error(), want)) {
			t.Errorf("%s: %v, want %q", step, err, want)
		}
	}
	check("old key", oldTok, "")
	check("new key before it is added", newTok, `token kid "new" is not a known key`)

	writeJWKS(t, path, rsaJWK("old", &rk.PublicKey), rsaJWK("new", &rk2.PublicKey))
	check("within a second of the last look", newTok, `token kid "new" is not a known key`)
	tick()
	check("new key added", newTok, "")
	check("old key kept", oldTok, "")

	writeJWKS(t, path, rsaJWK("new", &rk2.PublicKey))
	tick()
	check("old key removed", oldTok, `token kid "old" is not a known key`)
	check("new key", newTok, "")

	if err := os.WriteFile(path, []byte(`{"keys": [`), 0o600); err != nil {
		t.Fatal(err)
	}
	tick()
	check("half-written file", newTok, "")
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}
