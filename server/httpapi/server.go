// Package httpapi is Fenec's HTTP API (docs/http.md): the handlers behind the
// routes of openapi.yaml. The routing skeleton is generated from the spec
// (package gen); every request is checked against the same spec before a
// handler sees it, so a malformed request is a clear 4xx that writes
// nothing.
//
// A request goes through, in order: the edge's checks (edge.go: Host 421,
// Origin 403, two Authorization headers 400), the route (404, 405), the
// token (401), the body limit (413; a body that stops arriving 408), the
// spec's validation (400), then its handler;
// for /query and /batch the validation and the decoding are one pass
// where the body allows (body.go). A JWT's access (package auth) goes with
// the request to the engine, which holds its statements to it.
package httpapi

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/legacy"

	"github.com/fenecdb/fenec/server/auth"
	"github.com/fenecdb/fenec/server/changes"
	"github.com/fenecdb/fenec/server/clock"
	"github.com/fenecdb/fenec/server/console"
	"github.com/fenecdb/fenec/server/engine"
	"github.com/fenecdb/fenec/server/fenecql"
	"github.com/fenecdb/fenec/server/httpapi/gen"
	"github.com/fenecdb/fenec/server/wait"
)

// Config configures a Server.
type Config struct {
	DB *engine.DB
	// Clock is the manual clock POST /_clock moves; nil under the system
	// clock, and the route is then 404.
	Clock *clock.Manual
	// Token, when set, is the bearer token every route but /_health needs.
	// It is ignored when Gate is set.
	Token string
	// Gate admits requests: the token, and JWTs held to a policy. Nil: a
	// gate for Token alone.
	Gate *auth.Gate
	// IdempotencyTTL is how long an Idempotency-Key and its answer are kept.
	IdempotencyTTL time.Duration
	// IdempotencyMaxKeys and IdempotencyMaxBytes cap the keys held (all in
	// memory, as well as in the file) and the bytes of their records: at
	// either, a write under a new key is refused, unrun, with key_limit
	// (docs/reliability.md).
	IdempotencyMaxKeys  int
	IdempotencyMaxBytes int64
	// MaxBody is the largest request body accepted, in bytes.
	MaxBody int64
	// StatementTimeout bounds each run of a request's statements (a held
	// claim's waiting excluded); past it they stop, write nothing and are
	// answered 503 statement_timeout. 0: DefaultStatementTimeout.
	StatementTimeout time.Duration
	// ReadTimeout is StatementTimeout for a request that only reads. 0:
	// DefaultReadTimeout.
	ReadTimeout time.Duration
	// TokenConcurrency bounds the requests one token subject (a JWT's
	// sub) runs at once; held claims waiting are not counted. 0: no bound
	// (limit.go).
	TokenConcurrency int
	// Slow is the run time from which a request is logged; 0 logs none.
	Slow    time.Duration
	Metrics *Metrics
	Log     *slog.Logger

	// CORSOrigins are the exact origins whose pages may call /query and
	// /batch (edge.go); none by default.
	CORSOrigins []string
	// Hosts are the Host names, beyond the loopback ones, that a server
	// without a token or JWT keys answers (fenec serve --host); with
	// either, every Host is answered (edge.go).
	Hosts []string
	// NoConsole leaves /console unserved.
	NoConsole bool
	// Cluster is the node's cluster (cluster.go); nil on a lone server.
	Cluster Cluster
	// Changes configure the live queries and the change stream
	// (docs/changes.md); its Metrics are set here.
	Changes changes.Options
}

// Server is the HTTP API over one database. It is an http.Handler.
type Server struct {
	cfg     Config
	db      *engine.DB
	log     *slog.Logger
	metrics *Metrics
	spec    *openapi3.T
	router  routers.Router
	mux     http.Handler
	keys    keyLocks
	gate    *auth.Gate
	hub     *wait.Hub
	changes *changes.Hub
	tenants tenants
	console http.Handler
	hosts   []string // Config.Hosts, as hostName gives them

	// queryRoute and batchRoute are the spec's POST /query and POST /batch.
	queryRoute, batchRoute *routers.Route
}

