package httpapi

import (
	"context"
	"log/slog"
	"net"
	"net/http"
	"testing"

	"github.com/fenecdb/fenec/server/clock"
	"github.com/fenecdb/fenec/server/engine"
	"github.com/fenecdb/fenec/server/httpapi/apitest"
)

// testServer is a Server over a database of its own, served as fenec
// serve serves it (NewHTTPServer) on a loopback port.
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
	opts.Clock = clk
	db, err := engine.Open(opts)
	if err != nil {
		t.Fatal(err)
	}
	db.Subscribe(m.Stored, engine.Stored)
	cfg := Config{DB: db, Clock: clk, Metrics: m}
	if edit != nil {
		edit(&cfg)
	}
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	base := serveLean(t, s)
	t.Cleanup(func() { db.Close() })
	return &testServer{Server: s, db: db, clock: clk, c: &apitest.Client{T: t, Base: base, Token: cfg.Token}}
}

// contextDone returns a context already cancelled.
func contextDone() (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	return ctx, cancel
}

// serveLean serves h as fenec serve does (NewHTTPServer) on
// a loopback port until the test ends, and returns its base URL.
func serveLean(t testing.TB, h http.Handler) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := NewHTTPServer(h, slog.New(slog.DiscardHandler))
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	t.Cleanup(func() {
		srv.Close()
		if err := <-served; err != http.ErrServerClosed {
			t.Errorf("serve: %v", err)
		}
	})
	return "http://" + ln.Addr().String()
}
