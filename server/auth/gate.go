package auth

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/fenecdb/fenec/server/engine"
)

// Access is what one request may do.
type Access struct {
	Scope *engine.Scope // nil: everything (--token, or an open server)
	// Key names the scope for held claims: claims with equal
	// keys pick among the same rows. "" for full access.
	Key string
}

// Gate admits requests: the --token has full access, a JWT the access its
// policy gives it, and with neither configured every request is let in.
type Gate struct {
	token    *[32]byte // sha256 of --token: compared in constant time, it leaks no length
	verifier *Verifier
	policy   *Policy
	throttle *Throttle
}

// NewGate answers the gate for a server's flags. JWTs and a policy come
// together: a JWT without a policy would have no rules to be held to, and
// a policy without JWTs no token to hold to it.
func NewGate(token string, v *Verifier, p *Policy) (*Gate, error) {
	if (v == nil) != (p == nil) {
		if v == nil {
			return nil, errors.New("--policy needs --jwt-secret or --jwt-keys: only JWTs are held to a policy")
		}
		return nil, errors.New("--jwt-secret and --jwt-keys need --policy: a JWT is held to its rules")
	}
	g := &Gate{verifier: v, policy: p, throttle: NewThrottle(time.Now)}
	if token != "" {
		sum := sha256.Sum256([]byte(token))
		g.token = &sum
	}
	return g, nil
}

// Open reports whether the gate lets every request in.
func (g *Gate) Open() bool { return g.token == nil && g.verifier == nil }

// Admit answers what r may do, or a *TokenError (401). A good token is
// admitted at once; a refused one is answered only after the address's
// penalty (see Throttle), and a context ended while that runs answers its
// error instead.
func (g *Gate) Admit(ctx context.Context, r *http.Request) (Access, error) {
	if g.Open() {
		return Access{}, nil
	}
	a, err := g.check(r.Header.Get("Authorization"))
	if err == nil {
		return a, nil
	}
	t := time.NewTimer(g.throttle.Fail(remoteHost(r)))
	defer t.Stop()
	select {
	case <-t.C:
		return Access{}, err
	case <-ctx.Done():
		return Access{}, ctx.Err()
	}
}

func (g *Gate) check(header string) (Access, error) {
	if header == "" {
		return Access{}, refuse("missing bearer token: send Authorization: Bearer <token>")
	}
	scheme, tok, ok := strings.Cut(header, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return Access{}, refuse("the Authorization header must be Bearer <token>")
	}
	tok = strings.TrimSpace(tok)
	if g.token != nil {
		got := sha256.Sum256([]byte(tok))
		if subtle.ConstantTimeCompare(got[:], g.token[:]) == 1 {
			return Access{}, nil
		}
	}
	// Only something shaped like a JWT is told what is wrong with it as
	// one; a wrong --token is just wrong.
	if g.verifier == nil || strings.Count(tok, ".") != 2 {
		return Access{}, refuse("invalid bearer token")
	}
	claims, err := g.verifier.Verify(tok)
	if err != nil {
		return Access{}, err
	}
	s := g.policy.Scope(claims)
	return Access{Scope: s, Key: g.policy.ScopeKey(s)}, nil
}

// remoteHost is the address a request came from, without its port: a
// client opening new connections is still one client. Forwarding headers
// are not trusted, since anyone can send them.
func remoteHost(r *http.Request) string {
	if h, _, err := net.SplitHostPort(r.RemoteAddr); err == nil {
		return h
	}
	return r.RemoteAddr
}