// DefaultMaxBody and DefaultIdempotencyTTL are the defaults docs/http.md
// gives.
const (
	DefaultMaxBody        = 16 << 20
	DefaultIdempotencyTTL = 24 * time.Hour
	// DefaultStatementTimeout is fenec serve's --statement-timeout: a
	// write's run, which a long batch or a claim over a large queue may
	// need, and which holds the write lock only while it runs.
	DefaultStatementTimeout = 30 * time.Second
	// DefaultReadTimeout is fenec serve's --read-timeout: a read answers
	// a client waiting on it, and one running for long costs a core and
	// makes writers wait at its yields (docs/http.md, Limits).
	DefaultReadTimeout = 5 * time.Second
	// DefaultTokenConcurrency is fenec serve's --token-concurrency.
	DefaultTokenConcurrency = 16
	// A key's record is its answer and ~100 bytes: 100 000 small answers
	// take ~30 MB; the byte cap holds a few large ones.
	DefaultIdempotencyMaxKeys  = 100_000
	DefaultIdempotencyMaxBytes = 128 << 20
)

// New builds the server. It registers the database's gauges on
// cfg.Metrics (made with NewMetrics when nil).
func New(cfg Config) (*Server, error) {
	if cfg.DB == nil {
		return nil, errors.New("httpapi: no database")
	}
	if cfg.MaxBody <= 0 {
		cfg.MaxBody = DefaultMaxBody
	}
	if cfg.IdempotencyTTL <= 0 {
		cfg.IdempotencyTTL = DefaultIdempotencyTTL
	}
	if cfg.StatementTimeout <= 0 {
		cfg.StatementTimeout = DefaultStatementTimeout
	}
	if cfg.ReadTimeout <= 0 {
		cfg.ReadTimeout = DefaultReadTimeout
	}
	if cfg.IdempotencyMaxKeys <= 0 {
		cfg.IdempotencyMaxKeys = DefaultIdempotencyMaxKeys
	}
	if cfg.IdempotencyMaxBytes <= 0 {
		cfg.IdempotencyMaxBytes = DefaultIdempotencyMaxBytes
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	if cfg.Metrics == nil {
		cfg.Metrics = NewMetrics()
	}
	if cfg.Gate == nil {
		g, err := auth.NewGate(cfg.Token, nil, nil)
		if err != nil {
			return nil, err
		}
		cfg.Gate = g
	}
	for _, o := range cfg.CORSOrigins {
		if err := CheckOrigin(o); err != nil {
			return nil, fmt.Errorf("httpapi: CORS origin %w", err)
		}
	}
	spec, err := LoadSpec()
	if err != nil {
		return nil, err
	}
	router, err := legacy.NewRouter(spec)
	if err != nil {
		return nil, fmt.Errorf("httpapi: the embedded spec: %w", err)
	}
	s := &Server{
		cfg:     cfg,
		db:      cfg.DB,
		log:     cfg.Log,
		metrics: cfg.Metrics,
		spec:    spec,
		router:  router,
		keys:    keyLocks{held: map[string]*keyLock{}},
		gate:    cfg.Gate,
		console: console.Handler(),
		tenants: tenants{max: cfg.TokenConcurrency, m: map[string]*tenant{}},
	}
	for _, h := range cfg.Hosts {
		s.hosts = append(s.hosts, hostName(h))
	}
	for path, to := range map[string]**routers.Route{"/query": &s.queryRoute, "/batch": &s.batchRoute} {
		req, _ := http.NewRequest(http.MethodPost, path, nil)
		if *to, _, err = router.FindRoute(req); err != nil {
			return nil, fmt.Errorf("httpapi: the embedded spec: POST %s: %w", path, err)
		}
	}
	s.metrics.watch(cfg.DB)
	s.hub = wait.New(cfg.DB, wait.NewMetrics(s.metrics.reg))
	co := cfg.Changes
	co.Metrics = changes.NewMetrics(s.metrics.reg)
	co.ReadTimeout = cfg.ReadTimeout
	s.changes = changes.New(cfg.DB, co)
	s.mux = gen.HandlerWithOptions(s, gen.StdHTTPServerOptions{
		// The spec's validation runs first, so the generated wrapper
		// only fails where the two disagree; answer it the same way.
		ErrorHandlerFunc: func(w http.ResponseWriter, r *http.Request, err error) {
			writeError(w, badRequest("%v", err))
		},
	})
	return s, nil
}

// Close answers every held claim at once with its empty answer, and ends
// every live query with its last event; call it when shutting down,
// before waiting for the requests in flight.
func (s *Server) Close() {
	s.hub.Close()
	s.changes.Close()
}

// LoadSpec returns openapi.yaml as embedded in the binary, with its servers
// dropped so that routes match a request's path whatever host it came to.
func LoadSpec() (*openapi3.T, error) {
	spec, err := gen.GetSwagger()
	if err != nil {
		return nil, fmt.Errorf("httpapi: the embedded spec: %w", err)
	}
	spec.Servers = nil
	return spec, nil
}

// ServeHTTP checks the request in the order docs/http.md gives, then
// hands it to its handler.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	defer func() {
		// A panic answers 500 instead of a dropped connection, and is logged
		// with the request it came from.
		if p := recover(); p != nil {
			if p == http.ErrAbortHandler {
				panic(p)
			}
			s.log.Error("panic", "method", r.Method, "path", r.URL.Path, "panic", p)
			writeError(w, &apiError{code: gen.ErrorCodeInternal, msg: "internal error"})
		}
	}()
	if e := s.guard(w, r); e != nil {
		writeError(w, e)
		s.metrics.request("unknown", statuses[e.code]) // before the route is found
		s.logRefused(r, "unknown", statuses[e.code], e)
		return
	}
	if s.front(w, r) {
		return // the console, or a CORS preflight
	}
	sc := scratches.Get().(*scratch)
	keep := false // set once the request has ended holding nothing of sc's
	defer func() {
		if keep {
			sc.recycle()
		}
	}()
	sw := &sc.sw
	*sw = statusWriter{ResponseWriter: w}
	route, err := s.route(r)
	if err != nil {
		writeError(sw, err)
		s.metrics.request("unknown", sw.status)
		s.logRefused(r, "unknown", sw.status, err)
		return
	}
	defer func() {
		s.metrics.request(route.Path, sw.status)
		if sw.status >= 400 {
			s.logRefused(r, route.Path, sw.status, sw.refused)
		}
	}()
	if route.Path != "/_health" {
		admitted, e := s.admit(r)
		if e != nil {
			sw.Header().Set("WWW-Authenticate", `Bearer realm="fenec"`)
			writeError(sw, e)
			return
		}
		if admitted == nil {
			return // the client went away while its address was held back
		}
		r = admitted
	}
	body, e := s.readBody(sw, r, sc.body[:0])
	if e != nil {
		writeError(sw, e)
		return
	}
	if route == s.queryRoute && wantsEvents(r) {
		s.liveQuery(sw, r, body) // a live query (changes.go)
		return
	}
	if route == s.queryRoute || route == s.batchRoute {
		if held, key, ok := readHeaders(r); ok {
			if stmts, e := readStatements(body, route == s.batchRoute, sc.stmts[:0], &sc.slab); e == nil {
				sc.body, sc.stmts = body, stmts
				req, e := s.parse(&sc.req, r, route == s.batchRoute, stmts)
				if e != nil {
					writeError(sw, e)
				} else {
					s.run(sw, r, body, req, key, held)
				}
				// A held claim's statements were the wait package's, which
				// may look at them still; an idempotent write's were in its
				// record's making. Only the others' are known done with.
				keep = held == nil && key == nil
				return
			}
		}
	}
	sc.body = nil // the body goes with the request to the full check and the handler
	if e := s.check(r, route, body); e != nil {
		writeError(sw, e)
		return
	}
	s.mux.ServeHTTP(sw, r)
}

