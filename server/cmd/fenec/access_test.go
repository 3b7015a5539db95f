package main

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fenecdb/fenec/server/httpapi/apitest"
)

// accessPolicy is docs/access.md's worker policy.
const accessPolicy = `# Workers take their own queue's jobs and see only the jobs they hold.
jobs read where owner = $jwt.sub for worker
jobs update(owner, run_at, attempts) where queue = $jwt.queue and run_at <= now() and new.owner = $jwt.sub and new.attempts = attempts + 1 for worker
jobs update(run_at) where owner = $jwt.sub for worker
jobs update(owner, run_at, error) where owner = $jwt.sub and new.owner is null for worker
jobs delete where owner = $jwt.sub for worker

# The application enqueues, and reads nothing back.
jobs insert for producer
`

const accessSecret = "0123456789abcdef0123456789abcdef"

// mintToken runs `fenec token` with args.
func mintToken(t *testing.T, args ...string) string {
	t.Helper()
	out, err := exec.Command(bin, append([]string{"token"}, args...)...).Output()
	if err != nil {
		t.Fatalf("fenec token %v: %v", args, err)
	}
	return strings.TrimSpace(string(out))
}

func writeFile(t *testing.T, path, data string) {
	t.Helper()
	if err := os.WriteFile(path+".tmp", []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(path+".tmp", path); err != nil {
		t.Fatal(err)
	}
}

func octJWKS(t *testing.T, keys map[string]string) string {
	t.Helper()
	var ks []any
	for kid, secret := range keys {
		ks = append(ks, map[string]string{"kty": "oct", "kid": kid, "k": base64.RawURLEncoding.EncodeToString([]byte(secret))})
	}
	b, err := json.Marshal(map[string]any{"keys": ks})
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// body is an answer's body without its closing newline.
func body(r *apitest.Response) string { return strings.TrimSpace(string(r.Body)) }

// as returns a client sending token.
func as(c *apitest.Client, token string) *apitest.Client {
	return &apitest.Client{T: c.T, Base: c.Base, Token: token}
}

// refused sends q and checks the refusal's status and message.
func refused(t *testing.T, c *apitest.Client, q string, status int, msg string) {
	t.Helper()
	r, err := c.Query(q)
	if err != nil {
		t.Fatal(err)
	}
	var e struct{ Error string }
	_ = json.Unmarshal(r.Body, &e)
	if r.Status != status || !strings.Contains(e.Error, msg) {
		t.Errorf("%s: %d %s, want %d containing %q", q, r.Status, r.Body, status, msg)
	}
}

// startWithPolicy starts a server holding JWTs signed with accessSecret to
// accessPolicy, and returns a client with the full-access token "admin".
func startWithPolicy(t *testing.T, args ...string) *apitest.Client {
	t.Helper()
	policy := filepath.Join(t.TempDir(), "policy.txt")
	writeFile(t, policy, accessPolicy)
	_, admin := start(t, append([]string{"--file", ":memory:", "--token", "admin", "--jwt-secret", accessSecret, "--policy", policy}, args...)...)
	admin.Token = "admin"
	return admin
}

// TestWorkerToken is docs/access.md's worker, over HTTP against a real
// `fenec serve`: a worker token of the mail queue takes only mail jobs,
// changes nothing a claim should not, claims for no one else, keeps the
// attempts count, is answered only what it may read, and acks only its
// own jobs.
func TestWorkerToken(t *testing.T) {
	t.Parallel()
	admin := startWithPolicy(t, "--clock", "manual")
	tok := func(claims string) string { return mintToken(t, "--secret", accessSecret, "--claims", claims) }
	w1 := as(admin, tok(`{"sub":"w1","role":"worker","queue":"mail"}`))
	w2 := as(admin, tok(`{"sub":"w2","role":"worker","queue":"sms"}`))
	app := as(admin, tok(`{"sub":"app","role":"producer"}`))

	admin.MustQuery(`create collection jobs (queue text, payload json, run_at timestamp @sorted, owner text, attempts int, error text)`)
	admin.MustQuery(`create collection secrets (v text)`)
	app.MustQuery(`put jobs [{queue: "mail", payload: {"to": "ada@example.com"}, run_at: now(), attempts: 0}, {queue: "sms", payload: {"to": "+15550100"}, run_at: now(), attempts: 0}, {queue: "mail", payload: {"to": "bo@example.com"}, run_at: now(), attempts: 0}]`)
	all := func() string { return body(admin.MustQuery(`get jobs`)) }
	before := all()

	// A write the policy does not admit is refused, and writes nothing:
	// a field no update rule lists before any row is read, a write that
	// breaks the rule that let it pick the row naming the rule. A row no
	// update rule lets it pick is not there.
	refused(t, w1, `set jobs {payload: {"to": "eve@example.com"}} where id = 1`, 403, "position 1: no policy rule lets this token change payload of jobs")
	refused(t, w1, `set jobs {owner: "w1", run_at: now() + 30000, attempts: attempts + 1, payload: {"to": "eve@example.com"}} where run_at <= now() order run_at limit 10`, 403, "no policy rule lets this token change payload of jobs")
	refused(t, w1, `set jobs {owner: "w1", run_at: now() + 30000, attempts: attempts + 1, error: "x"} where run_at <= now() order run_at limit 10`, 403, "no one policy rule lets this token change owner, run_at, attempts, error of jobs together")
	refused(t, w1, `set jobs {owner: "w2", run_at: now() + 30000, attempts: attempts + 1} where run_at <= now() order run_at limit 10`, 403, "document 1 as written breaks policy line 3: jobs update(owner, run_at, attempts) where")
	refused(t, w1, `set jobs {owner: "w1", run_at: now() + 30000, attempts: 0} where run_at <= now() order run_at limit 10`, 403, "document 1 as written breaks policy line 3: jobs update(owner, run_at, attempts) where")
	if got := body(w1.MustQuery(`set jobs {owner: "w1", run_at: now() + 30000, attempts: 0} where id = 2`)); got != `{"affected":0}` {
		t.Errorf("a write to a job of another queue: %s", got)
	}
	if after := all(); after != before {
		t.Fatalf("refused claims wrote:\n%s\n%s", before, after)
	}

	// The claim takes the mail jobs only, and is answered them.
	if got := body(w1.MustQuery(`set jobs {owner: "w1", run_at: now() + 30000, attempts: attempts + 1} where run_at <= now() order run_at limit 10 returning id, queue, owner`)); got != `[{"id":1,"queue":"mail","owner":"w1"},{"id":3,"queue":"mail","owner":"w1"}]` {
		t.Fatalf("claim: %s", got)
	}
	if got := body(w1.MustQuery(`get jobs select id`)); got != `[{"id":1},{"id":3}]` {
		t.Errorf("w1 reads %s", got)
	}
	// returning * answers only what the read rule admits: a job given
	// back is no longer w1's to read, though the write happens.
	if got := body(w1.MustQuery(`set jobs {owner: null, error: "smtp timeout", run_at: now() + 1000} where id = 1 and owner = "w1" returning *`)); got != `[]` {
		t.Errorf("returning past the read rule: %s", got)
	}
	if got := body(admin.MustQuery(`get jobs select owner, error where id = 1`)); got != `[{"owner":null,"error":"smtp timeout"}]` {
		t.Errorf("the fail did not write: %s", got)
	}
	// w2 claims the sms job; w1 cannot ack it.
	if got := body(w2.MustQuery(`set jobs {owner: "w2", run_at: now() + 30000, attempts: attempts + 1} where run_at <= now() order run_at limit 10 returning id`)); got != `[{"id":2}]` {
		t.Fatalf("w2's claim: %s", got)
	}
	refused(t, w1, `del jobs where id = 2 require 1`, 412, "`del jobs` wrote 0 rows, and requires 1")
	refused(t, w1, `set jobs {run_at: now() + 60000} where id = 2 require 1`, 412, "wrote 0 rows")
	if got := body(w1.MustQuery(`del jobs where id = 3 require 1`)); got != `{"affected":1}` {
		t.Errorf("w1's own ack: %s", got)
	}
	if got := body(admin.MustQuery(`get jobs select id, owner`)); got != `[{"id":1,"owner":null},{"id":2,"owner":"w2"}]` {
		t.Errorf("jobs left: %s", got)
	}

	refused(t, w1, `get secrets`, 404, "no collection secrets")
	// A claim of a kind the policy does not compare (a numeric sub, a
	// list queue) is as a missing claim: the collection is not there.
	for _, claims := range []string{`{"sub":7,"role":"worker","queue":"mail"}`, `{"role":"worker","queue":"mail"}`, `{"sub":["w1"],"role":"worker","queue":"mail"}`} {
		refused(t, as(admin, tok(claims)), `get jobs`, 404, "no collection jobs")
	}
	refused(t, app, `get jobs`, 404, "no collection jobs")
	refused(t, w1, `put jobs {queue: "mail"}`, 403, "no policy rule lets this token insert into jobs")
	refused(t, w1, `create collection x (a int)`, 403, "a token held to a policy changes no schema")
	refused(t, w1, `drop collection jobs`, 403, "a token held to a policy changes no schema")

	// The operator's routes: /collections shows a worker only what it may
	// read, and the clock is not its to move.
	r, err := w2.Do("GET", "/collections", nil, nil)
	var cs struct {
		Collections []struct {
			Name      string
			Documents int
		}
	}
	if err != nil {
		t.Fatal(err)
	}
	r.JSON(t, &cs)
	if len(cs.Collections) != 1 || cs.Collections[0].Name != "jobs" || cs.Collections[0].Documents != 1 {
		t.Errorf("w2's /collections: %s", body(r))
	}
	if r, err := w1.Do("POST", "/_clock", map[string]any{"advance_ms": 60000}, nil); err != nil || r.Status != 403 {
		t.Errorf("w1 moved the clock: %v %v", err, r)
	}
	// Nor is the file its to copy: it holds what the policy hides.
	if r, err := w1.Do("GET", "/_backup", nil, nil); err != nil || r.Status != 403 || r.Code() != "forbidden" {
		t.Errorf("w1's GET /_backup: %v %v", err, r)
	}
}

// A held claim runs under its token's scope: w1's waits for a mail job,
// and the sms job put meanwhile is not one.
func TestWorkerTokenHeldClaim(t *testing.T) {
	t.Parallel()
	admin := startWithPolicy(t)
	w1 := as(admin, mintToken(t, "--secret", accessSecret, "--claims", `{"sub":"w1","role":"worker","queue":"mail"}`))
	admin.MustQuery(`create collection jobs (queue text, payload json, run_at timestamp @sorted, owner text, attempts int, error text)`)

	answered := make(chan *apitest.Response, 1)
	go func() {
		r, err := w1.Do("POST", "/query", map[string]any{"query": `set jobs {owner: "w1", run_at: now() + 30000, attempts: attempts + 1} where run_at <= now() order run_at limit 1 returning id, queue`, "params": []any{}}, map[string]string{"Fenec-Wait": "10000"})
		if err != nil {
			t.Error(err)
		}
		answered <- r
	}()
	awaitHeld(t, admin, 1)
	admin.MustQuery(`put jobs {queue: "sms", run_at: now(), attempts: 0}`)
	// A claim that took the sms job would be answered within these 200 ms
	// (no event to wait for when nothing should happen).
	time.Sleep(200 * time.Millisecond)
	select {
	case r := <-answered:
		t.Fatalf("the held claim took an sms job: %d %s", r.Status, r.Body)
	default:
	}
	admin.MustQuery(`put jobs {queue: "mail", run_at: now(), attempts: 0}`)
	select {
	case r := <-answered:
		if r == nil || body(r) != `[{"id":2,"queue":"mail"}]` {
			t.Fatalf("held claim: %v", r)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the held claim was not woken by a mail job")
	}
}

// A held claim whose token expires while it waits takes nothing after the
// expiry: woken by a job, it is answered 401, and the job stays ready.
func TestHeldClaimOutlivesItsToken(t *testing.T) {
	t.Parallel()
	admin := startWithPolicy(t, "--clock", "manual")
	// The manual clock starts at 2026-05-03T09:20:00Z (1777800000): the
	// token lasts a minute of it.
	w1 := as(admin, mintToken(t, "--secret", accessSecret, "--claims", `{"sub":"w1","role":"worker","queue":"mail","exp":1777800060}`))
	admin.MustQuery(`create collection jobs (queue text, payload json, run_at timestamp @sorted, owner text, attempts int, error text)`)

	answered := make(chan *apitest.Response, 1)
	go func() {
		r, err := w1.Do("POST", "/query", map[string]any{"query": `set jobs {owner: "w1", run_at: now() + 30000, attempts: attempts + 1} where run_at <= now() order run_at limit 1 returning id`, "params": []any{}}, map[string]string{"Fenec-Wait": "10000"})
		if err != nil {
			t.Error(err)
		}
		answered <- r
	}()
	awaitHeld(t, admin, 1)
	if r, _ := admin.Do("POST", "/_clock", map[string]any{"advance_ms": 120000}, nil); r.Status != 200 {
		t.Fatalf("moving the clock: %d %s", r.Status, r.Body)
	}
	admin.MustQuery(`put jobs {queue: "mail", run_at: now(), attempts: 0}`)
	select {
	case r := <-answered:
		if r == nil || r.Status != 401 || r.Code() != "unauthorized" || !strings.Contains(body(r), "token expired (exp 2026-05-03T09:21:00.000Z) before the statement ran") {
			t.Fatalf("held claim after its token expired: %v", r)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the held claim was not answered when the job came")
	}
	if got := body(admin.MustQuery(`get jobs select owner, attempts`)); got != `[{"owner":null,"attempts":0}]` {
		t.Errorf("the job after the expired claim: %s", got)
	}
}

func unauthorized(t *testing.T, c *apitest.Client, msg string) time.Duration {
	t.Helper()
	began := time.Now()
	r, err := c.Query(`get jobs`)
	if err != nil {
		t.Fatal(err)
	}
	took := time.Since(began)
	var e struct{ Error, Code string }
	_ = json.Unmarshal(r.Body, &e)
	if r.Status != 401 || e.Code != "unauthorized" || !strings.HasPrefix(e.Error, msg) || r.Header.Get("WWW-Authenticate") == "" {
		t.Errorf("%d %s %v, want 401 %q", r.Status, r.Body, r.Header, msg)
	}
	return took
}

// Bad tokens are 401s that say what is wrong, each answered later than
// the one before from the same address; a good token never waits.
func TestTokenRefusals(t *testing.T) {
	t.Parallel()
	admin := startWithPolicy(t, "--clock", "manual")
	admin.MustQuery(`create collection jobs (queue text, run_at timestamp @sorted, owner text, attempts int, error text)`)
	// Every token is minted first: the waits measured below run from each
	// refusal, and minting between them would eat into them.
	w1 := mintToken(t, "--secret", accessSecret, "--claims", `{"sub":"w1","role":"worker","queue":"mail"}`)
	// The manual clock starts at 2026-05-03T09:20:00Z, so an exp a minute
	// before it has passed.
	expired := mintToken(t, "--secret", accessSecret, "--claims", `{"sub":"w1","exp":1777799940}`)
	wrongKey := mintToken(t, "--secret", "another secret of thirty-two bytes!", "--claims", `{"sub":"w1"}`)
	parts := strings.Split(w1, ".")
	none := base64.RawURLEncoding.EncodeToString([]byte(`{"alg":"none","typ":"JWT"}`)) + "." + parts[1] + "."

	if took := unauthorized(t, as(admin, expired), "token expired (exp 2026-05-03T09:19:00Z)"); took < 90*time.Millisecond {
		t.Errorf("the first bad token was answered in %v, not held 100 ms", took)
	}
	if took := unauthorized(t, as(admin, wrongKey), "token signature is invalid"); took < 190*time.Millisecond {
		t.Errorf("the second bad token was answered in %v, not held 200 ms", took)
	}
	if took := unauthorized(t, as(admin, none), `token alg "none" is not allowed`); took < 390*time.Millisecond {
		t.Errorf("the third bad token was answered in %v, not held 400 ms", took)
	}
	// A good token from the same address is answered at once: held as a
	// fourth refusal would be, it would wait 800 ms (the bound is that,
	// not a latency a loaded machine can exceed).
	began := time.Now()
	as(admin, w1).MustQuery(`get jobs`)
	if took := time.Since(began); took >= 800*time.Millisecond {
		t.Errorf("a good token after three refusals took %v: it waited behind them", took)
	}
	unauthorized(t, &apitest.Client{T: t, Base: admin.Base}, "missing bearer token")
	// Expiry reads the server's clock: moved past exp, the token is refused.
	var c struct{ Exp int64 }
	payload, _ := base64.RawURLEncoding.DecodeString(parts[1])
	json.Unmarshal(payload, &c)
	admin.MustQuery(`get jobs`)
	if r, _ := admin.Do("POST", "/_clock", map[string]any{"set_ms": c.Exp*1000 + 1000}, nil); r.Status != 200 {
		t.Fatalf("moving the clock: %d %s", r.Status, r.Body)
	}
	unauthorized(t, as(admin, w1), "token expired")
}

// Keys rotate without a restart: add a key, sign with it, remove the old.
func TestJWKSRotationOverHTTP(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	policy, keys := filepath.Join(dir, "policy.txt"), filepath.Join(dir, "jwks.json")
	writeFile(t, policy, accessPolicy)
	const old, next = "old secret, thirty-two bytes long", "new secret, thirty-two bytes long"
	writeFile(t, keys, octJWKS(t, map[string]string{"k1": old}))
	_, admin := start(t, "--file", ":memory:", "--token", "admin", "--jwt-keys", keys, "--policy", policy)
	admin.Token = "admin"
	admin.MustQuery(`create collection jobs (queue text, run_at timestamp @sorted, owner text, attempts int, error text)`)
	claims := `{"sub":"w1","role":"worker","queue":"mail"}`
	oldTok := as(admin, mintToken(t, "--secret", old, "--kid", "k1", "--claims", claims))
	newTok := as(admin, mintToken(t, "--secret", next, "--kid", "k2", "--claims", claims))

	oldTok.MustQuery(`get jobs`)
	unauthorized(t, newTok, `token kid "k2" is not a known key`)
	writeFile(t, keys, octJWKS(t, map[string]string{"k1": old, "k2": next}))
	// The file is looked at once a second at most, by the wall clock (a
	// manual server clock must not stop rotation: auth/jwks.go): the
	// second lets that interval lapse, the behaviour under test.
	time.Sleep(1100 * time.Millisecond)
	newTok.MustQuery(`get jobs`)
	oldTok.MustQuery(`get jobs`)
	writeFile(t, keys, octJWKS(t, map[string]string{"k2": next}))
	time.Sleep(1100 * time.Millisecond) // as above
	unauthorized(t, oldTok, `token kid "k1" is not a known key`)
	newTok.MustQuery(`get jobs`)
}

// The server does not start on a bad policy, or with JWTs and no policy
// (or the reverse), and says why.
func TestAccessFlagsRefused(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	bad := filepath.Join(dir, "policy.txt")
	writeFile(t, bad, "# workers\njobs read\njobs reed\n")
	good := filepath.Join(dir, "good.txt")
	writeFile(t, good, accessPolicy)
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--jwt-secret", accessSecret, "--policy", bad}, bad + ` line 3, column 6: expected a grant (read, insert, update, update(...), delete, write), found "reed"`},
		{[]string{"--jwt-secret", accessSecret}, "--jwt-secret and --jwt-keys need --policy"},
		{[]string{"--policy", good}, "--policy needs --jwt-secret or --jwt-keys"},
		{[]string{"--jwt-secret", "short", "--policy", good}, "--jwt-secret has 5 bytes; HS256 needs at least 32"},
		{[]string{"--jwt-keys", filepath.Join(dir, "none.json"), "--policy", good}, "no such file"},
	} {
		cmd := exec.Command(bin, append([]string{"serve", "--file", ":memory:", "--http", "127.0.0.1:0"}, c.args...)...)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		done := make(chan error, 1)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		go func() { done <- cmd.Wait() }()
		select {
		case err := <-done:
			if err == nil || !strings.Contains(stderr.String(), c.want) {
				t.Errorf("%v: %v %q, want %q", c.args, err, stderr.String(), c.want)
			}
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
			t.Errorf("%v: the server started", c.args)
		}
	}
}

// TestHiddenRowsOverHTTP is the oracle of hidden rows against a real `fenec
// serve`: a mail worker guessing an sms job's phone number is answered
// the same whether the guess is right or wrong, whatever the statement.
func TestHiddenRowsOverHTTP(t *testing.T) {
	t.Parallel()
	admin := startWithPolicy(t)
	w1 := as(admin, mintToken(t, "--secret", accessSecret, "--claims", `{"sub":"w1","role":"worker","queue":"mail"}`))
	admin.MustQuery(`create collection jobs (queue text, payload json, dest text @hash, run_at timestamp @sorted, owner text, attempts int, error text)`)
	admin.MustQuery(`put jobs [{queue: "mail", payload: {"to": "ada@example.com"}, dest: "ada@example.com", run_at: now(), owner: "w1", attempts: 0}, {queue: "sms", payload: {"to": "+15550100"}, dest: "+15550100", run_at: now(), owner: "w2", attempts: 0}]`)
	before := body(admin.MustQuery(`get jobs`))
	guess := `case when payload.to = $1 then 1/0 = 1 else false end`
	for _, q := range []string{
		`get jobs where ` + guess,
		`get jobs count where ` + guess,
		`explain get jobs where ` + guess,
		`explain get jobs where dest = $1`,
		`set jobs {run_at: now() + 1000} where ` + guess,
		`set jobs {owner: "w1", run_at: now() + 30000, attempts: attempts + 1} where ` + guess + ` order run_at limit 10 returning id`,
		`del jobs where ` + guess,
	} {
		var answers []string
		for _, g := range []string{"+15550100", "+15550199"} {
			r, err := w1.Do("POST", "/query", map[string]any{"query": q, "params": []any{g}}, nil)
			if err != nil {
				t.Fatal(err)
			}
			answers = append(answers, fmt.Sprintf("%d %s", r.Status, body(r)))
		}
		if answers[0] != answers[1] {
			t.Errorf("%s answers by the hidden row:\nright guess: %s\nwrong guess: %s", q, answers[0], answers[1])
		}
	}
	if after := body(admin.MustQuery(`get jobs`)); after != before {
		t.Errorf("the guesses wrote:\n%s\n%s", before, after)
	}
}
