package httpapi

import (
	"context"
	"sync"
	"time"

	"github.com/fenecdb/fenec/server/auth"
	"github.com/fenecdb/fenec/server/fenecql"
	"github.com/fenecdb/fenec/server/httpapi/gen"
)

// tokenQueue is how long a request beyond its token's --token-concurrency
// waits for one of the token's requests to end before it is refused: long
// enough to ride out a burst of short statements (a worker's acks), short
// enough that a client whose token is busy with slow reads hears it soon.
const tokenQueue = 250 * time.Millisecond

// tenants holds each token subject's running requests to a bound, so that
// one tenant's slow statements cannot take every core (docs/http.md,
// Limits per token). Only tokens held to a policy are counted: the
// server's --token is the operator's.
type tenants struct {
	max int // per subject; 0: no bound
	mu  sync.Mutex
	m   map[string]*tenant
}

type tenant struct {
	slots chan struct{}
	users int // requests holding or waiting for a slot: at 0 the entry goes
}

// subject names a request's tenant: its JWT's sub, else the key of its
// scope; "" for full access, which is not bounded.
func subject(a auth.Access) string {
	if a.Scope == nil {
		return ""
	}
	if sub := a.Scope.Claims["sub"]; sub.Kind() == fenecql.KindText {
		return "sub:" + sub.Text()
	}
	return a.Key
}

// enter takes one of who's slots, waiting up to tokenQueue for one, and
// returns the function that gives it back; a nil function with the
// refusal (too_busy) when none came free, or with nil when the client went
// away.
func (ts *tenants) enter(ctx context.Context, who string) (func(), *apiError) {
	if ts.max <= 0 || who == "" {
		return func() {}, nil
	}
	ts.mu.Lock()
	t := ts.m[who]
	if t == nil {
		t = &tenant{slots: make(chan struct{}, ts.max)}
		ts.m[who] = t
	}
	t.users++
	ts.mu.Unlock()
	leave := func() {
		ts.mu.Lock()
		if t.users--; t.users == 0 {
			delete(ts.m, who)
		}
		ts.mu.Unlock()
	}
	select {
	case t.slots <- struct{}{}:
		return func() { <-t.slots; leave() }, nil
	default:
	}
	timer := time.NewTimer(tokenQueue)
	defer timer.Stop()
	select {
	case t.slots <- struct{}{}:
		return func() { <-t.slots; leave() }, nil
	case <-ctx.Done():
		leave()
		return nil, nil
	case <-timer.C:
		leave()
		return nil, newError(gen.ErrorCodeTooBusy, "this token already runs %d requests at once, as many as fenec serve --token-concurrency lets one token subject run; none ended within %v: send it again shortly", ts.max, tokenQueue)
	}
}