// route finds the spec's operation for the request: 404 for an unknown
// path, 405 (with Allow) for a method the path does not take.
func (s *Server) route(r *http.Request) (*routers.Route, *apiError) {
	if r.Method == http.MethodPost {
		// The statements' routes, found without the router's walk.
		switch r.URL.Path {
		case "/query":
			return s.queryRoute, nil
		case "/batch":
			return s.batchRoute, nil
		}
	}
	find := r
	if r.Method == http.MethodHead {
		// HEAD is GET without the body (RFC 9110 §9.3.2): routed as GET,
		// it runs the GET handler, and net/http drops what that writes.
		find = r.Clone(r.Context())
		find.Method = http.MethodGet
	}
	route, _, err := s.router.FindRoute(find)
	// The router forgives a trailing "/"; the mux does not. A path with a
	// parameter (/{collection}/changes) ends as its template does.
	if err == nil && (route.Path == r.URL.Path || strings.Contains(route.Path, "{") && !strings.HasSuffix(r.URL.Path, "/")) {
		return route, nil
	}
	var re *routers.RouteError
	if errors.As(err, &re) && re.Reason == routers.ErrMethodNotAllowed.Error() {
		var allow []string
		if item := s.spec.Paths.Value(r.URL.Path); item != nil {
			for m := range item.Operations() {
				allow = append(allow, m)
			}
		}
		slices.Sort(allow)
		return nil, &apiError{code: gen.ErrorCodeMethodNotAllowed,
			msg:   fmt.Sprintf("%s %s: the method is not allowed (allowed: %s)", Clip(r.Method), Clip(r.URL.Path), strings.Join(allow, ", ")),
			allow: strings.Join(allow, ", ")}
	}
	return nil, &apiError{code: gen.ErrorCodeNotFound,
		msg: fmt.Sprintf("no route %s %s (see openapi.yaml)", Clip(r.Method), Clip(r.URL.Path))}
}

