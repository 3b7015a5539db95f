package engine

import (
	"context"
	"strings"
	"testing"

	"github.com/fenecdb/fenec/server/fenecql"
)

func rule(t *testing.T, name, coll string, g Grant, fields []string, filter string) Rule {
	t.Helper()
	r := Rule{Name: name, Text: filter, Coll: coll, Grants: g, Fields: fields}
	if filter != "" {
		e, err := fenecql.ParseExpr(filter)
		if err != nil {
			t.Fatal(err)
		}
		r.Filter = e
	}
	return r
}

// TestWorkerScope is the queue page's worker token: it takes its own
// queue's jobs, changes nothing else of them, and reads only its own.
func TestWorkerScope(t *testing.T) {
	db, _ := openMem(t)
	mustExec(t, db, `create collection jobs (queue text, payload json, run_at timestamp @sorted, owner text, attempts int, error text)`)
	mustExec(t, db, `create collection secrets (v text)`)
	mustExec(t, db, `put jobs [{queue: "mail", run_at: now() - 3, attempts: 0}, {queue: "sms", run_at: now() - 2, attempts: 0}, {queue: "mail", run_at: now() - 1, attempts: 0}, {queue: "mail", run_at: now() + 60000, attempts: 0}]`)
	scope := &Scope{
		Claims: map[string]fenecql.Value{"sub": fenecql.Text("w1"), "queue": fenecql.Text("mail")},
		Rules: []Rule{
			rule(t, "policy line 1", "jobs", GrantRead, nil, `owner = $jwt.sub`),
			rule(t, "policy line 2", "jobs", GrantUpdate, []string{"owner", "run_at", "attempts"},
				`queue = $jwt.queue and run_at <= now() and new.owner = $jwt.sub and new.attempts = attempts + 1`),
			rule(t, "policy line 3", "jobs", GrantDelete, nil, `owner = $jwt.sub`),
		},
	}
	run := func(q string, params ...any) (*Result, error) {
		rs, err := db.Run(context.Background(), []Parsed{{Stmt: mustParse(t, q), Params: vals(params...), Scope: scope}}, RunOptions{})
		if err != nil {
			return nil, err
		}
		return rs[0], nil
	}
	refused := func(q string, code fenecql.Code, msg string) {
		t.Helper()
		_, err := run(q)
		if fenecql.CodeOf(err) != code || !strings.Contains(err.Error(), msg) {
			t.Errorf("%s: %v, want %s containing %q", q, err, code, msg)
		}
	}
	before := answer(mustExec(t, db, `get jobs`))
	// A field no update rule lists is refused before any row is read; a
	// write that breaks the transition of the rule that let it pick the
	// row is refused naming the rule, and writes nothing.
	refused(`set jobs {owner: "w1", run_at: now() + 30000, attempts: attempts + 1, payload: {"x": 1}} where run_at <= now() order run_at limit 10`, fenecql.CodeForbidden, "no policy rule lets this token change payload of jobs")
	refused(`set jobs {error: "x"} where id = 1`, fenecql.CodeForbidden, "no policy rule lets this token change error of jobs")
	refused(`set jobs {owner: "w2", run_at: now() + 30000, attempts: attempts + 1} where run_at <= now() order run_at limit 10`, fenecql.CodeForbidden, "document 1 as written breaks policy line 2")
	refused(`set jobs {owner: "w1", run_at: now() + 30000, attempts: 0} where run_at <= now() order run_at limit 10`, fenecql.CodeForbidden, "document 1 as written breaks policy line 2")
	// Job 4 is not ready: no rule lets this token pick it, so a write to
	// it finds nothing and says nothing, whatever it would write.
	if r, err := run(`set jobs {owner: "w2", run_at: now(), attempts: 0} where id = 4`); err != nil || r.Affected != 0 {
		t.Fatalf("a row the token may not change: %v %v, want 0 rows", err, r)
	}
	refused(`create collection x (a int)`, fenecql.CodeForbidden, "changes no schema")
	refused(`get secrets`, fenecql.CodeUnknown, "no collection secrets")
	refused(`put jobs {queue: "mail"}`, fenecql.CodeForbidden, "no policy rule lets this token insert into jobs")
	if after := answer(mustExec(t, db, `get jobs`)); after != before {
		t.Fatalf("refused claims wrote:\n%s\n%s", before, after)
	}
	r, err := run(`set jobs {owner: "w1", run_at: now() + 30000, attempts: attempts + 1} where run_at <= now() order run_at limit 10 returning id, queue, owner`)
	if err != nil {
		t.Fatal(err)
	}
	if got := answer(r); got != `[{"id":1,"queue":"mail","owner":"w1"},{"id":3,"queue":"mail","owner":"w1"}]` {
		t.Fatalf("claim: %s", got)
	}
	r, err = run(`get jobs select id`)
	if err != nil || answer(r) != `[{"id":1},{"id":3}]` {
		t.Fatalf("reads: %v %v", err, r)
	}
	// Another worker's job cannot be acked: it is not among the rows the
	// token may delete.
	mustExec(t, db, `set jobs {owner: "w2"} where id = 2`)
	refused(`del jobs where id = 2 require 1`, fenecql.CodeUnmet, "wrote 0 rows")
	if r, err := run(`del jobs where id = 1 require 1`); err != nil || r.Affected != 1 {
		t.Fatalf("own ack: %v", err)
	}
	// returning answers only what the read rule admits.
	scope.Rules[1] = rule(t, "policy line 2", "jobs", GrantUpdate, []string{"owner"}, `queue = $jwt.queue`)
	r, err = run(`set jobs {owner: null} where id = 3 returning *`)
	if err != nil || answer(r) != `[]` {
		t.Fatalf("returning past the read rule: %v %s", err, answer(r))
	}
}

