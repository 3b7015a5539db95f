package httpapi

import (
	"context"
	"net/http/httptest"
	"testing"

	"github.com/fenecdb/fenec/server/clock"
	"github.com/fenecdb/fenec/server/engine"
	"github.com/fenecdb/fenec/server/httpapi/apitest"
)

// testServer is a Server over a database of its own, behind httptest.
type testServer struct {
	*Server
	db    *engine.DB
	clock *clock.Manual
	c     *apitest.Client
}

// newTestServer opens file (":memory:" for none) under a manual clock;
// edit adjusts the config before the server is built.
func newTestServer(t *testing.T, file string, edit func(*Config)) *testServer {
	t.Helper()
	return newTestServerOn(t, engine.Options{File: file}, edit)
}

// newTestServerOn is newTestServer over a database opened with opts, its
// clock (manual) and commit metrics set here.
func newTestServerOn(t *testing.T, opts engine.Options, edit func(*Config)) *testServer {
	t.Helper()
	clk := clock.NewManual()
	m := NewMetrics()
	opts.Clock, opts.OnCommit = clk, m.OnCommit
	db, err := engine.Open(opts)
	if err != nil {
		t.Fatal(err)
	}
	cfg := Config{DB: db, Clock: clk, Metrics: m}
	if edit != nil {
		edit(&cfg)
	}
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(s)
	t.Cleanup(func() {
		hs.Close()
		db.Close()
	})
	return &testServer{Server: s, db: db, clock: clk, c: &apitest.Client{T: t, Base: hs.URL, Token: cfg.Token}}
}

// contextDone answers a context already cancelled.
func contextDone() (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	return ctx, cancel
}