// maxBodyRoom is the most room taken for a body before its bytes come.
const maxBodyRoom = 64 << 10

// readBody reads the body whole, under the body limit, into dst's room
// where it fits.
func (s *Server) readBody(w http.ResponseWriter, r *http.Request, dst []byte) ([]byte, *apiError) {
	if r.ContentLength > s.cfg.MaxBody {
		// Refused on its length alone, unread: the connection closes
		// after the answer rather than wait for, or read off, a body
		// that will not be taken (and a request sent after it on the
		// connection is not read either).
		w.Header().Set("Connection", "close")
		return nil, tooLarge(s.cfg.MaxBody)
	}
	if n := r.ContentLength; n > 0 {
		// The length is known and net/http reads no byte past it: one
		// buffer of that size (up to maxBodyRoom), where io.ReadAll would
		// grow one from 512 bytes, copying as it goes.
		body := dst[:0]
		switch {
		case int64(cap(body)) >= n:
			body = body[:n]
		case n <= maxBodyRoom:
			body = make([]byte, n)
		default:
			// Past maxBodyRoom the room grows as the bytes come: a client
			// that declares a large body and sends little holds little.
			buf := bytes.NewBuffer(make([]byte, 0, maxBodyRoom))
			_, err := buf.ReadFrom(io.LimitReader(r.Body, n))
			if err == nil && int64(buf.Len()) < n {
				err = io.ErrUnexpectedEOF
			}
			if err != nil {
				return nil, bodyError(w, err)
			}
			return buf.Bytes(), nil
		}
		if _, err := io.ReadFull(r.Body, body); err != nil {
			return nil, bodyError(w, err)
		}
		return body, nil
	}
	body, err := io.ReadAll(http.MaxBytesReader(nil, r.Body, s.cfg.MaxBody))
	if err != nil {
		var over *http.MaxBytesError
		if errors.As(err, &over) {
			w.Header().Set("Connection", "close") // the rest of the body is not read
			return nil, tooLarge(over.Limit)
		}
		return nil, bodyError(w, err)
	}
	return body, nil
}

func tooLarge(limit int64) *apiError {
	return &apiError{code: gen.ErrorCodeTooLarge,
		msg: fmt.Sprintf("the body is larger than the server's --max-body of %d bytes", limit)}
}

// bodyError returns the refusal of a body whose read failed, and has the
// connection closed after the answer (what is left of the body is not
// read): 408 for a body that stopped arriving within the read timeout,
// 400 for one cut short. The read error's own text is not sent: it names
// the connection's addresses.
func bodyError(w http.ResponseWriter, err error) *apiError {
	w.Header().Set("Connection", "close")
	if errors.Is(err, os.ErrDeadlineExceeded) { // the read deadline: net's, TLS's or internal/h1's
		return &apiError{code: gen.ErrorCodeRequestTimeout, msg: "the body did not arrive within the server's read timeout"}
	}
	return badRequest("the body ended before its Content-Length, or its connection failed")
}