func mustParse(t *testing.T, q string) fenecql.Stmt {
	t.Helper()
	s, err := fenecql.Parse(q)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// scoped runs statements for one token as one request.
func scoped(t *testing.T, db *DB, scope *Scope, params []fenecql.Value, qs ...string) string {
	t.Helper()
	ps := make([]Parsed, len(qs))
	for i, q := range qs {
		ps[i] = Parsed{Stmt: mustParse(t, q), Params: params, Scope: scope}
	}
	rs, err := db.Run(context.Background(), ps, RunOptions{})
	if err != nil {
		return "error " + fenecql.CodeOf(err).String() + ": " + err.Error()
	}
	var out []string
	for _, r := range rs {
		out = append(out, answer(r))
	}
	return strings.Join(out, " ")
}

// TestScopeHidesRows is the oracle of hidden rows: a mail worker guesses a
// hidden sms job's phone number through errors, counts and explain. Every
// statement must answer the same whether the guess is right or wrong, for
// read rules and for write rules alike.
func TestScopeHidesRows(t *testing.T) {
	db, _ := openMem(t)
	mustExec(t, db, `create collection jobs (queue text, payload json, dest text @hash, key text @unique, n int, attempts int)`)
	mustExec(t, db, `put jobs [{queue: "mail", payload: {"to": "ada@example.com"}, dest: "ada@example.com", key: "k1", n: 1, attempts: 0}, {queue: "sms", payload: {"to": "+15550100"}, dest: "+15550100", key: "k2", n: 2, attempts: 0}, {queue: "mail", payload: {"to": "bo@example.com"}, dest: "bo@example.com", key: "k3", n: 3, attempts: 0}]`)
	claims := map[string]fenecql.Value{"sub": fenecql.Text("w1"), "queue": fenecql.Text("mail")}
	mine := `queue = $jwt.queue`
	scopes := map[string]*Scope{
		"read and write rules": {Claims: claims, Rules: []Rule{
			rule(t, "policy line 1", "jobs", GrantRead|GrantInsert, nil, mine),
			rule(t, "policy line 2", "jobs", GrantUpdate, []string{"attempts", "n"}, mine+` and new.queue = queue`),
			rule(t, "policy line 3", "jobs", GrantDelete, nil, mine),
		}},
		// Reads every row's queue, writes only its own: the set and del
		// filters run past the write rules alone.
		"write rules": {Claims: claims, Rules: []Rule{
			rule(t, "policy line 1", "jobs", GrantUpdate, []string{"attempts"}, mine),
			rule(t, "policy line 2", "jobs", GrantDelete, nil, mine),
			rule(t, "policy line 3", "jobs", GrantRead, nil, `n <> 2`),
			rule(t, "policy line 4", "jobs", GrantInsert, nil, ""),
		}},
		// A transition a hidden row's write would break: the refusal
		// (403) comes only of rows the token may change.
		"transition": {Claims: claims, Rules: []Rule{
			rule(t, "policy line 1", "jobs", GrantRead, nil, mine),
			rule(t, "policy line 2", "jobs", GrantUpdate, []string{"n", "attempts"}, mine+` and new.n < 10`),
		}},
	}
	guess := `case when payload.to = $1 then 1/0 = 1 else false end`
	typed := `case when payload.to = $1 then payload.to < 5 else false end`
	statements := [][]string{
		{`get jobs where ` + guess},
		{`get jobs where ` + typed},
		{`get jobs count where ` + guess},
		{`get jobs select id where dest = $1`},
		{`get jobs where dest = $1 or ` + guess},
		{`get jobs select id order case when payload.to = $1 then 1/0 else 1 end`},
		{`get jobs where dest = $1 limit 1 require 1`},
		{`explain get jobs where dest = $1`},
		{`explain get jobs where ` + guess},
		{`explain get jobs where dest in [$1, "x"] order n limit 5`},
		{`set jobs {attempts: attempts + 1} where ` + guess},
		{`set jobs {attempts: attempts + 1} where ` + typed + ` returning id`},
		{`set jobs {attempts: case when payload.to = $1 then 1/0 else 1 end}`},
		{`set jobs {attempts: attempts + 1} where dest = $1 returning id`},
		{`explain set jobs {attempts: 1} where dest = $1`},
		{`del jobs where ` + guess},
		{`del jobs where dest = $1 returning id`},
		{`explain del jobs where dest = $1`},
		{`get jobs select id`, `set jobs {attempts: 1} where ` + guess, `del jobs where ` + typed},
		{`put jobs {queue: "mail", key: "k2"}`},
		// Refusals of a set: a field no rule lists, and a write that
		// breaks a rule's transition.
		{`set jobs {payload: {"to": $1}} where dest = $1`},
		{`set jobs {n: case when payload.to = $1 then 100 else n end}`},
		{`set jobs {n: 100} where dest = $1 or id = 1`},
		{`set jobs {n: case when payload.to = $1 then 100 else n end, attempts: 1} where ` + typed},
	}
	right, wrong := vals("+15550100"), vals("+15550199")
	for name, scope := range scopes {
		for _, qs := range statements {
			before := answer(mustExec(t, db, `get jobs`))
			a, b := scoped(t, db, scope, right, qs...), scoped(t, db, scope, wrong, qs...)
			if a != b {
				t.Errorf("%s: %q answers by the hidden row:\nright guess: %s\nwrong guess: %s", name, qs, a, b)
			}
			if strings.Contains(a, "document 2") {
				t.Errorf("%s: %q names the hidden document: %s", name, qs, a)
			}
			// Put the rows back for the next statement.
			mustExec(t, db, `del jobs`)
			if _, err := db.Exec(context.Background(), `put jobs $1`, []fenecql.Value{mustJSON(t, before)}); err != nil {
				t.Fatal(err)
			}
		}
	}
	// explain counts only the rows the token may see.
	if got := scoped(t, db, scopes["read and write rules"], nil, `explain get jobs`); !strings.HasPrefix(got, `[{"rows_read":2,`) {
		t.Errorf("explain over a scan: %s, want rows_read 2", got)
	}
	// The token with full access still gets the holder's id.
	if _, err := db.Exec(context.Background(), `put jobs {key: "k2"}`, nil); err == nil || !strings.Contains(err.Error(), "taken by document 2") {
		t.Errorf("full access: %v", err)
	}
}

func mustJSON(t *testing.T, s string) fenecql.Value {
	t.Helper()
	v, err := fenecql.ParseJSON([]byte(s))
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// TestSeveralUpdateRules is docs/access.md's worker policy, several update
// rules for one grant: a set runs under the rules that list every field
// it names, and picks the rows one of them admits. A worker that still
// holds a lapsed job of another queue claims its own queue's jobs past it
// (only line 3 lets a claim change attempts); rules widen each other.
func TestSeveralUpdateRules(t *testing.T) {
	for _, schema := range []string{
		`create collection jobs (queue text, payload json, run_at timestamp @sorted, owner text, attempts int, error text)`,
		// With owner indexed the planner could walk one rule's terms:
		// every rule must still widen the pick.
		`create collection jobs (queue text @hash, payload json, run_at timestamp @sorted, owner text @hash, attempts int, error text)`,
	} {
		db, _ := openMem(t)
		mustExec(t, db, schema)
		mustExec(t, db, `put jobs [{id: 1, queue: "sms", run_at: now() - 9000, owner: "w1", attempts: 3}, {id: 2, queue: "mail", run_at: now() - 5000, attempts: 0}, {id: 3, queue: "mail", run_at: now() - 4000, attempts: 1}, {id: 4, queue: "sms", run_at: now() - 3000, attempts: 0}, {id: 5, queue: "mail", run_at: now() + 60000, owner: "w1", attempts: 1}]`)
		scope := &Scope{
			Claims: map[string]fenecql.Value{"sub": fenecql.Text("w1"), "queue": fenecql.Text("mail")},
			Rules: []Rule{
				rule(t, "policy line 2", "jobs", GrantRead, nil, `owner = $jwt.sub`),
				rule(t, "policy line 3", "jobs", GrantUpdate, []string{"owner", "run_at", "attempts"}, `queue = $jwt.queue and run_at <= now() and new.owner = $jwt.sub and new.attempts = attempts + 1`),
				rule(t, "policy line 4", "jobs", GrantUpdate, []string{"run_at"}, `owner = $jwt.sub`),
				rule(t, "policy line 5", "jobs", GrantUpdate, []string{"owner", "run_at", "error"}, `owner = $jwt.sub and new.owner is null`),
				rule(t, "policy line 6", "jobs", GrantDelete, nil, `owner = $jwt.sub`),
			},
		}
		run := func(q string) string { return scoped(t, db, scope, nil, q) }
		claim := `set jobs {owner: "w1", run_at: now() + 30000, attempts: attempts + 1} where run_at <= now() order run_at limit 1 returning id`
		// Job 1 (sms, w1's, lapsed) comes first and no rule admits a claim
		// of it: it is skipped, and the claim takes job 2, then job 3.
		if got := run(claim); got != `[{"id":2}]` {
			t.Fatalf("%s\nclaim past a lapsed job of another queue: %s, want [{\"id\":2}]", schema, got)
		}
		if got := run(claim + ` require 1`); got != `[{"id":3}]` {
			t.Fatalf("second claim: %s", got)
		}
		if got := run(claim + ` require 1`); !strings.HasPrefix(got, "error unmet") {
			t.Fatalf("nothing left to claim: %s", got)
		}
		// The same set without a limit or order: every row it may write.
		if got := run(`set jobs {owner: "w1", run_at: now() + 30000, attempts: attempts + 1} where run_at <= now() returning id`); got != `[]` {
			t.Fatalf("unordered claim: %s", got)
		}
		// Line 4 extends any job w1 holds, the sms one too; line 3 would
		// not admit it, line 5 would not admit the write.
		if got := run(`set jobs {run_at: now() + 1000} where owner = "w1" returning id`); got != `[{"id":1},{"id":2},{"id":3},{"id":5}]` {
			t.Fatalf("extend: %s", got)
		}
		// Line 5 gives a job back; its transition holds the write to it.
		if got := run(`set jobs {owner: null, error: "x"} where id in [1, 2] returning id`); got != `[]` {
			t.Fatalf("fail: %s", got)
		}
		if got := answer(mustExec(t, db, `get jobs select id, owner, error where id in [1, 2]`)); got != `[{"id":1,"owner":null,"error":"x"},{"id":2,"owner":null,"error":"x"}]` {
			t.Fatalf("fail wrote: %s", got)
		}
		// A write only one rule admits for some rows and another for the
		// others: each row by the rule that admits it.
		if got := run(`set jobs {run_at: now() + 2000} where owner = "w1" or queue = "mail" returning id`); got != `[{"id":3},{"id":5}]` {
			t.Fatalf("extend of held jobs only: %s", got)
		}
		// explain counts what the claim would take.
		mustExec(t, db, `set jobs {run_at: now() - 1} where id in [1, 2, 4]`)
		if got := run(`explain ` + claim); !strings.Contains(got, `"rows":1`) {
			t.Fatalf("explain claim: %s", got)
		}
	}
}

// TestScopeRuleErrorHides: a rule whose filter fails on a row (a type
// error on a json path) does not admit it, and the error is not the
// caller's to see; another rule may still admit the row.
func TestScopeRuleErrorHides(t *testing.T) {
	db, _ := openMem(t)
	mustExec(t, db, `create collection docs (meta json, owner text)`)
	mustExec(t, db, `put docs [{meta: {"level": 1}, owner: "a"}, {meta: {"level": "secret"}, owner: "b"}, {meta: {"level": "x"}, owner: "me"}]`)
	scope := &Scope{Claims: map[string]fenecql.Value{"sub": fenecql.Text("me")}, Rules: []Rule{
		rule(t, "policy line 1", "docs", GrantRead|GrantDelete, nil, `meta.level < 5`),
		rule(t, "policy line 2", "docs", GrantRead, nil, `owner = $jwt.sub`),
	}}
	for _, c := range [][2]string{
		{`get docs select id`, `[{"id":1},{"id":3}]`},
		{`get docs count`, `[{"count":2}]`},
		{`set docs {owner: "z"}`, `error forbidden: statement 0: position 1: no policy rule lets this token update docs`},
		{`explain get docs where id >= 1`, `[{"rows_read":2,"index":null,"rows":2,"plan":"scan docs","order":"none"}]`},
		{`del docs returning id`, `[{"id":1}]`},
	} {
		if got := scoped(t, db, scope, nil, c[0]); got != c[1] {
			t.Errorf("%s: %s, want %s", c[0], got, c[1])
		}
	}
}

// TestSetRefusals: a scoped set that would do what no rule lets it is
// refused, not answered as if it found nothing. A field no update rule
// lists is refused before any row is read (even with no row to write); a
// write that breaks the transition of the rule that let the statement
// pick the row is refused naming that rule, and nothing of the
// statement is written; a row no rule lets it pick stays silent.
func TestSetRefusals(t *testing.T) {
	db, _ := openMem(t)
	mustExec(t, db, `create collection jobs (queue text, payload json, run_at timestamp @sorted, owner text, attempts int, error text)`)
	mustExec(t, db, `put jobs [{queue: "mail", run_at: now() - 10, owner: "w1", attempts: 1}, {queue: "mail", run_at: now() - 5, attempts: 2}, {queue: "mail", run_at: now() - 1, attempts: 3}, {queue: "sms", run_at: now() - 1, attempts: 0}]`)
	scope := &Scope{
		Claims: map[string]fenecql.Value{"sub": fenecql.Text("w1"), "queue": fenecql.Text("mail")},
		Rules: []Rule{
			rule(t, "policy line 2", "jobs", GrantRead, nil, `owner = $jwt.sub`),
			rule(t, "policy line 3", "jobs", GrantUpdate, []string{"owner", "run_at", "attempts"}, `queue = $jwt.queue and run_at <= now() and new.owner = $jwt.sub and new.attempts = attempts + 1`),
			rule(t, "policy line 4", "jobs", GrantUpdate, []string{"run_at"}, `owner = $jwt.sub`),
		},
	}
	before := answer(mustExec(t, db, `get jobs`))
	for _, c := range [][2]string{
		// A worker's own job, a field no rule lists: at once.
		{`set jobs {payload: {"x": 1}} where id = 1`, `error forbidden: statement 0: position 1: no policy rule lets this token change payload of jobs`},
		// The same with no row at all: the same answer.
		{`set jobs {payload: {"x": 1}} where id = 99`, `error forbidden: statement 0: position 1: no policy rule lets this token change payload of jobs`},
		// Fields each listed, but by no one rule.
		{`set jobs {run_at: now(), attempts: 9, error: "x"} where id = 1`, `error forbidden: statement 0: position 1: no policy rule lets this token change error of jobs`},
		// A claim that resets attempts, and one on another's behalf:
		// the whole claim is refused, job 2 as well as job 3.
		{`set jobs {owner: "w1", run_at: now() + 30000, attempts: 0} where run_at <= now() and owner is null order run_at limit 2`, `error forbidden: statement 0: document 2 as written breaks policy line 3: `},
		{`set jobs {owner: "w2", run_at: now() + 30000, attempts: attempts + 1} where run_at <= now() order run_at limit 10`, `error forbidden: statement 0: document 1 as written breaks policy line 3: `},
		// Job 4 is of another queue: not there for this statement.
		{`set jobs {owner: "w2", run_at: now(), attempts: 0} where id = 4`, `{"affected":0}`},
		// Line 4 lets the worker move its own job's lease.
		{`set jobs {run_at: now() + 1000} where id = 1 returning id`, `[{"id":1}]`},
	} {
		if got := scoped(t, db, scope, nil, c[0]); !strings.HasPrefix(got, c[1]) {
			t.Errorf("%s:\n got %s\nwant %s…", c[0], got, c[1])
		}
	}
	mustExec(t, db, `set jobs {run_at: now() - 10} where id = 1`)
	if after := answer(mustExec(t, db, `get jobs`)); after != before {
		t.Fatalf("refused sets wrote:\n%s\n%s", before, after)
	}
}

// TestClaimOfWrongKind: a claim that does not fit the field a rule
// compares it with — a list, an object, a number for a text field — is
// as a missing claim: the rule does not apply, and the collection is not
// there, rather than there and empty.
func TestClaimOfWrongKind(t *testing.T) {
	db, _ := openMem(t)
	mustExec(t, db, `create collection jobs (owner text, n int)`)
	mustExec(t, db, `put jobs [{owner: "42", n: 1}, {owner: "w1", n: 2}]`)
	scope := func(sub fenecql.Value) *Scope {
		s := &Scope{Claims: map[string]fenecql.Value{}, Rules: []Rule{
			rule(t, "policy line 1", "jobs", GrantRead|GrantDelete, nil, `owner = $jwt.sub`),
			rule(t, "policy line 2", "jobs", GrantUpdate, []string{"n"}, `new.owner = $jwt.sub`),
		}}
		if !sub.IsNull() {
			s.Claims["sub"] = sub
		}
		return s
	}
	missing := scoped(t, db, scope(fenecql.Null), nil, `get jobs`)
	if !strings.HasPrefix(missing, "error unknown") {
		t.Fatalf("missing claim: %s", missing)
	}
	for _, sub := range []fenecql.Value{fenecql.Int(42), fenecql.List([]fenecql.Value{fenecql.Text("w1")}), mustJSON(t, `{"a": "w1"}`), fenecql.Bool(true)} {
		for _, q := range []string{`get jobs`, `set jobs {n: 5}`, `del jobs`} {
			if got, want := scoped(t, db, scope(sub), nil, q), scoped(t, db, scope(fenecql.Null), nil, q); got != want {
				t.Errorf("sub %s: %s: %s, want as without the claim: %s", fenecql.AppendJSON(nil, sub), q, got, want)
			}
		}
	}
	if got := scoped(t, db, scope(fenecql.Text("w1")), nil, `get jobs select n`); got != `[{"n":2}]` {
		t.Errorf("a text claim: %s", got)
	}
}
