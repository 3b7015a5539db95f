package fenecdb

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"fmt"
	mrand "math/rand/v2"
	"net/http"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
	"unicode/utf8"
)

// DefaultTimeout is how long a call may take unless [WithTimeout] or
// [Timeout] says otherwise; a held claim may take as much longer as its
// wait. It is the same in every Fenec SDK (docs/sdks.md).
const DefaultTimeout = 30 * time.Second

// MaxWait is the longest wait the server holds a claim for.
const MaxWait = 30 * time.Second

// Client is a connection to a Fenec server, or to the nodes of a cluster
// (docs/cluster.md). It is safe for concurrent use. It holds what is the
// same for every call (the URLs, the token, the HTTP client, the default
// timeout); what belongs to one call (an idempotency key, a timeout) is a
// [CallOption] of that call.
type Client struct {
	t       *apiTransport // its baseURL is set per request, to a node's
	nodes   *nodes        // shared by every copy Wait makes
	timeout time.Duration
	wait    time.Duration // sent with claims alone; see Wait
	waitErr error
	schema  *schemas // shared by every copy Wait makes
	retries int
	closed  *atomic.Bool // shared by every copy Wait makes
}

// DB is the former name of [Client].
//
// Deprecated: use [Client].
type DB = Client

// Option configures [Connect].
type Option func(*config)

type config struct {
	token   string
	timeout time.Duration
	client  *http.Client
	tls     *tls.Config
	retries int
	nodes   []string
}

// WithToken sends token as "Authorization: Bearer <token>" on every
// request: the server's --token, or a JWT.
func WithToken(token string) Option { return func(c *config) { c.token = token } }

// WithTimeout sets the default bound of each call, from sending it to
// reading its whole answer (default [DefaultTimeout]; 0 or less: no bound
// but the context's). A held claim's bound is the timeout plus its wait.
// The bound is the request context's deadline, so it never changes the HTTP
// client.
func WithTimeout(d time.Duration) Option { return func(c *config) { c.timeout = d } }

// WithHTTPClient sends requests through hc instead of a client of its own,
// for its transport (TLS, proxies, connection pools). If hc has a Timeout,
// it must exceed the longest wait, or held claims are cut short: prefer
// [WithTimeout].
func WithHTTPClient(hc *http.Client) Option { return func(c *config) { c.client = hc } }

// WithTLSConfig connects over https with cfg: its RootCAs to trust a
// server whose certificate a CA of your own signed (the system's roots
// otherwise), its Certificates to present one to a server started with
// --tls-client-ca (docs/http.md, "TLS"). It configures the Client's own
// HTTP client, so it does not go with [WithHTTPClient]: set TLS on that
// client's transport instead.
//
//	pem, _ := os.ReadFile("ca.pem")
//	roots := x509.NewCertPool()
//	roots.AppendCertsFromPEM(pem)
//	db, err := fenecdb.Connect("https://db.example.com:8443", fenecdb.WithTLSConfig(&tls.Config{RootCAs: roots}))
func WithTLSConfig(cfg *tls.Config) Option { return func(c *config) { c.tls = cfg } }

// WithRetries sends a call that failed of a fault again, up to n more
// times (default 0: never): a fault is no answer (a network error, a
// timeout: each try has the whole timeout) or the server's
// [CodeUnavailable] or [CodeInternal], or a proxy's 502, 503 or 504. Each
// retry waits a random time from 0 to 500 ms × 2^(retry − 1), at most 8 s
// (exponential, full jitter), or until ctx is done. A write is only ever
// sent again under an idempotency key: with retries on, every write
// without an [IdempotencyKey] is given one of its own, so a write whose
// answer was lost is answered its first answer, not applied twice. The
// server keeps each key and its answer for its --idempotency-ttl (24 h),
// up to --idempotency-max-keys (100 000): past that, writes under new
// keys are refused (503 key_limit) until keys expire, so a client writing
// that much should leave retries off, or set [Retries] per call. A
// [Worker] sends its own statements without them (it retries faults
// itself). A negative n is an error of Connect.
func WithRetries(n int) Option { return func(c *config) { c.retries = n } }