// check runs the spec's validation on a request and its body, read by
// readBody, which it leaves in r.Body for the handler.
func (s *Server) check(r *http.Request, route *routers.Route, body []byte) *apiError {
	r.Body = io.NopCloser(bytes.NewReader(body))
	r.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }
	if len(body) > 0 {
		// Bodies are JSON whatever the client labelled them (curl -d sends
		// application/x-www-form-urlencoded): the spec says so. A body
		// whose meaning depends on the parser — a key twice, invalid UTF-8
		// that a decoder would quietly replace — is refused here, before
		// any decoder picks one reading.
		if err := fenecql.CheckStrictJSON(body); err != nil {
			return badRequest("the body: %v", err)
		}
		r.Header.Set("Content-Type", "application/json")
	}
	in := &openapi3filter.RequestValidationInput{
		Request: r,
		Route:   route,
		Options: &openapi3filter.Options{
			AuthenticationFunc:  openapi3filter.NoopAuthenticationFunc,
			SkipSettingDefaults: true,
		},
	}
	if strings.Contains(route.Path, "{") {
		// The path's parameters (/{collection}/changes), which the route
		// alone does not carry.
		find := r
		if r.Method == http.MethodHead {
			find = r.Clone(r.Context())
			find.Method = http.MethodGet // as route finds it
		}
		if _, params, err := s.router.FindRoute(find); err == nil {
			in.PathParams = params
		}
	}
	if err := openapi3filter.ValidateRequest(r.Context(), in); err != nil {
		return invalid(err)
	}
	return nil
}

// logRefused logs a refused request at debug level (fenec serve
// --log-level debug) with the reason it was given, so that a 4xx or 5xx
// counted in fenec_http_requests_total can be told apart when no
// statement was counted for it (docs/operations.md, "Monitoring"). e is
// nil when the handler wrote the refusal some other way.
func (s *Server) logRefused(r *http.Request, route string, status int, e *apiError) {
	if !s.log.Enabled(r.Context(), slog.LevelDebug) {
		return
	}
	args := []any{"method", r.Method, "path", r.URL.Path, "route", route, "status", status, "remote", r.RemoteAddr}
	if e != nil {
		args = append(args, "code", string(e.code), "error", e.msg)
		if e.at != nil {
			args = append(args, "at", *e.at)
		}
	}
	s.log.Debug("refused", args...)
}

// statusWriter remembers the status written, for the request metrics.
type statusWriter struct {
	http.ResponseWriter
	status  int
	refused *apiError // the refusal writeError wrote, for the debug log
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the connection.
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// SweepLapsed deletes lapsed documents (@ttl, docs/fenecql.md) every
// interval until ctx is done: engine.SweepBatch at a time, one commit
// each, so a writer waits for one batch at most, never for the whole
// sweep. While batches come back full it sweeps again after a pause as
// long as the batch took: batches sent back to back would each wait their
// turn in the commit queue and leave the other writers a queue that never
// empties while a million rows lapse (the sweep's figures are in
// bench/results/redis.md).
func (s *Server) SweepLapsed(ctx context.Context, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		total := 0
		for ctx.Err() == nil {
			start := time.Now()
			n, err := s.db.SweepLapsed(ctx, engine.SweepBatch)
			if err != nil {
				s.log.Error("sweeping lapsed documents", "err", err)
				break
			}
			total += n
			s.metrics.lapsed.Add(float64(n))
			if n < engine.SweepBatch || !sleep(ctx, min(time.Since(start), every)) {
				break
			}
		}
		if total > 0 {
			s.log.Debug("swept lapsed documents", "deleted", total)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// SweepKeys deletes expired idempotency keys now and then every interval,
// until ctx is done.
func (s *Server) SweepKeys(ctx context.Context, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		if n, err := s.db.SweepMeta(ctx, s.db.Clock().NowMS()); err != nil {
			s.log.Error("sweeping idempotency keys", "err", err)
		} else if n > 0 {
			s.log.Info("swept idempotency keys", "expired", n)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// sleep waits d, and reports false if ctx ended first.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
