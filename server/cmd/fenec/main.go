// Command fenec is Fenec's one binary. `fenec serve` opens a database file
// and serves it over HTTP (docs/http.md):
//
//	fenec serve --http 127.0.0.1:8080 --file fenec.db
//
// It prints "listening on <addr>" on stdout once it accepts connections
// (with --http 127.0.0.1:0, the port it picked), logs to stderr, and on
// SIGTERM or SIGINT finishes the requests in flight and closes the file
// cleanly.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/fenecdb/fenec/server/clock"
	"github.com/fenecdb/fenec/server/engine"
	"github.com/fenecdb/fenec/server/httpapi"
	"github.com/fenecdb/fenec/server/store"
)

const usage = `fenec is the Fenec document database.

Usage:
  fenec serve [flags]   serve a database file over HTTP (fenec serve --help)
  fenec token [flags]   print a signed JWT (fenec token --help)
  fenec version         print the version, commit, Go and SQLite versions
`

func main() {
	if len(os.Args) >= 2 && os.Args[1] == "version" {
		if err := printVersion(os.Stdout); err != nil {
			fmt.Fprintln(os.Stderr, "fenec version:", err)
			os.Exit(1)
		}
		return
	}
	if len(os.Args) >= 2 && os.Args[1] == "token" {
		os.Exit(tokenMain(os.Args[2:]))
	}
	if len(os.Args) < 2 || os.Args[1] != "serve" {
		fmt.Fprint(os.Stderr, usage)
		os.Exit(2)
	}
	// GODEBUG is read only as the process starts: the server runs itself
	// again with the setting that keeps the runtime's monitor from its
	// deep sleep (httpapi.SchedEnv says why). Exec returns only if it
	// fails, and the server then serves without it.
	if env, changed := httpapi.SchedEnv(os.Environ()); changed {
		if exe, err := os.Executable(); err == nil {
			_ = syscall.Exec(exe, os.Args, env)
		}
	}
	if err := serve(os.Args[2:], os.Stdout, os.Stderr); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return
		}
		fmt.Fprintln(os.Stderr, "fenec serve:", err)
		os.Exit(1)
	}
}

// The connection timeouts are httpapi.NewHTTPServer's.
const (
	// shutdownGrace bounds how long SIGTERM waits for requests in flight.
	shutdownGrace = 60 * time.Second
	sweepEvery    = time.Minute
)

type options struct {
	http, file, sync, token, clock string
	jwtSecret, jwtKeys, policy     string
	idemTTL, statementTimeout      time.Duration
	idemKeys                       int
	idemBytes                      int64
	maxBody                        int64
	slowMS                         int
	insecure                       bool
	noConsole                      bool
	corsOrigins                    []string
	cluster                        clusterFlags
}

func parseFlags(args []string, stderr io.Writer) (options, error) {
	var o options
	fs := flag.NewFlagSet("fenec serve", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&o.http, "http", "127.0.0.1:8080", "`address` to listen on; port 0 picks a free port (the address is printed as \"listening on <addr>\")")
	fs.StringVar(&o.file, "file", "fenec.db", "the SQLite database `file`; :memory: keeps nothing")
	fs.StringVar(&o.sync, "sync", "always", "when a write reaches the disk (`always|<ms>|off`): always answers it once on disk, <ms> flushes at that interval, off at shutdown")
	fs.StringVar(&o.token, "token", "", "bearer `token` every route but /_health needs (default $FENEC_TOKEN)")
	fs.StringVar(&o.jwtSecret, "jwt-secret", "", "verify HS256 JWTs with this `secret` of 32 bytes or more; needs --policy (default $FENEC_JWT_SECRET)")
	fs.StringVar(&o.jwtKeys, "jwt-keys", "", "verify JWTs with the keys of this JWKS `file` (oct: HS256, RSA: RS256), picked by kid; re-read when it changes; needs --policy")
	fs.StringVar(&o.policy, "policy", "", "the policy `file` JWTs are held to (docs/access.md)")
	fs.StringVar(&o.clock, "clock", "system", "the engine's clock: system, or manual (starts at 2026-05-03T09:20:00Z, moved by POST /_clock)")
	fs.DurationVar(&o.idemTTL, "idempotency-ttl", httpapi.DefaultIdempotencyTTL, "how long an Idempotency-Key and its answer are kept")
	fs.IntVar(&o.idemKeys, "idempotency-max-keys", httpapi.DefaultIdempotencyMaxKeys, "the most Idempotency-Keys held; past it a write under a new key is refused (503 key_limit), unrun")
	fs.Int64Var(&o.idemBytes, "idempotency-max-bytes", httpapi.DefaultIdempotencyMaxBytes, "the most `bytes` of Idempotency-Key answers held; past it a write under a new key is refused (503 key_limit), unrun")
	fs.Int64Var(&o.maxBody, "max-body", httpapi.DefaultMaxBody, "the largest request body, in `bytes` (larger is 413)")
	fs.DurationVar(&o.statementTimeout, "statement-timeout", httpapi.DefaultStatementTimeout, "stop a request's statements after this long (a held claim's waiting excluded): they write nothing and are answered 503 statement_timeout")
	fs.IntVar(&o.slowMS, "slow-ms", 100, "log requests whose statements run this many `ms` or more; 0 logs none")
	fs.BoolVar(&o.insecure, "insecure", false, "allow a non-loopback --http without a token")
	fs.BoolVar(&o.noConsole, "no-console", false, "do not serve the queue console at /console")
	fs.Func("cors-origin", "let pages of this exact `origin` (https://app.example.com) call /query and /batch from a browser; repeatable; none by default", func(v string) error {
		if err := httpapi.CheckOrigin(v); err != nil {
			return err
		}
		o.corsOrigins = append(o.corsOrigins, v)
		return nil
	})
	o.cluster.define(fs)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), "Usage: fenec serve [flags]\n\nServes a Fenec database over HTTP (see openapi.yaml).\n\nFlags:\n")
		fs.PrintDefaults()
		fmt.Fprint(fs.Output(), "\nEnvironment:\n  FENEC_TOKEN  the --token, when the flag is not given\n  GOGC         the Go collector's target (default here 400: documents live long)\n  GOMEMLIMIT   a soft memory limit (default here half the machine's memory)\n  GODEBUG      schedtrace=2147483647 is added unless it names schedtrace (docs/architecture.md)\n")
	}
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	if o.token == "" {
		o.token = os.Getenv("FENEC_TOKEN")
	}
	if o.jwtSecret == "" {
		o.jwtSecret = os.Getenv("FENEC_JWT_SECRET")
	}
	switch {
	case o.clock != "system" && o.clock != "manual":
		return o, fmt.Errorf("--clock %q: want system or manual", o.clock)
	case o.idemTTL <= 0:
		return o, fmt.Errorf("--idempotency-ttl %v: want a positive duration", o.idemTTL)
	case o.idemKeys <= 0:
		return o, fmt.Errorf("--idempotency-max-keys %d: want a positive number", o.idemKeys)
	case o.idemBytes <= 0:
		return o, fmt.Errorf("--idempotency-max-bytes %d: want a positive number of bytes", o.idemBytes)
	case o.maxBody <= 0:
		return o, fmt.Errorf("--max-body %d: want a positive number of bytes", o.maxBody)
	case o.statementTimeout <= 0:
		return o, fmt.Errorf("--statement-timeout %v: want a positive duration", o.statementTimeout)
	case o.slowMS < 0:
		return o, fmt.Errorf("--slow-ms %d: want 0 or more", o.slowMS)
	}
	if err := o.cluster.check(o.file, o.sync); err != nil {
		return o, err
	}
	return o, nil
}