// WithNodes gives the URLs of a cluster's nodes as a list, the same as
// Connect's rawURL with them separated by commas (rawURL must then be
// "", and FENEC_URL is not read).
func WithNodes(urls []string) Option {
	return func(c *config) { c.nodes = append(c.nodes, urls...) }
}

// Connect returns a Client for the server at rawURL, such as
// "http://127.0.0.1:8080", or for the nodes of a cluster, their URLs
// separated by commas ("http://10.0.0.1:8080,http://10.0.0.2:8080,http://10.0.0.3:8080",
// so one environment variable can hold them). A URL without the scheme
// http or https, or without a host, is an error here that names it;
// duplicates are dropped; nothing is sent until the first call.
//
// Every call goes to the client's current node, the first URL at the
// start (docs/sdks.md, "Several nodes"). A node's 403 [ErrForbidden]
// naming the leader ([Error.Leader]) was refused unrun: the call sends the
// same request to the leader (at most 3 times between pauses, never from
// https to http), which becomes the current node. A 503 [ErrNoLeader] (an
// election, or a leader just elected) was refused unrun too: it is sent
// again after a pause of 50 ms doubling to 1 s, to the next URL given
// several, else to the same node. With several URLs, a node that could
// not be connected to, or that names a leader whose connection was refused
// in this call, has the call try the next URL, round robin, pausing
// between full rounds. Both go on until the call's deadline, which answers
// the last such error. Anything
// else (a timeout, a connection lost after sending, any other 503, a 403
// of the token's rules) is answered as is: only an [IdempotencyKey] makes
// the retry of a write whose outcome is unknown safe.
//
// An empty rawURL reads the environment: FENEC_URL for the URL(s), and
// FENEC_TOKEN for the token unless [WithToken] gives one; FENEC_URL unset
// is an error. Every request carries a User-Agent naming the SDK and Go:
// "fenecdb-go/v0.1.0 go/1.26.8".
func Connect(rawURL string, opts ...Option) (*Client, error) {
	cfg := config{timeout: DefaultTimeout}
	for _, o := range opts {
		o(&cfg)
	}
	if cfg.nodes != nil {
		if rawURL != "" {
			return nil, fmt.Errorf("fenecdb: Connect(%q) with WithNodes: give the URLs one way", rawURL)
		}
		if len(cfg.nodes) == 0 {
			return nil, errors.New("fenecdb: WithNodes: no URL")
		}
		for _, u := range cfg.nodes {
			if u == "" || strings.Contains(u, ",") {
				return nil, fmt.Errorf("fenecdb: WithNodes: %q is not one URL", u)
			}
		}
		rawURL = strings.Join(cfg.nodes, ",")
	}
	if cfg.retries < 0 {
		return nil, fmt.Errorf("fenecdb: WithRetries(%d): a number of retries is 0 or more", cfg.retries)
	}
	fromEnv := rawURL == ""
	if fromEnv {
		rawURL = os.Getenv("FENEC_URL")
		if rawURL == "" {
			return nil, errors.New("fenecdb: Connect: no URL given, and FENEC_URL is not set")
		}
	}
	ns, err := parseNodes(rawURL)
	if err != nil {
		if fromEnv {
			return nil, fmt.Errorf("%w (from FENEC_URL)", err)
		}
		return nil, err
	}
	if cfg.client != nil && cfg.tls != nil {
		return nil, errors.New("fenecdb: WithTLSConfig and WithHTTPClient together: set the TLS configuration on the HTTP client's transport")
	}
	if fromEnv && cfg.token == "" {
		cfg.token = os.Getenv("FENEC_TOKEN")
	}
	if cfg.client == nil {
		cfg.client = defaultHTTPClient(cfg.tls)
	}
	hc := *cfg.client // the caller's client as it is, its transport wrapped
	hc.Transport = userAgent{base: hc.Transport}
	return &Client{
		t:       &apiTransport{client: &hc, token: cfg.token},
		nodes:   ns,
		timeout: cfg.timeout,
		schema:  &schemas{},
		retries: cfg.retries,
		closed:  &atomic.Bool{},
	}, nil
}

