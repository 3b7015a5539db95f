package auth

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"net"
	"net/http"
	"strings"
	"sync"
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
	seen     seenTokens
}

// seenTokens are JWTs admitted before, by the sha256 of their text, with
// the access they were given: a client sends one token with every
// request, and checking its signature and building its scope again each
// time costs more than most statements (BenchmarkAdmit). One is used
// again only while Verifier.still holds — its kid still names the key
// that checked it, and it is within its exp and nbf — else it is checked
// whole, as the first time. Keyed by a digest, the lookup compares no
// byte of a token's text with another's.
type seenTokens struct {
	mu sync.Mutex
	m  map[[32]byte]seenToken
}

type seenToken struct {
	vd     *verified
	access Access
}

// maxSeenTokens bounds the tokens kept; past it an arbitrary one goes.
const maxSeenTokens = 1024

func (s *seenTokens) get(sum [32]byte) (seenToken, bool) {
	s.mu.Lock()
	t, ok := s.m[sum]
	s.mu.Unlock()
	return t, ok
}

func (s *seenTokens) put(sum [32]byte, t seenToken) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.m == nil {
		s.m = map[[32]byte]seenToken{}
	}
	if len(s.m) >= maxSeenTokens {
		for k := range s.m {
			delete(s.m, k)
			break
		}
	}
	s.m[sum] = t
}

// NewGate returns the gate for a server's flags. JWTs and a policy come
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

// Admit returns what r may do, or a *TokenError (401). A good token is
// admitted at once; a refused one is answered only after the address's
// penalty (see Throttle), and a context ended while that runs returns its
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
	var room [512]byte // a token of up to 512 bytes is hashed without an allocation
	sum := sha256.Sum256(append(room[:0], tok...))
	if g.token != nil && subtle.ConstantTimeCompare(sum[:], g.token[:]) == 1 {
		return Access{}, nil
	}
	// Only something shaped like a JWT is told what is wrong with it as
	// one; a wrong --token is just wrong.
	if g.verifier == nil || strings.Count(tok, ".") != 2 {
		return Access{}, refuse("invalid bearer token")
	}
	if t, ok := g.seen.get(sum); ok && g.verifier.still(t.vd) {
		return t.access, nil
	}
	claims, vd, err := g.verifier.verify(tok)
	if err != nil {
		return Access{}, err
	}
	s := g.policy.Scope(claims)
	a := Access{Scope: s, Key: g.policy.ScopeKey(s)}
	g.seen.put(sum, seenToken{vd: vd, access: a})
	return a, nil
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
