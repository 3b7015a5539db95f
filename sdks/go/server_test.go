package fenecdb_test

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"math/big"
	"net"
	"net/http/httptrace"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fenecdb/fenec/sdks/go"
	"github.com/fenecdb/fenec/sdks/go/internal/fenectest"
)

func TestMain(m *testing.M) { os.Exit(fenectest.Main(m)) }

// server starts a fresh fenec serve --clock manual and connects to it.
func server(t *testing.T, flags ...string) (*fenecdb.Client, string) {
	t.Helper()
	url := fenectest.Start(t, flags...)
	return connect(t, url), url
}

func connect(t testing.TB, url string, opts ...fenecdb.Option) *fenecdb.Client {
	t.Helper()
	db, err := fenecdb.Connect(url, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return db
}

// TestConformance replays every page of conformance/cases (data read as
// files; conformance/README.md gives the rule) through Client.Query, each
// page on a fresh server.
func TestConformance(t *testing.T) {
	files, _ := filepath.Glob("../../conformance/cases/*.json")
	if len(files) == 0 {
		t.Fatal("no case file in conformance/cases")
	}
	for _, file := range files {
		var page struct {
			Source string
			Steps  []struct {
				Line      int
				Query     string
				Params    []any
				AdvanceMS int64 `json:"advance_ms"`
				Expect    *struct {
					Value   json.RawMessage
					NoRow   bool `json:"no_row"`
					Refused int
				}
			}
		}
		b, err := os.ReadFile(file)
		if err == nil {
			err = json.Unmarshal(b, &page)
		}
		if err != nil {
			t.Fatal(err)
		}
		t.Run(filepath.Base(file), func(t *testing.T) {
			db, url := server(t)
			for _, s := range page.Steps {
				if s.AdvanceMS > 0 {
					if err := fenectest.Advance(url, s.AdvanceMS); err != nil {
						t.Fatal(err)
					}
					continue
				}
				res, err := db.Query(context.Background(), s.Query, s.Params...)
				var fe *fenecdb.Error
				switch e := s.Expect; {
				case e != nil && e.Refused != 0:
					if !errors.As(err, &fe) || fe.Status != e.Refused {
						t.Fatalf("%s:%d: %s: got %v, want refused: %d", page.Source, s.Line, s.Query, err, e.Refused)
					}
				case err != nil:
					t.Fatalf("%s:%d: %s: %v", page.Source, s.Line, s.Query, err)
				case e == nil:
				case e.NoRow:
					if res.Rows == nil || len(res.Rows) != 0 {
						t.Fatalf("%s:%d: %s: got %+v, want no row", page.Source, s.Line, s.Query, res)
					}
				default:
					var got any = res.Affected
					if res.Rows != nil {
						if len(res.Rows) == 0 {
							t.Fatalf("%s:%d: %s: got no row, want %s", page.Source, s.Line, s.Query, e.Value)
						}
						got = res.Rows[0].Values[0]
					}
					if g, _ := fenecdb.D("v", got).MarshalJSON(); !sameValue(g[5:len(g)-1], e.Value) {
						t.Fatalf("%s:%d: %s: got %s, want %s", page.Source, s.Line, s.Query, g[5:len(g)-1], e.Value)
					}
				}
			}
		})
	}
}

// sameValue compares JSON values, numbers by value (1 equals 1.0).
func sameValue(a, b []byte) bool {
	var va, vb any
	da, db := json.NewDecoder(bytes.NewReader(a)), json.NewDecoder(bytes.NewReader(b))
	da.UseNumber()
	db.UseNumber()
	if da.Decode(&va) != nil || db.Decode(&vb) != nil {
		return false
	}
	na, ok1 := va.(json.Number)
	nb, ok2 := vb.(json.Number)
	if ok1 && ok2 {
		ra, _ := new(big.Rat).SetString(string(na))
		rb, _ := new(big.Rat).SetString(string(nb))
		return ra != nil && rb != nil && ra.Cmp(rb) == 0
	}
	return reflect.DeepEqual(va, vb)
}

const jobsSchema = "create collection jobs (payload json, run_at timestamp @sorted, owner text, attempts int, error text)"

func mustQuery(t testing.TB, db *fenecdb.Client, query string, params ...any) fenecdb.Result {
	t.Helper()
	res, err := db.Query(context.Background(), query, params...)
	if err != nil {
		t.Fatalf("%s: %v", query, err)
	}
	return res
}

// eventually polls cond every 10 ms for up to 10 s.
func eventually(t testing.TB, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if cond() {
			return
		}
	}
	t.Fatalf("gave up waiting for %s", what)
}