// ErrClosed is the error of every call made through a [Client] after its
// Close.
var ErrClosed = errors.New("fenecdb: the client is closed")

// Close closes the client: the calls made through it (and through its
// Wait copies) after Close return [ErrClosed], and the idle connections of
// its HTTP client are closed (a [WithHTTPClient] client's too, whose
// transport may be shared); calls in flight go on to their end. It
// returns nil, and a second Close does nothing.
func (c *Client) Close() error {
	if c.closed.Swap(true) {
		return nil
	}
	c.t.client.CloseIdleConnections()
	return nil
}

// Node returns the URL of the node c sends its calls to now: the first
// given to [Connect], or the leader it was last sent to (docs/sdks.md,
// "Several nodes").
func (c *Client) Node() string { return c.nodes.current.Load().url }

// New is [Connect].
//
// Deprecated: use [Connect].
func New(rawURL string, opts ...Option) (*Client, error) { return Connect(rawURL, opts...) }

// Wait returns a copy of c whose claims are held at the server for up to
// d while they would take nothing (the Fenec-Wait header, in whole
// milliseconds; d from 0 to [MaxWait]). A claim is an update with
// [Returning] ([Query.Update]), a raw `set … returning …` ([Client.Query]),
// or a [Client.Batch] holding one: it is answered the moment it takes a
// row, or at the end of the wait with no row (or a [Require]'s 412), and
// its timeout is extended by d. Every other call through the copy is sent
// exactly as through c. A d out of range is the error of every call
// through the copy.
func (c *Client) Wait(d time.Duration) *Client {
	cp := *c
	cp.wait, cp.waitErr = d, nil
	if d < 0 || d > MaxWait {
		cp.wait, cp.waitErr = 0, fmt.Errorf("fenecdb: Wait(%v): a wait is a duration from 0 to %v (sent in whole milliseconds)", d, MaxWait)
	}
	return &cp
}

// From starts a query over the named collection.
func (c *Client) From(collection string) Query { return newCollection(c, collection) }

// Collection is [Client.From].
//
// Deprecated: use [Client.From] (docs/sdks.md, "One word per idea").
func (c *Client) Collection(collection string) Query { return c.From(collection) }

// CallOption shapes one call: [IdempotencyKey], [Timeout], [Retries] and
// [After] go with any call; [Returning] and [Require] with [Query.Update] and
// [Query.Delete].
type CallOption func(*callOptions)

// WriteOption is the former name of [CallOption].
//
// Deprecated: use [CallOption].
type WriteOption = CallOption

type callOptions struct {
	key       string
	timeout   *time.Duration
	retries   *int
	after     *int64
	returning []string // nil: none
	require   int      // -1: none
	err       error
}

func (o *callOptions) fail(err error) {
	if o.err == nil {
		o.err = err
	}
}

func readOptions(opts []CallOption) callOptions {
	o := callOptions{require: -1}
	for _, opt := range opts {
		if opt != nil {
			opt(&o)
		}
	}
	return o
}

// IdempotencyKey sends key (1 to 255 bytes) as the call's Idempotency-Key.
// A write retried with the same key and the same request is answered its
// first answer again, with [Result.Replayed] set, and writes nothing; the
// key sent with another request is refused with [ErrKeyReused]. A refused
// write keeps no key. A held claim retried after a timeout is answered the
// jobs the first try took.
func IdempotencyKey(key string) CallOption {
	return func(o *callOptions) {
		if len(key) < 1 || len(key) > 255 {
			o.fail(fmt.Errorf("fenecdb: an idempotency key is 1 to 255 bytes, not %d", len(key)))
			return
		}
		o.key = key
	}
}

// Timeout bounds this call to d instead of the client's timeout (0 or
// less: no bound but the context's); a held claim's bound is d plus its
// wait.
func Timeout(d time.Duration) CallOption {
	return func(o *callOptions) { o.timeout = &d }
}

