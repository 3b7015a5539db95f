package main

import (
	"log/slog"
	"os"

	"github.com/fenecdb/fenec/server/auth"
	"github.com/fenecdb/fenec/server/clock"
)

// newGate builds the server's gate from --token, --jwt-secret, --jwt-keys
// and --policy. Every mistake in them — a bad policy line, a short
// secret, a weak key, JWTs without a policy — stops the server before it
// starts. Token times are read from clk, the engine's clock.
func newGate(o options, clk clock.Clock, log *slog.Logger) (*auth.Gate, error) {
	var v *auth.Verifier
	if o.jwtSecret != "" || o.jwtKeys != "" {
		var secret []byte
		if o.jwtSecret != "" {
			secret = []byte(o.jwtSecret)
		}
		var err error
		if v, err = auth.NewVerifier(secret, o.jwtKeys, clk); err != nil {
			return nil, err
		}
		v.SetLogger(log)
	}
	var p *auth.Policy
	if o.policy != "" {
		src, err := os.ReadFile(o.policy)
		if err != nil {
			return nil, err
		}
		if p, err = auth.ParsePolicy(o.policy, src); err != nil {
			return nil, err
		}
	}
	return auth.NewGate(o.token, v, p)
}