func heldClaims(t testing.TB, url string) int {
	t.Helper()
	n, err := fenectest.HeldClaims(url)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func claim(ctx context.Context, jobs fenecdb.Query, owner string, opts ...fenecdb.CallOption) (fenecdb.Result, error) {
	return jobs.WhereRaw(fenecdb.Raw("run_at <= now()")).Order("run_at").Limit(1).Update(ctx,
		fenecdb.D("owner", owner, "run_at", fenecdb.Expr("now() + ?", 30000), "attempts", fenecdb.Inc(1)),
		append(opts, fenecdb.Returning("id", "owner"))...)
}

// TestWaitIsAnsweredByAPut holds a claim on an empty queue and puts a job:
// the claim is answered with it.
func TestWaitIsAnsweredByAPut(t *testing.T) {
	db, url := server(t)
	mustQuery(t, db, jobsSchema)
	got := make(chan fenecdb.Result, 1)
	errc := make(chan error, 1)
	go func() {
		res, err := claim(context.Background(), db.Wait(10*time.Second).From("jobs"), "w1")
		got <- res
		errc <- err
	}()
	eventually(t, "the claim to be held", func() bool { return heldClaims(t, url) == 1 })
	mustQuery(t, db, "put jobs {payload: $1, run_at: now(), attempts: 0}", map[string]string{"to": "ada@example.com"})
	res, err := <-got, <-errc
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Rows) != 1 || res.Rows[0].Get("owner") != "w1" {
		t.Fatalf("got %+v", res)
	}
}

// TestWaitCopySendsOthersAsIs: through a Wait copy, a read, a raw get, an
// insert and an ack are sent as without it (today's server refuses
// Fenec-Wait on a request holding no claim with 400), while a claim is
// held.
func TestWaitCopySendsOthersAsIs(t *testing.T) {
	db, _ := server(t)
	ctx := context.Background()
	mustQuery(t, db, jobsSchema)
	waiting := db.Wait(300 * time.Millisecond)
	if _, err := waiting.Query(ctx, "get jobs"); err != nil {
		t.Fatalf("a raw get through a Wait copy: %v", err)
	}
	if _, err := waiting.Query(ctx, "put jobs {run_at: now() + 3600000, attempts: 0}"); err != nil {
		t.Fatalf("a put through a Wait copy: %v", err)
	}
	if _, err := waiting.From("jobs").Where("id", 1).Update(ctx, fenecdb.D("attempts", 0)); err != nil {
		t.Fatalf("an update without returning through a Wait copy: %v", err)
	}
	start := time.Now()
	res, err := claim(ctx, waiting.From("jobs"), "w1")
	if err != nil || len(res.Rows) != 0 || time.Since(start) < 250*time.Millisecond {
		t.Fatalf("the claim: %+v %v after %v; want no row after the wait", res, err, time.Since(start))
	}
	if _, err := waiting.Batch(ctx, []fenecdb.Statement{{Query: "get jobs"}}); err != nil {
		t.Fatalf("a batch of a read through a Wait copy: %v", err)
	}
	if _, err := db.Wait(31*time.Second).Query(ctx, "set jobs {owner: $1} returning *", "w"); err == nil || !strings.Contains(err.Error(), "30s") {
		t.Fatalf("a wait over 30 s: got %v, want a client-side error naming the range", err)
	}
}

