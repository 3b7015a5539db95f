package httpapi

import (
	"crypto/sha256"
	"crypto/subtle"
	"net/http"
	"strings"
)

// tokenCheck holds the server's --token as a digest: comparing digests of
// equal length in constant time tells an attacker neither the token's
// bytes nor its length.
type tokenCheck struct {
	on   bool
	want [32]byte
}

func newTokenCheck(token string) tokenCheck {
	if token == "" {
		return tokenCheck{}
	}
	return tokenCheck{on: true, want: sha256.Sum256([]byte(token))}
}

// check answers nil when the request may go on: no token is configured, or
// it carries the right one as "Authorization: Bearer <token>".
func (t tokenCheck) check(r *http.Request) *apiError {
	if !t.on {
		return nil
	}
	h := r.Header.Get("Authorization")
	if h == "" {
		return &apiError{status: http.StatusUnauthorized, code: codeUnauthorized, msg: "missing bearer token: send Authorization: Bearer <token>"}
	}
	scheme, tok, ok := strings.Cut(h, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return &apiError{status: http.StatusUnauthorized, code: codeUnauthorized, msg: "the Authorization header must be Bearer <token>"}
	}
	got := sha256.Sum256([]byte(strings.TrimSpace(tok)))
	if subtle.ConstantTimeCompare(got[:], t.want[:]) != 1 {
		return &apiError{status: http.StatusUnauthorized, code: codeUnauthorized, msg: "invalid bearer token"}
	}
	return nil
}

// identity names who sent the request, for idempotency fingerprints: a key
// used by one credential is not another's to replay.
func identity(r *http.Request) [32]byte {
	return sha256.Sum256([]byte(r.Header.Get("Authorization")))
}
