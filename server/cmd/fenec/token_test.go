package main

import (
	"bytes"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fenecdb/fenec/server/auth"
	"github.com/fenecdb/fenec/server/clock"
)

const tokenSecret = "0123456789abcdef0123456789abcdef"

func mintIn(t *testing.T, args ...string) (string, error) {
	t.Helper()
	var out, errOut bytes.Buffer
	err := tokenCmd(args, &out, &errOut)
	return strings.TrimSpace(out.String()), err
}

// What `fenec token` prints, the server's verifier accepts, with the
// claims asked for and an exp.
func TestTokenCommand(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	rk, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	keyPEM := filepath.Join(dir, "key.pem")
	os.WriteFile(keyPEM, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: mustValue(x509.MarshalPKCS8PrivateKey(rk))}), 0o600)
	b64 := base64.RawURLEncoding.EncodeToString
	jwks := filepath.Join(dir, "jwks.json")
	os.WriteFile(jwks, mustValue(json.Marshal(map[string]any{"keys": []any{
		map[string]any{"kty": "RSA", "kid": "r1", "n": b64(rk.N.Bytes()), "e": b64(big.NewInt(int64(rk.E)).Bytes())},
	}})), 0o600)
	v, err := auth.NewVerifier([]byte(tokenSecret), jwks, clock.System{})
	if err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"--secret", tokenSecret, "--claims", `{"sub":"w1","role":"worker","queue":"mail","n":12345678901234}`, "--ttl", "1h"},
		{"--key", keyPEM, "--kid", "r1", "--claims", `{"sub":"w1","role":"worker","queue":"mail","n":12345678901234}`},
	} {
		tok, err := mintIn(t, args...)
		if err != nil {
			t.Fatalf("%v: %v", args, err)
		}
		claims, err := v.Verify(tok)
		if err != nil {
			t.Fatalf("%v: %v", args, err)
		}
		if claims["sub"] != "w1" || claims["queue"] != "mail" || claims["exp"] == nil || claims["n"].(json.Number) != "12345678901234" {
			t.Errorf("%v: claims %v", args, claims)
		}
	}
	// An exp in --claims wins over --ttl: here one long past.
	tok, _ := mintIn(t, "--secret", tokenSecret, "--claims", `{"exp": 1000}`)
	if _, err := v.Verify(tok); err == nil || !strings.HasPrefix(err.Error(), "token expired") {
		t.Errorf("exp from --claims: %v", err)
	}
}

func TestTokenCommandErrors(t *testing.T) {
	t.Setenv("FENEC_JWT_SECRET", "")
	for _, c := range []struct {
		args []string
		want string
	}{
		{nil, "--secret (HS256) or --key (RS256) is needed"},
		{[]string{"--secret", "short"}, "--secret has 5 bytes; HS256 needs at least 32"},
		{[]string{"--secret", tokenSecret, "--claims", "[1]"}, "--claims must be a JSON object"},
		{[]string{"--secret", tokenSecret, "--claims", "null"}, "--claims must be a JSON object, not null"},
		{[]string{"--secret", tokenSecret, "--ttl", "0s"}, "--ttl 0s: want a positive duration"},
		{[]string{"--secret", tokenSecret, "--key", "k.pem"}, "--secret and --key: give one"},
		{[]string{"--key", "/nonexistent.pem"}, "no such file"},
	} {
		if _, err := mintIn(t, c.args...); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: %v, want %q", c.args, err, c.want)
		}
	}
}

func mustValue[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}