// TestCancelFreesHeldClaim cancels a held claim's context: the server drops
// the claim, and a job put afterwards stays unclaimed.
func TestCancelFreesHeldClaim(t *testing.T) {
	db, url := server(t)
	mustQuery(t, db, jobsSchema)
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() {
		_, err := claim(ctx, db.Wait(30*time.Second).From("jobs"), "gone")
		errc <- err
	}()
	eventually(t, "the claim to be held", func() bool { return heldClaims(t, url) == 1 })
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Fatalf("got %v, want context.Canceled", err)
	}
	eventually(t, "the server to drop the claim", func() bool { return heldClaims(t, url) == 0 })
	mustQuery(t, db, "put jobs {payload: {}, run_at: now(), attempts: 0}")
	n, err := db.From("jobs").Where("owner", (*string)(nil)).Count(context.Background())
	if err != nil || n != 1 {
		t.Fatalf("unclaimed jobs: %d, %v; want 1", n, err)
	}
}

// TestServerErrors maps a real server's refusals to *fenecdb.Error and
// its sentinels.
func TestServerErrors(t *testing.T) {
	db, _ := server(t)
	ctx := context.Background()
	mustQuery(t, db, jobsSchema)
	mustQuery(t, db, "put jobs {id: 1, attempts: 0}")
	key := fenecdb.IdempotencyKey("job-1-ack")
	mustQuery(t, db, "set jobs {attempts: 1} where id = 1", key)
	for _, tc := range []struct {
		name     string
		do       func() error
		status   int
		sentinel error
	}{
		{"parse", func() error { _, err := db.Query(ctx, "get jobs where"); return err }, 400, fenecdb.ErrBadRequest},
		{"unknown collection", func() error { _, err := db.From("nope").Rows(ctx); return err }, 404, fenecdb.ErrNotFound},
		{"taken id", func() error { _, err := db.From("jobs").Insert(ctx, fenecdb.D("id", 1)); return err }, 409, fenecdb.ErrConflict},
		{"require", func() error {
			_, err := db.From("jobs").Where("id", 99).Delete(ctx, fenecdb.Require(1))
			return err
		}, 412, fenecdb.ErrUnmet},
		{"key reused", func() error { _, err := db.Query(ctx, "set jobs {attempts: 2} where id = 1", key); return err }, 422, fenecdb.ErrKeyReused},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.do()
			var fe *fenecdb.Error
			if !errors.As(err, &fe) || fe.Status != tc.status || !errors.Is(err, tc.sentinel) || fe.Message == "" {
				t.Fatalf("got %v, want %d %v", err, tc.status, tc.sentinel)
			}
			if errors.Is(err, fenecdb.ErrNetwork) {
				t.Fatalf("%v matches ErrNetwork", err)
			}
		})
	}
	t.Run("batch at", func(t *testing.T) {
		before, err := db.From("jobs").Count(ctx)
		if err != nil {
			t.Fatal(err)
		}
		_, err = db.Batch(ctx, []fenecdb.Statement{
			{Query: "put jobs {attempts: 0}"},
			{Query: "del jobs where id = $1 require 1", Params: []any{99}}})
		var fe *fenecdb.Error
		if !errors.As(err, &fe) || fe.Status != 412 || fe.At != 1 || !errors.Is(err, fenecdb.ErrUnmet) {
			t.Fatalf("got %v, want 412 at statement 1", err)
		}
		if n, _ := db.From("jobs").Count(ctx); n != before {
			t.Fatalf("the refused batch left a trace: %d jobs, want %d", n, before)
		}
	})
}

// TestNetworkErrors: a refused connection and a server that answers
// nothing are *fenecdb.Error with the codes network and timeout, naming
// host:port, the cause and the timeout.
func TestNetworkErrors(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close() // nothing listens there now
	_, err = connect(t, "http://"+addr).From("jobs").Rows(context.Background())
	var fe *fenecdb.Error
	if !errors.As(err, &fe) || !errors.Is(err, fenecdb.ErrNetwork) || fe.Status != 0 ||
		!strings.Contains(err.Error(), addr) || !strings.Contains(err.Error(), "connection refused") || errors.Unwrap(err) == nil {
		t.Fatalf("got %v, want a network error naming %s and connection refused", err, addr)
	}

	srv := fenectest.StartServer(t, "--file", ":memory:")
	db := connect(t, srv.URL, fenecdb.WithTimeout(5*time.Second))
	mustQuery(t, db, jobsSchema)
	srv.Pause()
	defer srv.Resume()
	start := time.Now()
	_, err = db.From("jobs").Rows(context.Background(), fenecdb.Timeout(200*time.Millisecond))
	if !errors.Is(err, fenecdb.ErrTimeout) || !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "200ms") {
		t.Fatalf("got %v, want a timeout saying 200ms", err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("the timeout came after %v", d)
	}
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(100*time.Millisecond, cancel)
	if _, err = db.From("jobs").Rows(ctx); !errors.Is(err, context.Canceled) || errors.Is(err, fenecdb.ErrTimeout) {
		t.Fatalf("a cancelled call: got %v, want context.Canceled", err)
	}
}

