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
	"strings"
	"syscall"
	"time"

	"github.com/fenecdb/fenec/server/changes"
	"github.com/fenecdb/fenec/server/clock"
	"github.com/fenecdb/fenec/server/engine"
	"github.com/fenecdb/fenec/server/httpapi"
	"github.com/fenecdb/fenec/server/store"
	"github.com/fenecdb/fenec/server/tlsfiles"
)

const usage = `fenec is the Fenec document database.

Usage:
  fenec serve [flags]   serve a database file over HTTP (fenec serve --help)
  fenec token [flags]   print a signed JWT (fenec token --help)
  fenec version         print the version, commit, Go and SQLite versions
  fenec backup --from URL --to FILE     copy a running server's database, checked
  fenec restore FILE --to PATH          put a backup in place of a stopped server's file
  fenec export --from URL [--out FILE]  write collections and documents as JSON lines
  fenec import --to URL FILE            write an export into a server, resumable

Each command's --help lists its flags; docs/operations.md says when to use them.
`

func main() {
	if len(os.Args) >= 2 {
		switch os.Args[1] {
		case "version":
			if err := printVersion(os.Stdout); err != nil {
				fmt.Fprintln(os.Stderr, "fenec version:", err)
				os.Exit(1)
			}
			return
		case "token":
			os.Exit(tokenMain(os.Args[2:]))
		case "backup":
			os.Exit(runCmd("backup", backupCmd, os.Args[2:]))
		case "restore":
			os.Exit(runCmd("restore", restoreCmd, os.Args[2:]))
		case "export":
			os.Exit(runCmd("export", exportCmd, os.Args[2:]))
		case "import":
			os.Exit(runCmd("import", importCmd, os.Args[2:]))
		}
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
	// sweepLapsedEvery is how often lapsed @ttl documents are deleted;
	// reads hide them from the moment they lapse, so it bounds only how
	// long they take room (docs/fenecql.md, Expiry).
	sweepLapsedEvery = time.Second
	// memoryEvery is how often the live heap is held to --memory; past it
	// the server logs and counts once a minute at most
	// (httpapi.MemoryReportEvery).
	memoryEvery = 10 * time.Second
	// followLiveEvery is how often the default soft limit is moved to the
	// live heap (httpapi.FollowLive): a backlog filled fast grows by some
	// tens of MB a second, far less than the limit's headroom.
	followLiveEvery = time.Second
)

type options struct {
	http, file, sync, token, clock string
	jwtSecret, jwtKeys, policy     string
	idemTTL, statementTimeout      time.Duration
	readTimeout                    time.Duration
	idemKeys, tokenConcurrency     int
	idemBytes                      int64
	maxBody                        int64
	memory                         byteSize
	slowMS                         int
	logLevel                       slog.Level
	tlsCert, tlsKey, tlsClientCA   string
	insecure, insecureOpen         bool
	noConsole                      bool
	corsOrigins                    []string
	hosts                          []string
	maxConns, maxConnsPerAddr      int
	idleTimeout                    time.Duration
	changesRetain                  int
	changesRetainAge               time.Duration
	changesRetainBytes             int64
	changesHeartbeat               time.Duration
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
	fs.Var(&o.memory, "memory", "a soft limit on the server's memory, as `size` (512MiB, 2GiB, 300MB or bytes): the collector works harder as the heap nears it, rather than letting it grow to five times what is live. Below what the file's indexes alone need, the server does not start (it says how much they need); above it, rows not written since the last fold and not at a queue's head are evicted to the file and read back when reached (a lone server with a file; docs/operations.md, Memory); past it while serving, it serves on and logs it once a minute (default: GOMEMLIMIT, else half again what is live, at least 512MiB and at most half the machine's memory, and nothing is evicted)")
	fs.Int64Var(&o.maxBody, "max-body", httpapi.DefaultMaxBody, "the largest request body, in `bytes` (larger is 413)")
	fs.DurationVar(&o.statementTimeout, "statement-timeout", httpapi.DefaultStatementTimeout, "stop a request's statements after this long (a held claim's waiting excluded): they write nothing and are answered 503 statement_timeout")
	fs.DurationVar(&o.readTimeout, "read-timeout", httpapi.DefaultReadTimeout, "stop a request that only reads after this long: it is answered 503 statement_timeout")
	fs.IntVar(&o.tokenConcurrency, "token-concurrency", httpapi.DefaultTokenConcurrency, "requests one token subject (a JWT's sub) may run at once; more wait up to 250 ms, then are answered 429 too_busy (0: no bound; the --token is never bound)")
	fs.IntVar(&o.slowMS, "slow-ms", 100, "log requests whose statements run this many `ms` or more; 0 logs none")
	fs.TextVar(&o.logLevel, "log-level", slog.LevelInfo, "the least `level` logged: debug (each refused request, with its reason), info, warn or error")
	fs.StringVar(&o.tlsCert, "tls-cert", "", "serve HTTPS with this PEM certificate `file` (its chain after it); re-read when it changes; needs --tls-key")
	fs.StringVar(&o.tlsKey, "tls-key", "", "the PEM private key `file` of --tls-cert; re-read when it changes")
	fs.StringVar(&o.tlsClientCA, "tls-client-ca", "", "require of every client a certificate signed by a CA of this PEM `file`; needs --tls-cert")
	fs.BoolVar(&o.insecure, "insecure", false, "allow listening beyond loopback without TLS: --http without --tls-cert, --raft without --node-cert (a bearer token then crosses the network in clear)")
	fs.BoolVar(&o.insecureOpen, "insecure-open", false, "allow a non-loopback --http without a token or JWT keys: anyone who reaches it may read and write everything")
	fs.Func("host", "also answer requests whose Host is this `name` (any port) when no token or JWT keys are set; repeatable; without it only localhost, 127.0.0.1 and [::1] are answered (DNS rebinding)", func(v string) error {
		if v == "" || strings.ContainsAny(v, "/ ") {
			return fmt.Errorf("%q is not a host name", v)
		}
		o.hosts = append(o.hosts, v)
		return nil
	})
	fs.IntVar(&o.maxConns, "max-conns", httpapi.DefaultMaxConns, "the most connections open at once; past it a new one is answered 503 too_many_connections and closed; 0: no cap")
	fs.IntVar(&o.maxConnsPerAddr, "max-conns-per-addr", 0, "the most connections open at once from one client IP address; 0: no cap")
	fs.DurationVar(&o.idleTimeout, "idle-timeout", httpapi.IdleTimeout, "how long a keep-alive connection may wait for its next request before it is closed")
	fs.IntVar(&o.changesRetain, "changes-retain", changes.DefaultRetain, "the most changes kept in memory for the change stream's consumers and for live queries that resume (docs/changes.md); an older position is answered 410 changes_gone")
	fs.Int64Var(&o.changesRetainBytes, "changes-retain-bytes", changes.DefaultRetainBytes, "the most bytes of rows kept for the change stream")
	fs.DurationVar(&o.changesRetainAge, "changes-retain-age", changes.DefaultRetainAge, "keep no change older than this for the change stream")
	fs.DurationVar(&o.changesHeartbeat, "changes-heartbeat", changes.DefaultHeartbeat, "how often a quiet live query is sent a heartbeat comment")
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
		fmt.Fprint(fs.Output(), "\nEnvironment:\n  FENEC_TOKEN  the --token, when the flag is not given\n  GOGC         the Go collector's target (default here 400: documents live long)\n  GOMEMLIMIT   a soft memory limit (default here half again what is live, 512MiB to half the machine's memory)\n  GODEBUG      schedtrace=2147483647 is added unless it names schedtrace (docs/architecture.md)\n")
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
	case o.readTimeout <= 0:
		return o, fmt.Errorf("--read-timeout %v: want a positive duration", o.readTimeout)
	case o.tokenConcurrency < 0:
		return o, fmt.Errorf("--token-concurrency %d: want 0 (no bound) or more", o.tokenConcurrency)
	case o.slowMS < 0:
		return o, fmt.Errorf("--slow-ms %d: want 0 or more", o.slowMS)
	case o.maxConns < 0:
		return o, fmt.Errorf("--max-conns %d: want 0 (no cap) or more", o.maxConns)
	case o.maxConnsPerAddr < 0:
		return o, fmt.Errorf("--max-conns-per-addr %d: want 0 (no cap) or more", o.maxConnsPerAddr)
	case o.changesRetain <= 0:
		return o, fmt.Errorf("--changes-retain %d: want a positive number of changes", o.changesRetain)
	case o.changesRetainBytes <= 0:
		return o, fmt.Errorf("--changes-retain-bytes %d: want a positive number of bytes", o.changesRetainBytes)
	case o.changesRetainAge <= 0:
		return o, fmt.Errorf("--changes-retain-age %v: want a positive duration", o.changesRetainAge)
	case o.changesHeartbeat <= 0:
		return o, fmt.Errorf("--changes-heartbeat %v: want a positive duration", o.changesHeartbeat)
	case o.idleTimeout <= 0:
		return o, fmt.Errorf("--idle-timeout %v: want a positive duration", o.idleTimeout)
	}
	if (o.tlsCert == "") != (o.tlsKey == "") {
		return o, errors.New("--tls-cert and --tls-key go together")
	}
	if o.tlsClientCA != "" && o.tlsCert == "" {
		return o, errors.New("--tls-client-ca needs --tls-cert and --tls-key")
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
	if o.token == "" && o.jwtSecret == "" && o.jwtKeys == "" && !o.insecureOpen && !loopback(o.http) {
		return fmt.Errorf("--http %s is reachable from other machines and no --token or JWT key is set: set one, or pass --insecure-open", o.http)
	}
	// A bearer token sent in clear is a password on the wire: beyond
	// loopback, TLS or a flag that says so (docs/http.md, "TLS").
	if o.tlsCert == "" && !o.insecure && !loopback(o.http) {
		return fmt.Errorf("--http %s is reachable from other machines over plain HTTP, where tokens cross the network in clear: give --tls-cert and --tls-key, or pass --insecure", o.http)
	}
	if o.cluster.id != "" && o.cluster.cert == "" && !o.insecure && !loopback(o.cluster.raft) {
		return fmt.Errorf("--raft %s is reachable from other machines without TLS, where any process could join the cluster: give --node-cert, --node-key and --node-ca, or pass --insecure", o.cluster.raft)
	}
	var serverTLS *tlsfiles.Files
	if o.tlsCert != "" {
		if serverTLS, err = tlsfiles.Load(o.tlsCert, o.tlsKey, o.tlsClientCA, tlsfiles.Options{NextProtos: []string{"http/1.1"}}); err != nil {
			return fmt.Errorf("--tls-cert: %w", err)
		}
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: o.logLevel}))
	limitByDefault := httpapi.TuneGC(int64(o.memory))

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
	loaded := httpapi.Loading()
	// Under --memory a lone server evicts cold rows to the file
	// (docs/operations.md, "Memory"); a cluster node does not: its
	// file is written from the replicated log, behind memory.
	var limit int64
	if o.cluster.id == "" {
		limit = int64(o.memory)
	}
	db, err := engine.Open(engine.Options{File: o.file, Sync: syncMode, Clock: clk, Log: log, Inbound: inbound, MemoryLimit: limit})
	loaded()
	if err != nil {
		return err
	}
	db.Subscribe(metrics.Stored, engine.Stored)
	if o.memory > 0 {
		if err := checkMemory(int64(o.memory), db.Footprints()); err != nil {
			db.Close()
			return err
		}
	}
	ln, err := net.Listen("tcp", o.http)
	if err != nil {
		db.Close()
		return err
	}
	scheme := "http"
	if serverTLS != nil {
		scheme = "https"
	}
	node, err := startNode(o, db, scheme+"://"+ln.Addr().String(), metrics, log)
	if err != nil {
		ln.Close()
		db.Close()
		return err
	}
	api, err := httpapi.New(httpapi.Config{
		DB: db, Clock: manual, Gate: gate, IdempotencyTTL: o.idemTTL, IdempotencyMaxKeys: o.idemKeys, IdempotencyMaxBytes: o.idemBytes, MaxBody: o.maxBody,
		StatementTimeout: o.statementTimeout, ReadTimeout: o.readTimeout, TokenConcurrency: o.tokenConcurrency, Slow: time.Duration(o.slowMS) * time.Millisecond, Metrics: metrics, Log: log,
		CORSOrigins: o.corsOrigins, Hosts: o.hosts, NoConsole: o.noConsole, Cluster: node.api(),
		Changes: changes.Options{Retain: o.changesRetain, RetainAge: o.changesRetainAge, RetainBytes: o.changesRetainBytes, Heartbeat: o.changesHeartbeat},
	})
	if err != nil {
		node.shutdown()
		ln.Close()
		db.Close()
		return err
	}
	srv := httpapi.NewHTTPServer(api, log)
	srv.Limit(httpapi.Limits{MaxConns: o.maxConns, MaxConnsPerAddr: o.maxConnsPerAddr, IdleTimeout: o.idleTimeout, Refused: metrics.ConnRefused})
	if inbound != nil {
		srv.CountInbound(inbound)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	sweepCtx, stopSweep := context.WithCancel(context.Background())
	swept := make(chan struct{})
	lapsedSwept := make(chan struct{})
	go func() { api.SweepKeys(sweepCtx, sweepEvery); close(swept) }()
	go func() { api.SweepLapsed(sweepCtx, sweepLapsedEvery); close(lapsedSwept) }()
	memoryWatched := make(chan struct{})
	go func() {
		switch {
		case o.memory > 0:
			api.WatchMemory(sweepCtx, int64(o.memory), memoryEvery)
		case limitByDefault:
			httpapi.FollowLive(sweepCtx, followLiveEvery)
		}
		close(memoryWatched)
	}()

	served := make(chan error, 1)
	go func() {
		if serverTLS != nil {
			served <- srv.ServeTLS(ln, serverTLS.ServerConfig())
		} else {
			served <- srv.Serve(ln)
		}
	}()
	fmt.Fprintf(stdout, "listening on %s\n", ln.Addr())
	log.Info("serving", "addr", ln.Addr().String(), "scheme", scheme, "file", o.file, "sync", syncMode.String(), "clock", o.clock)

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
	<-lapsedSwept
	<-memoryWatched
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
