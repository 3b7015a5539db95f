package httpapi

import (
	"context"
	"crypto/sha256"
	"net/http"

	"github.com/fenecdb/fenec/server/auth"
	"github.com/fenecdb/fenec/server/httpapi/gen"
)

// accessKey keys the request's auth.Access in its context.
type accessKey struct{}

// admit lets a request in through the gate (401 when it may not come in)
// and returns it carrying what it may do. A client that went away while
// its address was being slowed down is answered nothing.
func (s *Server) admit(r *http.Request) (*http.Request, *apiError) {
	a, err := s.gate.Admit(r.Context(), r)
	if err != nil {
		if r.Context().Err() != nil {
			return nil, nil
		}
		return nil, &apiError{code: gen.ErrorCodeUnauthorized, msg: err.Error()}
	}
	if a == (auth.Access{}) {
		// Full access is what a request carrying none has (access): the
		// request need not be copied to carry it.
		return r, nil
	}
	return r.WithContext(context.WithValue(r.Context(), accessKey{}, a)), nil
}

// access returns what the request may do: a nil Scope is full access.
func access(r *http.Request) auth.Access {
	a, _ := r.Context().Value(accessKey{}).(auth.Access)
	return a
}

// identity names who sent the request, for idempotency fingerprints: a key
// used by one credential is not another's to replay.
func identity(r *http.Request) [32]byte {
	return sha256.Sum256([]byte(r.Header.Get("Authorization")))
}
