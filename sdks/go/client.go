package fenecdb

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/fenecdb/fenec/sdks/go/internal/gen"
)

// DefaultTimeout is how long a request may take, unless [WithTimeout] says
// otherwise; a request sent with [DB.Wait] may take as much longer as the
// wait.
const DefaultTimeout = 30 * time.Second

// MaxWait is the longest wait the server holds a claim for.
const MaxWait = 30 * time.Second

// DB is a connection to one Fenec server. It is safe for concurrent use;
// [DB.Wait] and [DB.IdempotencyKey] answer changed copies and leave it as
// it was.
type DB struct {
	c       *gen.Client
	timeout time.Duration
	wait    time.Duration
	key     string
}

// Option configures [New].
type Option func(*config)

type config struct {
	token   string
	timeout time.Duration
	client  *http.Client
}

// WithToken sends token as "Authorization: Bearer <token>" on every
// request: the server's --token, or a JWT.
func WithToken(token string) Option { return func(c *config) { c.token = token } }

// WithTimeout bounds each request, from sending it to reading its whole
// answer, to d plus the request's [DB.Wait] (default [DefaultTimeout]; 0 or
// less: no bound but the context's). The bound is the request context's
// deadline, so it never changes the HTTP client.
func WithTimeout(d time.Duration) Option { return func(c *config) { c.timeout = d } }

// WithHTTPClient sends requests through hc instead of a client of its own,
// for its transport (TLS, proxies, connection pools). If hc has a Timeout,
// it must exceed the longest wait, or held claims are cut short: prefer
// [WithTimeout].
func WithHTTPClient(hc *http.Client) Option { return func(c *config) { c.client = hc } }

// New answers a DB for the server at url (such as "http://127.0.0.1:8080").
// It sends nothing: a wrong url or token shows at the first request.
func New(url string, opts ...Option) (*DB, error) {
	cfg := config{timeout: DefaultTimeout, client: &http.Client{}}
	for _, o := range opts {
		o(&cfg)
	}
	genOpts := []gen.ClientOption{gen.WithHTTPClient(cfg.client)}
	if cfg.token != "" {
		bearer := "Bearer " + cfg.token
		genOpts = append(genOpts, gen.WithRequestEditorFn(func(_ context.Context, r *http.Request) error {
			r.Header.Set("Authorization", bearer)
			return nil
		}))
	}
	c, err := gen.NewClient(url, genOpts...)
	if err != nil {
		return nil, fmt.Errorf("fenecdb: %w", err)
	}
	return &DB{c: c, timeout: cfg.timeout}, nil
}

// Wait answers a copy of db whose writes are held at the server for up to
// d while they would take nothing (the Fenec-Wait header, in whole
// milliseconds; d at most [MaxWait], 0 for no wait). An update or delete
// sent through the copy is answered the moment it takes a row, or at the
// end of the wait with what it answers on an empty queue: no row, a count
// of 0, or a [Require]'s 412. Each request's timeout is extended by d.
//
// The header goes with [Collection.Update], [Collection.Delete],
// [DB.Query] and [DB.Batch]; the server refuses it (400) on a request that
// holds no update or delete. The builder's reads and inserts never send
// it.
func (db *DB) Wait(d time.Duration) *DB {
	cp := *db
	cp.wait = max(d, 0)
	return &cp
}

// IdempotencyKey answers a copy of db that sends key (1 to 255 bytes) as
// the Idempotency-Key of its requests. A write retried with the same key
// and the same request is answered its first answer again, with
// [Result.Replayed] set, and writes nothing; the key sent with another
// request is refused with [CodeKeyReused]. A refused write keeps no key. A
// held claim retried after a timeout is answered the jobs the first try
// took.
func (db *DB) IdempotencyKey(key string) *DB {
	cp := *db
	cp.key = key
	return &cp
}

// From starts a query over the named collection.
func (db *DB) From(collection string) Collection { return newCollection(db, collection) }

