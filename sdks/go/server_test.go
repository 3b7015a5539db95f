package fenecdb_test

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/fenecdb/fenec/conformance"
	"github.com/fenecdb/fenec/sdks/go"
	"github.com/fenecdb/fenec/sdks/go/internal/fenectest"
	"github.com/fenecdb/fenec/sdks/go/internal/gen"
)

func TestMain(m *testing.M) { os.Exit(fenectest.Main(m)) }

// runner replays conformance steps through the SDK's raw query call,
// turning its answers back into the status and JSON body the rule reads.
type runner struct {
	db  *fenecdb.DB
	url string
}

func (r runner) Query(query string, params []any) (json.RawMessage, int, error) {
	res, err := r.db.Query(context.Background(), query, params...)
	var fe *fenecdb.Error
	if errors.As(err, &fe) {
		b, _ := json.Marshal(map[string]string{"error": fe.Message, "code": fe.Code})
		return b, fe.Status, nil
	}
	if err != nil {
		return nil, 0, err
	}
	if res.Rows == nil {
		return fmt.Appendf(nil, `{"affected": %d}`, res.Affected), 200, nil
	}
	b, err := json.Marshal(res.Rows)
	return b, 200, err
}

func (r runner) Advance(ms int64) error { return fenectest.Advance(r.url, ms) }

// server starts a fresh fenec serve --clock manual and connects to it.
func server(t *testing.T, flags ...string) (*fenecdb.DB, *gen.Client) {
	t.Helper()
	url := fenectest.Start(t, flags...)
	api, err := gen.NewClient(url)
	if err != nil {
		t.Fatal(err)
	}
	return connect(t, url), api
}

// TestConformance replays every case file of conformance/cases, each page
// on a fresh server, through DB.Query.
func TestConformance(t *testing.T) {
	pages, err := conformance.ReadCases("../../conformance/cases")
	if err != nil {
		t.Fatal(err)
	}
	if len(pages) == 0 {
		t.Fatal("no case file in conformance/cases")
	}
	for _, page := range pages {
		t.Run(page.Page, func(t *testing.T) {
			db, api := server(t)
			if err := page.Replay(runner{db, api.Server}); err != nil {
				t.Error(err)
			}
		})
	}
}

const jobsSchema = "create collection jobs (payload json, run_at timestamp @sorted, owner text, attempts int, error text)"

func mustQuery(t *testing.T, db *fenecdb.DB, query string, params ...any) fenecdb.Result {
	t.Helper()
	res, err := db.Query(context.Background(), query, params...)
	if err != nil {
		t.Fatalf("%s: %v", query, err)
	}
	return res
}

// heldClaims reads the server's fenec_held_claims gauge.
func heldClaims(t *testing.T, api *gen.Client) int {
	t.Helper()
	n, err := fenectest.HeldClaims(api.Server)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// eventually polls cond every 10 ms for up to 10 s.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if cond() {
			return
		}
	}
	t.Fatalf("gave up waiting for %s", what)
}

func claim(ctx context.Context, jobs fenecdb.Collection, owner string) (fenecdb.Result, error) {
	return jobs.WhereRaw(fenecdb.Raw("run_at <= now()")).Order("run_at").Limit(1).Update(ctx,
		fenecdb.D("owner", owner, "run_at", fenecdb.Expr("now() + ?", 30000), "attempts", fenecdb.Inc(1)),
		fenecdb.Returning("id", "owner"))
}

// TestWaitIsAnsweredByAPut holds a claim on an empty queue and puts a job:
// the claim is answered with it.
func TestWaitIsAnsweredByAPut(t *testing.T) {
	db, api := server(t)
	mustQuery(t, db, jobsSchema)
	got := make(chan fenecdb.Result, 1)
	errc := make(chan error, 1)
	go func() {
		res, err := claim(context.Background(), db.Wait(10*time.Second).From("jobs"), "w1")
		got <- res
		errc <- err
	}()
	eventually(t, "the claim to be held", func() bool { return heldClaims(t, api) == 1 })
	mustQuery(t, db, "put jobs {payload: $1, run_at: now(), attempts: 0}", map[string]string{"to": "ada@example.com"})
	res, err := <-got, <-errc
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Rows) != 1 || res.Rows[0].Get("owner") != "w1" {
		t.Fatalf("got %+v", res)
	}
}

// TestWaitEndsEmpty: a held claim that takes nothing is answered no row at
// the end of its wait.
func TestWaitEndsEmpty(t *testing.T) {
	db, _ := server(t)
	mustQuery(t, db, jobsSchema)
	start := time.Now()
	res, err := claim(context.Background(), db.Wait(300*time.Millisecond).From("jobs"), "w1")
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Rows) != 0 || res.Rows == nil {
		t.Fatalf("got %+v, want no row", res)
	}
	if d := time.Since(start); d < 250*time.Millisecond {
		t.Fatalf("answered after %v, before the wait ended", d)
	}
}

// TestCancelFreesHeldClaim cancels a held claim's context: the server drops
// the claim, and a job put afterwards stays unclaimed.
func TestCancelFreesHeldClaim(t *testing.T) {
	db, api := server(t)
	mustQuery(t, db, jobsSchema)
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() {
		_, err := claim(ctx, db.Wait(30*time.Second).From("jobs"), "gone")
		errc <- err
	}()
	eventually(t, "the claim to be held", func() bool { return heldClaims(t, api) == 1 })
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Fatalf("got %v, want context.Canceled", err)
	}
	eventually(t, "the server to drop the claim", func() bool { return heldClaims(t, api) == 0 })
	mustQuery(t, db, "put jobs {payload: {}, run_at: now(), attempts: 0}")
	n, err := db.From("jobs").Where("owner", nil).Count(context.Background())
	if err != nil || n != 1 {
		t.Fatalf("unclaimed jobs: %d, %v; want 1", n, err)
	}
}

