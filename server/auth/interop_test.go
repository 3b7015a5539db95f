package auth

import (
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// venvPython is the interpreter of the venv `make test-venv` makes at the
// repository's root, with PyJWT in it (testdata/requirements.txt).
const venvPython = "../../.venv-test/bin/python"

// TestPyJWTInterop checks the verifier against tokens minted by PyJWT, a
// library that shares nothing with golang-jwt: HS256 and RS256 tokens
// are accepted, and tampered, expired, wrong-key, alg none and HS/RS
// confusion tokens refused.
func TestPyJWTInterop(t *testing.T) {
	if _, err := os.Stat(venvPython); err != nil {
		t.Skip("PyJWT interop: .venv-test is missing at the repository's root; `make test-venv` makes it (`make test` does too)")
	}
	v, _ := newTestVerifier(t)
	rk, _ := testRSA(t)
	dir := t.TempDir()
	pemPath := filepath.Join(dir, "key.pem")
	der, err := x509.MarshalPKCS8PrivateKey(rk)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(pemPath, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	params, _ := json.Marshal(map[string]any{"now": startSec, "secret": string(testSecret), "jwks_secret": string(otherSecret), "rsa_pem": pemPath})
	paramsPath := filepath.Join(dir, "params.json")
	if err := os.WriteFile(paramsPath, params, 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(venvPython, "testdata/mint_pyjwt.py", paramsPath).Output()
	if err != nil {
		if ee, ok := err.(*exec.ExitError); ok {
			t.Fatalf("mint_pyjwt.py: %v\n%s", err, ee.Stderr)
		}
		t.Fatal(err)
	}
	var tokens map[string]string
	if err := json.Unmarshal(out, &tokens); err != nil {
		t.Fatalf("mint_pyjwt.py printed %q: %v", out, err)
	}
	for name, want := range map[string]string{
		"hs256":           "",
		"hs256 jwks":      "",
		"rs256":           "",
		"hs256 nbf":       "",
		"tampered":        "token signature is invalid",
		"expired":         "token expired",
		"not yet valid":   "token is not valid yet",
		"no exp":          "token has no exp",
		"wrong secret":    "token signature is invalid",
		"wrong rsa key":   "token signature is invalid",
		"alg none":        `token alg "none" is not allowed`,
		"hs512":           `token alg "HS512" is not allowed`,
		"hs/rs confusion": `token alg "HS256" is not allowed: key "r1" is RS256`,
		"unknown kid":     `token kid "k9" is not a known key`,
	} {
		tok, ok := tokens[name]
		if !ok {
			t.Errorf("%s: not minted", name)
			continue
		}
		claims, err := v.Verify(tok)
		t.Logf("%s: %v", name, err)
		switch {
		case want == "" && err != nil:
			t.Errorf("%s: refused: %v", name, err)
		case want == "" && (claims["sub"] != "w1" || claims["queue"] != "mail"):
			t.Errorf("%s: claims %v", name, claims)
		case want != "" && (err == nil || !strings.HasPrefix(err.Error(), want)):
			t.Errorf("%s: %v, want %q", name, err, want)
		}
	}
}