// TestConnectRefusesBadURLs: a URL without a scheme fails at once.
func TestConnectRefusesBadURLs(t *testing.T) {
	for _, u := range []string{"127.0.0.1:8080", "localhost:8080", "ftp://h:1", "http://"} { // "": TestConnectFromEnv
		if _, err := fenecdb.Connect(u); err == nil || !strings.Contains(err.Error(), "http") {
			t.Errorf("Connect(%q): %v, want an error naming the scheme", u, err)
		}
	}
	if _, err := fenecdb.New("https://fenec.example.com"); err != nil {
		t.Error(err)
	}
}

// TestRowsDecodeByDeclaredType: a timestamp field is a time.Time, an int
// an int64, a text field that looks like a timestamp stays a string.
func TestRowsDecodeByDeclaredType(t *testing.T) {
	db, _ := server(t)
	ctx := context.Background()
	mustQuery(t, db, "create collection notes (at timestamp, text text, n int, x float, data json)")
	_, err := db.From("notes").Insert(ctx, fenecdb.D(
		"at", time.Date(2026, 5, 3, 9, 20, 20, 0, time.UTC),
		"text", "2026-05-03T09:20:20.000Z",
		"n", int64(9007199254740993),
		"x", 1.5,
		"data", map[string]any{"when": "2026-05-03T09:20:20.000Z", "big": int64(9007199254740993)}))
	if err != nil {
		t.Fatal(err)
	}
	row, err := db.From("notes").First(ctx)
	if err != nil || row == nil {
		t.Fatal(row, err)
	}
	want := map[string]any{
		"id":   int64(1),
		"at":   time.Date(2026, 5, 3, 9, 20, 20, 0, time.UTC),
		"text": "2026-05-03T09:20:20.000Z",
		"n":    int64(9007199254740993),
		"x":    1.5,
		"data": map[string]any{"when": "2026-05-03T09:20:20.000Z", "big": json.Number("9007199254740993")},
	}
	for col, w := range want {
		if g := row.Get(col); !reflect.DeepEqual(g, w) {
			t.Errorf("%s: got %#v, want %#v", col, g, w)
		}
	}
	// A statement written as text has no collection: its rows are as the
	// JSON says.
	if g := mustQuery(t, db, "get notes").Rows[0].Get("at"); g != "2026-05-03T09:20:20.000Z" {
		t.Fatalf("a raw get: at is %#v, want the JSON's text", g)
	}
	// A collection made again with other types is read again.
	mustQuery(t, db, "drop collection notes")
	mustQuery(t, db, "create collection notes (at text)")
	mustQuery(t, db, "put notes {at: $1}", "soon")
	if rows, err := db.From("notes").Rows(ctx); err != nil || rows[0].Get("at") != "soon" {
		t.Fatalf("after the schema changed: %v %v", rows, err)
	}
}

// TestIdempotentReplay: a claim retried under its key is answered the
// first answer, and writes nothing; a call without the key runs.
func TestIdempotentReplay(t *testing.T) {
	db, _ := server(t)
	ctx := context.Background()
	mustQuery(t, db, jobsSchema)
	mustQuery(t, db, "put jobs [{run_at: now(), attempts: 0}, {run_at: now(), attempts: 0}, {run_at: now(), attempts: 0}]")
	key := fenecdb.IdempotencyKey("claim-w1-1")
	first, err := claim(ctx, db.From("jobs"), "w1", key)
	if err != nil {
		t.Fatal(err)
	}
	again, err := claim(ctx, db.From("jobs"), "w1", key)
	if err != nil {
		t.Fatal(err)
	}
	if first.Replayed || !again.Replayed || first.Seq == 0 {
		t.Fatalf("first %+v, again %+v", first, again)
	}
	if a, b := first.Rows[0].Get("id"), again.Rows[0].Get("id"); a != b {
		t.Fatalf("replayed job %v, first took %v", b, a)
	}
	other, err := claim(ctx, db.From("jobs"), "w1")
	if err != nil || other.Replayed || other.Rows[0].Get("id") == first.Rows[0].Get("id") {
		t.Fatalf("a claim without the key: %+v %v", other, err)
	}
	if n, _ := db.From("jobs").Where("owner", nil).Count(ctx); n != 1 {
		t.Fatalf("%d jobs left unclaimed, want 1", n)
	}
}