// TestServerErrors maps the server's refusals to *fenecdb.Error.
func TestServerErrors(t *testing.T) {
	db, _ := server(t)
	ctx := context.Background()
	mustQuery(t, db, jobsSchema)
	mustQuery(t, db, "put jobs {id: 1, attempts: 0}")
	keyed := db.IdempotencyKey("job-1-ack")
	mustQuery(t, keyed, "set jobs {attempts: 1} where id = 1")
	for _, tc := range []struct {
		name   string
		do     func() error
		status int
		code   string
	}{
		{"parse", func() error { _, err := db.Query(ctx, "get jobs where"); return err }, 400, fenecdb.CodeBadRequest},
		{"wait on a put", func() error {
			_, err := db.Wait(time.Second).Query(ctx, "put jobs {attempts: 0}")
			return err
		}, 400, fenecdb.CodeBadRequest},
		{"unknown collection", func() error { _, err := db.From("nope").Rows(ctx); return err }, 404, fenecdb.CodeNotFound},
		{"taken id", func() error { _, err := db.From("jobs").Insert(ctx, fenecdb.D("id", 1)); return err }, 409, fenecdb.CodeConflict},
		{"require", func() error {
			_, err := db.From("jobs").Where("id", 99).Delete(ctx, fenecdb.Require(1))
			return err
		}, 412, fenecdb.CodeUnmet},
		{"key reused", func() error { _, err := keyed.Query(ctx, "set jobs {attempts: 2} where id = 1"); return err }, 422, fenecdb.CodeKeyReused},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var fe *fenecdb.Error
			if err := tc.do(); !errors.As(err, &fe) || fe.Status != tc.status || fe.Code != tc.code || fe.Message == "" {
				t.Fatalf("got %v, want %d %s", err, tc.status, tc.code)
			}
		})
	}
	t.Run("batch at", func(t *testing.T) {
		before, err := db.From("jobs").Count(ctx)
		if err != nil {
			t.Fatal(err)
		}
		_, err = db.Batch(ctx,
			fenecdb.Statement{Query: "put jobs {attempts: 0}"},
			fenecdb.Statement{Query: "del jobs where id = $1 require 1", Params: []any{99}})
		var fe *fenecdb.Error
		if !errors.As(err, &fe) || fe.Status != 412 || fe.At != 1 {
			t.Fatalf("got %v, want 412 at statement 1", err)
		}
		if n, _ := db.From("jobs").Count(ctx); n != before {
			t.Fatalf("the refused batch left a trace: %d jobs, want %d", n, before)
		}
	})
}

// TestUnauthorized: a server with --token refuses a request without it.
func TestUnauthorized(t *testing.T) {
	_, api := server(t, "--token", "s3cret")
	url := api.Server
	var fe *fenecdb.Error
	if _, err := connect(t, url).Query(context.Background(), "get jobs"); !errors.As(err, &fe) || fe.Status != 401 || fe.Code != fenecdb.CodeUnauthorized {
		t.Fatalf("got %v, want 401", err)
	}
	db := connect(t, url, fenecdb.WithToken("s3cret"))
	mustQuery(t, db, jobsSchema)
}

// TestIdempotentReplay: a write retried under its key is answered the first
// answer, and writes nothing.
func TestIdempotentReplay(t *testing.T) {
	db, _ := server(t)
	ctx := context.Background()
	mustQuery(t, db, jobsSchema)
	mustQuery(t, db, "put jobs [{run_at: now(), attempts: 0}, {run_at: now(), attempts: 0}]")
	keyed := db.IdempotencyKey("claim-w1-1")
	first, err := claim(ctx, keyed.From("jobs"), "w1")
	if err != nil {
		t.Fatal(err)
	}
	again, err := claim(ctx, keyed.From("jobs"), "w1")
	if err != nil {
		t.Fatal(err)
	}
	if first.Replayed || !again.Replayed || first.Seq == 0 {
		t.Fatalf("first %+v, again %+v", first, again)
	}
	if a, b := first.Rows[0].Get("id"), again.Rows[0].Get("id"); a != b {
		t.Fatalf("replayed job %v, first took %v", b, a)
	}
	if n, _ := db.From("jobs").Where("owner", nil).Count(ctx); n != 1 {
		t.Fatalf("the replay claimed again: %d jobs left unclaimed, want 1", n)
	}
}

// TestForbidden: a JWT whose policy grants only reads is refused a write.
func TestForbidden(t *testing.T) {
	const secret = "a-secret-of-thirty-two-bytes-or-more"
	policy := filepath.Join(t.TempDir(), "policy")
	if err := os.WriteFile(policy, []byte("jobs read\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, api := server(t, "--token", "admin", "--jwt-secret", secret, "--policy", policy)
	mustQuery(t, connect(t, api.Server, fenecdb.WithToken("admin")), jobsSchema)
	reader := connect(t, api.Server, fenecdb.WithToken(hs256(t, secret, map[string]any{"sub": "r1", "exp": time.Now().Add(time.Hour).Unix()})))
	if _, err := reader.From("jobs").Rows(context.Background()); err != nil {
		t.Fatalf("a read: %v", err)
	}
	_, err := reader.From("jobs").Insert(context.Background(), fenecdb.D("attempts", 0))
	var fe *fenecdb.Error
	if !errors.As(err, &fe) || fe.Status != 403 || fe.Code != fenecdb.CodeForbidden {
		t.Fatalf("got %v, want 403", err)
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