// Retries sets how many times this call is sent again after a fault,
// instead of the client's [WithRetries] (0: never). A negative n is the
// call's error.
func Retries(n int) CallOption {
	return func(o *callOptions) {
		if n < 0 {
			o.fail(fmt.Errorf("fenecdb: Retries(%d): a number of retries is 0 or more", n))
			return
		}
		o.retries = &n
	}
}

// After makes this call run once the server has applied write seq — a
// [Result.Seq], perhaps another client's or another node's — sent as
// Fenec-After (read-your-writes, docs/cluster.md). A cluster node not there
// within 5 s returns [CodeBehind]; a lone server, which has no other node to
// wait for, refuses at once (400) a write it has not made. Given several
// URLs, the client sends the larger of seq and the highest Fenec-Seq its
// nodes returned. seq is 0 to 2^53-1; another is the call's error.
func After(seq int64) CallOption {
	return func(o *callOptions) {
		if seq < 0 || seq > 1<<53-1 {
			o.fail(fmt.Errorf("fenecdb: After(%d): a seq is 0 to 2^53-1 (a Result.Seq)", seq))
			return
		}
		o.after = &seq
	}
}

// Query sends one FenecQL statement with its parameters $1..$n, and
// returns what it answered. [CallOption] values among args are the call's
// options, not parameters:
//
//	res, err := db.Query(ctx, "del jobs where id = $1 and owner = $2 require 1", id, owner,
//		fenecdb.IdempotencyKey(key))
func (c *Client) Query(ctx context.Context, query string, args ...any) (Result, error) {
	var ps []any
	var opts []CallOption
	for _, a := range args {
		if o, ok := a.(CallOption); ok {
			opts = append(opts, o)
		} else {
			ps = append(ps, a)
		}
	}
	o := readOptions(opts)
	if o.returning != nil || o.require >= 0 {
		o.fail(fmt.Errorf("fenecdb: Returning and Require are options of Update and Delete; write them in the statement"))
	}
	if o.err != nil {
		return Result{}, o.err
	}
	res, err := c.run(ctx, Statement{Query: query, Params: ps}, o)
	if err == nil && schemaChange(query) {
		c.schema.forget()
	}
	return res, err
}

// Batch sends statements to run in order, all or nothing, under one lock,
// and returns each one's result. If one is refused, none leaves a trace,
// and the [*Error]'s At names the one refused. Every result carries the
// batch's Seq and Replayed. Through a [Client.Wait] copy, a batch holding
// a claim is held.
func (c *Client) Batch(ctx context.Context, statements []Statement, opts ...CallOption) ([]Result, error) {
	o := readOptions(opts)
	if o.returning != nil || o.require >= 0 {
		o.fail(fmt.Errorf("fenecdb: Returning and Require are options of Update and Delete; write them in the statement"))
	}
	if o.err != nil {
		return nil, o.err
	}
	if len(statements) == 0 {
		return nil, fmt.Errorf("fenecdb: a batch needs at least one statement")
	}
	req := apiBatchRequest{Statements: make([]apiQueryRequest, len(statements))}
	claim := false
	for i, s := range statements {
		ps, err := params(s.Params)
		if err != nil {
			return nil, fmt.Errorf("fenecdb: batch statement %d: %w", i, err)
		}
		req.Statements[i] = apiQueryRequest{Query: s.Query, Params: ps}
		claim = claim || isClaim(s.Query)
		if err := c.schema.prepare(ctx, c, s, o); err != nil {
			return nil, err
		}
	}
	texts := make([]string, len(statements))
	write := false
	for i, s := range statements {
		texts[i] = s.Query
		write = write || isWrite(s.Query)
	}
	reply, err := c.send(ctx, "POST /batch", claim, o, strings.Join(texts, "; "), write, func(ctx context.Context, t *apiTransport, h batchHeaders) (apiReply, error) {
		return t.batch(ctx, req, h)
	})
	if err != nil {
		return nil, err
	}
	answers, err := parseBatch(reply.body)
	if err != nil || len(answers) != len(statements) {
		return nil, unexpected(reply.host, "POST /batch", reply.status, reply.body)
	}
	results := make([]Result, len(answers))
	for i, raw := range answers {
		if results[i], err = c.result(ctx, o, statements[i], reply, raw); err != nil {
			return nil, err
		}
	}
	for _, s := range statements {
		if schemaChange(s.Query) {
			c.schema.forget()
		}
	}
	return results, nil
}