// TestTooLarge: a body over the server's --max-body is ErrTooLarge.
func TestTooLarge(t *testing.T) {
	db, _ := server(t, "--max-body", "512")
	mustQuery(t, db, jobsSchema)
	_, err := db.From("jobs").Insert(context.Background(), fenecdb.D("error", strings.Repeat("x", 1000)))
	var fe *fenecdb.Error
	if !errors.As(err, &fe) || fe.Status != 413 || !errors.Is(err, fenecdb.ErrTooLarge) {
		t.Fatalf("got %v, want 413 too_large", err)
	}
}

// TestUnauthorized: a server with --token refuses a request without it.
func TestUnauthorized(t *testing.T) {
	_, url := server(t, "--token", "s3cret")
	if _, err := connect(t, url).Query(context.Background(), "get jobs"); !errors.Is(err, fenecdb.ErrUnauthorized) {
		t.Fatalf("got %v, want 401", err)
	}
	mustQuery(t, connect(t, url, fenecdb.WithToken("s3cret")), jobsSchema)
}

// TestForbidden: a JWT whose policy grants only reads is refused a write.
func TestForbidden(t *testing.T) {
	const secret = "a-secret-of-thirty-two-bytes-or-more"
	policy := filepath.Join(t.TempDir(), "policy")
	if err := os.WriteFile(policy, []byte("jobs read\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, url := server(t, "--token", "admin", "--jwt-secret", secret, "--policy", policy)
	mustQuery(t, connect(t, url, fenecdb.WithToken("admin")), jobsSchema)
	reader := connect(t, url, fenecdb.WithToken(hs256(t, secret, map[string]any{"sub": "r1", "exp": time.Now().Add(time.Hour).Unix()})))
	if _, err := reader.From("jobs").Rows(context.Background()); err != nil {
		t.Fatalf("a read: %v", err)
	}
	_, err := reader.From("jobs").Insert(context.Background(), fenecdb.D("attempts", 0))
	var fe *fenecdb.Error
	if !errors.As(err, &fe) || fe.Status != 403 || !errors.Is(err, fenecdb.ErrForbidden) || fe.Leader != "" {
		t.Fatalf("got %v, want 403", err)
	}
	// With several URLs too, the token's 403 is answered at once: no other
	// node would run it (docs/sdks.md, "Several nodes").
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	down := l.Addr().String()
	l.Close()
	both := connect(t, url+",http://"+down, fenecdb.WithTimeout(5*time.Second),
		fenecdb.WithToken(hs256(t, secret, map[string]any{"sub": "r1", "exp": time.Now().Add(time.Hour).Unix()})))
	start := time.Now()
	if _, err := both.From("jobs").Insert(context.Background(), fenecdb.D("attempts", 0)); !errors.Is(err, fenecdb.ErrForbidden) || time.Since(start) > time.Second {
		t.Fatalf("with several URLs: got %v after %v, want the 403 at once", err, time.Since(start))
	}
}

// hs256 signs claims as a JWT with secret.
func hs256(t *testing.T, secret string, claims map[string]any) string {
	t.Helper()
	enc := base64.RawURLEncoding
	body, err := json.Marshal(claims)
	if err != nil {
		t.Fatal(err)
	}
	signed := enc.EncodeToString([]byte(`{"alg":"HS256","typ":"JWT"}`)) + "." + enc.EncodeToString(body)
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write([]byte(signed))
	return signed + "." + enc.EncodeToString(mac.Sum(nil))
}

// TestConcurrentCallsKeepTheirConnections: calls from more goroutines than
// net/http keeps idle connections to a host by default (2) reuse their
// connections, as a Worker's claim and its jobs' acks do (Concurrency 10),
// rather than closing all but two after each round and dialing anew.
func TestConcurrentCallsKeepTheirConnections(t *testing.T) {
	db, _ := server(t)
	mustQuery(t, db, `create collection jobs (run_at timestamp @sorted)`)
	var dials atomic.Int64
	ctx := httptrace.WithClientTrace(context.Background(), &httptrace.ClientTrace{
		ConnectStart: func(string, string) { dials.Add(1) },
	})
	const goroutines, rounds = 8, 30
	calls := func(rounds int) {
		var wg sync.WaitGroup
		start := make(chan struct{})
		for range goroutines {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				for range rounds {
					if _, err := db.Query(ctx, `put jobs {run_at: now()}`); err != nil {
						t.Error(err)
						return
					}
				}
			}()
		}
		close(start)
		wg.Wait()
	}
	// The connections are made: up to one per goroutine, a few more when a
	// dial loses the race to a connection freed meanwhile.
	calls(rounds)
	dials.Store(0)
	calls(rounds)
	// Two at most, for slack: a connection the server ended.
	if n := dials.Load(); n > 2 {
		t.Errorf("%d connections dialed for %d calls from %d goroutines on connections already made: they were closed after use", n, goroutines*rounds, goroutines)
	}
}

// TestInsteadOfRedis: IfAbsent writes once; Upsert and Inc count from
// nothing; Near answers nearest first (docs/redis.md).
func TestInsteadOfRedis(t *testing.T) {
	db, _ := server(t)
	ctx := context.Background()
	mustQuery(t, db, "create collection counters (key text @unique, n int)")
	mustQuery(t, db, "create collection places (name text, at geo @geo)")
	counters := db.From("counters")
	n := func(key string) any {
		t.Helper()
		row, err := counters.Where("key", key).First(ctx)
		if err != nil || row == nil {
			t.Fatal(row, err)
		}
		return row.Get("n")
	}
	for i, want := range []int64{1, 0} {
		res, err := counters.IfAbsent().Insert(ctx, fenecdb.D("key", "a", "n", 5+i))
		if err != nil || res.Affected != want {
			t.Fatalf("if absent #%d: %+v, %v; want %d written", i, res, err, want)
		}
	}
	if got := n("a"); got != int64(5) {
		t.Fatalf("n of a: %v, want 5 (the second put wrote nothing)", got)
	}
	hit := counters.Upsert(fenecdb.D("n", fenecdb.Inc(1)))
	for range 3 {
		if _, err := hit.Insert(ctx, fenecdb.D("key", "b")); err != nil {
			t.Fatal(err)
		}
	}
	if got := n("b"); got != int64(2) { // written with n null, then coalesce(n, 0) + 1 twice
		t.Fatalf("n of b: %v, want 2", got)
	}
	if _, err := counters.Upsert(fenecdb.D("n", fenecdb.Expr("n + new.n"))).Insert(ctx, fenecdb.D("key", "a", "n", 10)); err != nil || n("a") != int64(15) {
		t.Fatalf("upsert with new.n: %v, n %v; want 15", err, n("a"))
	}

	places := db.From("places")
	if _, err := places.InsertMany(ctx, []fenecdb.Doc{
		fenecdb.D("name", "far", "at", []float64{10, 10}), fenecdb.D("name", "near", "at", []float64{1, 1}),
		fenecdb.D("name", "mid", "at", []float64{5, 5}), fenecdb.D("name", "none"),
	}); err != nil {
		t.Fatal(err)
	}
	names := func(q fenecdb.Query) []any {
		t.Helper()
		rows, err := q.Select("name").Rows(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var out []any
		for _, r := range rows {
			out = append(out, r.Get("name"))
		}
		return out
	}
	if got := names(places.Near("at", 0, 0)); !reflect.DeepEqual(got, []any{"near", "mid", "far"}) {
		t.Errorf("near [0, 0]: %v", got)
	}
	if got := names(places.NearExact("at", 9, 9).Limit(2)); !reflect.DeepEqual(got, []any{"far", "mid"}) {
		t.Errorf("near [9, 9] exact: %v", got)
	}
}