func serve(args []string, stdout, stderr io.Writer) error {
	o, err := parseFlags(args, stderr)
	if err != nil {
		return err
	}
	syncMode, err := store.ParseSync(o.sync)
	if err != nil {
		return fmt.Errorf("--sync: %w", err)
	}
	if o.token == "" && o.jwtSecret == "" && o.jwtKeys == "" && !o.insecure && !loopback(o.http) {
		return fmt.Errorf("--http %s is reachable from other machines and no --token or JWT key is set: set one, or pass --insecure", o.http)
	}
	log := slog.New(slog.NewTextHandler(stderr, nil))
	httpapi.TuneGC()

	var manual *clock.Manual
	var clk clock.Clock = clock.System{}
	if o.clock == "manual" {
		manual = clock.NewManual()
		clk = manual
	}
	gate, err := newGate(o, clk, log)
	if err != nil {
		return err
	}
	metrics := httpapi.NewMetrics()
	// The requests on their way to a commit: the HTTP server counts them,
	// the store's syncs (under --sync always) wait a little for them. Made
	// here, where both are put together, since the store is below the
	// server and must not ask it (store.Inbound). Not on a cluster node:
	// its writes reach the store by the replicated log, not from the
	// request's own goroutine.
	var inbound *store.Inbound
	if o.cluster.id == "" {
		inbound = store.NewInbound(0)
	}
	db, err := engine.Open(engine.Options{File: o.file, Sync: syncMode, Clock: clk, OnCommit: metrics.OnCommit, Log: log, Inbound: inbound})
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", o.http)
	if err != nil {
		db.Close()
		return err
	}
	node, err := startNode(o, db, ln.Addr().String(), metrics, log)
	if err != nil {
		ln.Close()
		db.Close()
		return err
	}
	api, err := httpapi.New(httpapi.Config{
		DB: db, Clock: manual, Gate: gate, IdempotencyTTL: o.idemTTL, IdempotencyMaxKeys: o.idemKeys, IdempotencyMaxBytes: o.idemBytes, MaxBody: o.maxBody,
		StatementTimeout: o.statementTimeout, Slow: time.Duration(o.slowMS) * time.Millisecond, Metrics: metrics, Log: log,
		CORSOrigins: o.corsOrigins, NoConsole: o.noConsole, Cluster: node.api(),
	})
	if err != nil {
		node.shutdown()
		ln.Close()
		db.Close()
		return err
	}
	srv := httpapi.NewHTTPServer(api, log)
	if inbound != nil {
		srv.CountInbound(inbound)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	sweepCtx, stopSweep := context.WithCancel(context.Background())
	swept := make(chan struct{})
	go func() { api.SweepKeys(sweepCtx, sweepEvery); close(swept) }()

	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	fmt.Fprintf(stdout, "listening on %s\n", ln.Addr())
	log.Info("serving", "addr", ln.Addr().String(), "file", o.file, "sync", syncMode.String(), "clock", o.clock)

	var serveErr error
	select {
	case <-ctx.Done():
		log.Info("shutting down: answering held claims, finishing the requests in flight")
		api.Close()
		sctx, cancel := context.WithTimeout(context.Background(), shutdownGrace)
		serveErr = srv.Shutdown(sctx)
		cancel()
	case serveErr = <-served:
	}
	api.Close()
	stopSweep()
	<-swept
	node.shutdown()
	if err := db.Close(); err != nil {
		return fmt.Errorf("closing %s: %w", o.file, err)
	}
	log.Info("closed", "file", o.file)
	if serveErr != nil && !errors.Is(serveErr, http.ErrServerClosed) {
		return serveErr
	}
	return nil
}

// loopback reports whether addr listens only on this machine: "localhost"
// or a loopback IP. An empty host listens everywhere.
func loopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