// run sends one statement.
func (c *Client) run(ctx context.Context, s Statement, o callOptions) (Result, error) {
	ps, err := params(s.Params)
	if err != nil {
		return Result{}, err
	}
	if err := c.schema.prepare(ctx, c, s, o); err != nil {
		return Result{}, err
	}
	req := apiQueryRequest{Query: s.Query, Params: ps}
	reply, err := c.send(ctx, "POST /query", isClaim(s.Query), o, s.Query, isWrite(s.Query), func(ctx context.Context, t *apiTransport, h batchHeaders) (apiReply, error) {
		return t.query(ctx, req, queryHeaders(h))
	})
	if err != nil {
		return Result{}, err
	}
	return c.result(ctx, o, s, reply, reply.body)
}

// send makes one request under the call's deadline, with the wait when
// it is a claim, to the node route picks, and turns every failure into the
// call's error, which says what was asked; with retries, a fault is sent
// again (a write under an idempotency key alone). statement is the text
// asked (for the error), write whether it may write.
func (c *Client) send(ctx context.Context, what string, claim bool, o callOptions, statement string, write bool, do func(context.Context, *apiTransport, batchHeaders) (apiReply, error)) (sent, error) {
	if c.closed.Load() {
		return sent{}, ErrClosed
	}
	var h batchHeaders
	timeout := c.timeout
	if o.timeout != nil {
		timeout = *o.timeout
	}
	bound := fmt.Sprintf("%v (the call's timeout)", timeout)
	if claim {
		if c.waitErr != nil {
			return sent{}, c.waitErr
		}
		if ms := c.wait.Milliseconds(); ms > 0 {
			h.FenecWait = &ms
			if timeout > 0 { // no timeout stays none
				bound = fmt.Sprintf("%v (the call's timeout of %v plus the wait of %v)", timeout+c.wait, timeout, c.wait)
				timeout += c.wait
			}
		}
	}
	retries := c.retries
	if o.retries != nil {
		retries = *o.retries
	}
	key := o.key
	if key == "" && write && retries > 0 {
		key = newIdempotencyKey()
	}
	if key != "" {
		h.IdempotencyKey = &key
	}
	h.FenecAfter = c.nodes.after()
	if o.after != nil && (h.FenecAfter == nil || *o.after > *h.FenecAfter) {
		h.FenecAfter = o.after
	}
	for retry := 0; ; retry++ {
		reqCtx, cancel := ctx, context.CancelFunc(func() {})
		if timeout > 0 {
			reqCtx, cancel = context.WithTimeoutCause(ctx, timeout, errTimedOut)
		}
		var node string
		reply, err := c.route(ctx, reqCtx, what, bound, func(ctx context.Context, t *apiTransport) (apiReply, error) {
			node = t.baseURL
			return do(ctx, t, h)
		})
		cancel()
		if err == nil {
			return reply, nil
		}
		var e *Error
		if !errors.As(err, &e) {
			return sent{}, err // the caller's context
		}
		e.Method, e.Node, e.Statement, e.IdempotencyKey = what, node, truncate(statement, maxStatementInError), key
		e.Retryable = isRetryable(e) && (!write || key != "")
		if !e.Retryable || retry >= retries {
			return sent{}, err
		}
		d := min(retryFirst<<retry, retryMost)
		t := time.NewTimer(time.Duration(mrand.Int64N(int64(d) + 1)))
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return sent{}, err
		}
	}
}

// The bounds of a retry's wait (WithRetries).
const (
	retryFirst = 500 * time.Millisecond
	retryMost  = 8 * time.Second
)

// maxStatementInError is how much of a statement an [Error] keeps.
const maxStatementInError = 200

// isRetryable reports whether e is a fault worth sending the same request
// again for: no answer, the server's unavailable or internal, a proxy's
// 502, 503 or 504.
func isRetryable(e *Error) bool {
	switch e.Code {
	case CodeNetwork, CodeTimeout, CodeUnavailable, CodeInternal:
		return true
	case CodeUnexpected:
		return e.Status == 502 || e.Status == 503 || e.Status == 504
	}
	return false
}

