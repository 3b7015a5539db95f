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
		rs, err := db.Run(context.Background(), []Parsed{{Stmt: mustParse(t, q), Params: vals(params...), Scope: scope}})
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
	refused(`set jobs {owner: "w1", run_at: now() + 30000, attempts: attempts + 1, payload: {"x": 1}} where run_at <= now() order run_at limit 10`, fenecql.CodeForbidden, "changes payload")
	refused(`set jobs {owner: "w1", run_at: now() + 30000, attempts: attempts + 1, error: "x"} where run_at <= now() order run_at limit 10`, fenecql.CodeForbidden, "changes error")
	refused(`set jobs {owner: "w2", run_at: now() + 30000, attempts: attempts + 1} where run_at <= now() order run_at limit 10`, fenecql.CodeForbidden, "breaks policy line 2")
	refused(`set jobs {owner: "w1", run_at: now() + 30000, attempts: 0} where run_at <= now() order run_at limit 10`, fenecql.CodeForbidden, "breaks policy line 2")
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