// Query sends one FenecQL statement with its parameters $1..$n, and
// answers what it answered:
//
//	res, err := db.Query(ctx, "del jobs where id = $1 and owner = $2 require 1", id, owner)
func (db *DB) Query(ctx context.Context, query string, params ...any) (Result, error) {
	return db.query(ctx, Statement{Query: query, Params: params}, true)
}

// Batch sends statements to run in order, all or nothing, under one lock,
// and answers each one's result. If one is refused, none leaves a trace,
// and the [*Error]'s At names the one refused. Every result carries the
// batch's Seq and Replayed.
func (db *DB) Batch(ctx context.Context, statements ...Statement) ([]Result, error) {
	req := gen.BatchRequest{Statements: make([]gen.QueryRequest, len(statements))}
	for i, s := range statements {
		req.Statements[i] = queryRequest(s)
	}
	ctx, cancel := db.deadline(ctx, true)
	defer cancel()
	resp, err := db.c.Batch(ctx, &gen.BatchParams{FenecWait: db.waitMS(true), IdempotencyKey: db.keyParam()}, req)
	body, err := answer(resp, err)
	if err != nil {
		return nil, err
	}
	var b struct {
		Results []json.RawMessage `json:"results"`
	}
	if err := json.Unmarshal(body, &b); err != nil {
		return nil, fmt.Errorf("fenecdb: the batch's answer is not {\"results\": [...]}: %w", err)
	}
	seq, replayed := headers(resp)
	results := make([]Result, len(b.Results))
	for i, raw := range b.Results {
		if results[i], err = parseAnswer(raw); err != nil {
			return nil, err
		}
		results[i].Seq, results[i].Replayed = seq, replayed
	}
	return results, nil
}

// query sends s; held says whether it may carry the wait.
func (db *DB) query(ctx context.Context, s Statement, held bool) (Result, error) {
	ctx, cancel := db.deadline(ctx, held)
	defer cancel()
	params := &gen.QueryParams{FenecWait: db.waitMS(held), IdempotencyKey: db.keyParam()}
	resp, err := db.c.Query(ctx, params, queryRequest(s))
	body, err := answer(resp, err)
	if err != nil {
		return Result{}, err
	}
	res, err := parseAnswer(body)
	if err != nil {
		return Result{}, err
	}
	res.Seq, res.Replayed = headers(resp)
	return res, nil
}

// deadline bounds ctx by the timeout, extended by the wait when the
// request carries it.
func (db *DB) deadline(ctx context.Context, held bool) (context.Context, context.CancelFunc) {
	if db.timeout <= 0 {
		return context.WithCancel(ctx)
	}
	d := db.timeout
	if held {
		d += db.wait
	}
	return context.WithTimeout(ctx, d)
}

func (db *DB) waitMS(held bool) *int {
	ms := int(db.wait.Milliseconds())
	if !held || ms == 0 {
		return nil
	}
	return &ms
}

func (db *DB) keyParam() *string {
	if db.key == "" {
		return nil
	}
	return &db.key
}

func queryRequest(s Statement) gen.QueryRequest {
	params := make([]*gen.Value, len(s.Params))
	for i := range s.Params {
		params[i] = &s.Params[i]
	}
	return gen.QueryRequest{Query: s.Query, Params: &params}
}

// answer reads a response's body, or turns a refusal into an *Error.
func answer(resp *http.Response, err error) ([]byte, error) {
	if err != nil {
		return nil, fmt.Errorf("fenecdb: %w", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("fenecdb: reading the answer: %w", err)
	}
	if resp.StatusCode >= 300 {
		return nil, errorOf(resp.StatusCode, body)
	}
	return body, nil
}

func headers(resp *http.Response) (seq int64, replayed bool) {
	seq, _ = strconv.ParseInt(resp.Header.Get("Fenec-Seq"), 10, 64)
	return seq, resp.Header.Get("Idempotent-Replayed") == "true"
}