// newIdempotencyKey returns a key of its own for a write sent with
// retries: 128 random bits.
func newIdempotencyKey() string {
	b := make([]byte, 16)
	rand.Read(b)
	return "fenecdb-go-" + hex.EncodeToString(b)
}

// isWrite reports whether a statement may write: any but a read (get).
func isWrite(query string) bool {
	v := verb(query)
	return v == "" || !strings.EqualFold(v, "get")
}

// truncate returns s cut to at most n bytes (on a rune boundary), with …
// when cut.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	s = s[:n]
	for !utf8.ValidString(s) {
		s = s[:len(s)-1]
	}
	return s + "…"
}

// result reads one statement's answer, the rows of a builder's statement
// typed by the declared field types of its collection.
func (c *Client) result(ctx context.Context, o callOptions, s Statement, reply sent, raw []byte) (Result, error) {
	res, err := parseAnswer(raw)
	if err != nil {
		return Result{}, unexpected(reply.host, "POST /query", reply.status, reply.body)
	}
	res.Seq, _ = strconv.ParseInt(reply.header.Get(headerFenecSeq), 10, 64)
	res.Replayed = reply.header.Get(headerIdempotentReplayed) == "true"
	if res.Rows != nil {
		if err := c.schema.decode(ctx, c, o, s, res.Rows); err != nil {
			return Result{}, err
		}
	}
	return res, nil
}

// keptConnsPerHost is how many idle connections to a node the client of
// Connect keeps: net/http keeps 2, so calls from more goroutines at once —
// a Worker's claim and its jobs' acks (Concurrency 10) — would close the
// rest after each call and dial anew (a TCP handshake, and a connection
// the server sets up, per call).
const keptConnsPerHost = 64

// Version is this SDK's version, as its User-Agent names it; a test keeps
// it equal to the other SDKs' manifests (they are released together).
const Version = "v0.1.0"

// userAgentValue is "fenecdb-go/<Version> go/<Go's version>".
var userAgentValue = "fenecdb-go/" + Version + " go/" + strings.TrimPrefix(runtime.Version(), "go")

// userAgent sets the SDK's User-Agent on every request that has none.
type userAgent struct{ base http.RoundTripper }

// RoundTrip implements http.RoundTripper on a copy of req, as the
// interface asks: the request is not changed.
func (u userAgent) RoundTrip(req *http.Request) (*http.Response, error) {
	base := u.base
	if base == nil {
		base = http.DefaultTransport
	}
	if req.Header.Get("User-Agent") != "" {
		return base.RoundTrip(req)
	}
	r := req.Clone(req.Context())
	r.Header.Set("User-Agent", userAgentValue)
	return base.RoundTrip(r)
}

// CloseIdleConnections passes http.Client.CloseIdleConnections on.
func (u userAgent) CloseIdleConnections() {
	if c, ok := u.base.(interface{ CloseIdleConnections() }); ok {
		c.CloseIdleConnections()
	}
}

// defaultHTTPClient returns the HTTP client of a Client made without
// WithHTTPClient: net/http's default transport (its proxy from the
// environment, its timeouts), keeping keptConnsPerHost idle connections to
// // a host, with tlsCfg if not nil; net/http's default client if that
// transport was replaced.
func defaultHTTPClient(tlsCfg *tls.Config) *http.Client {
	dt, ok := http.DefaultTransport.(*http.Transport)
	if !ok {
		if tlsCfg != nil {
			return &http.Client{Transport: &http.Transport{Proxy: http.ProxyFromEnvironment, TLSClientConfig: tlsCfg}}
		}
		return &http.Client{}
	}
	tr := dt.Clone()
	if tlsCfg != nil {
		tr.TLSClientConfig = tlsCfg
	}
	tr.MaxIdleConnsPerHost = keptConnsPerHost
	tr.MaxIdleConns = max(tr.MaxIdleConns, keptConnsPerHost)
	return &http.Client{Transport: tr}
}
