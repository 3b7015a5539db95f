package auth

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/fenecdb/fenec/server/clock"
	"github.com/fenecdb/fenec/server/engine"
	"github.com/fenecdb/fenec/server/fenecql"
)

// The seed page's worker, as a policy file.
const workerPolicy = `# workers take their queue's jobs, and see only their own
jobs read where owner = $jwt.sub for worker
jobs update(owner, run_at, attempts) where queue = $jwt.queue and run_at <= now() and new.owner = $jwt.sub and new.attempts = attempts + 1 for worker
jobs update(owner, run_at, error) where owner = $jwt.sub and new.owner is null for worker
jobs delete where owner = $jwt.sub for worker

# operators read everything
* read for operator
`

func TestParsePolicy(t *testing.T) {
	p, err := ParsePolicy("policy.txt", []byte(workerPolicy))
	if err != nil {
		t.Fatal(err)
	}
	type want struct {
		name, coll string
		grants     engine.Grant
		fields     string
		role       string
		claims     string
		filter     string
	}
	wants := []want{
		{"policy line 2", "jobs", engine.GrantRead, "", "worker", "sub", "(owner = $jwt.sub)"},
		{"policy line 3", "jobs", engine.GrantUpdate, "owner,run_at,attempts", "worker", "queue,sub", "((((queue = $jwt.queue) and (run_at <= now())) and (new.owner = $jwt.sub)) and (new.attempts = (attempts + 1)))"},
		{"policy line 4", "jobs", engine.GrantUpdate, "owner,run_at,error", "worker", "sub", "((owner = $jwt.sub) and (new.owner is null))"},
		{"policy line 5", "jobs", engine.GrantDelete, "", "worker", "sub", "(owner = $jwt.sub)"},
		{"policy line 8", "*", engine.GrantRead, "", "operator", "", ""},
	}
	if len(p.rules) != len(wants) {
		t.Fatalf("%d rules, want %d", len(p.rules), len(wants))
	}
	for i, w := range wants {
		r := p.rules[i]
		filter := ""
		if r.Filter != nil {
			filter = fenecql.Format(r.Filter)
		}
		got := want{r.Name, r.Coll, r.Grants, strings.Join(r.Fields, ","), r.role, strings.Join(r.claims, ","), filter}
		if got != w {
			t.Errorf("rule %d:\n got %+v\nwant %+v", i, got, w)
		}
	}
	if p.rules[1].Text != strings.Split(workerPolicy, "\n")[2] {
		t.Errorf("text %q", p.rules[1].Text)
	}
}

func TestParsePolicyGrants(t *testing.T) {
	for line, want := range map[string]engine.Grant{
		"jobs read":                      engine.GrantRead,
		"jobs READ, Insert":              engine.GrantRead | engine.GrantInsert,
		"jobs write":                     engine.GrantWrite,
		"jobs read,write":                engine.GrantRead | engine.GrantWrite,
		"jobs insert, update(a), delete": engine.GrantWrite,
		"* read where true for admin":    engine.GrantRead,
	} {
		p, err := ParsePolicy("p", []byte(line))
		if err != nil {
			t.Errorf("%s: %v", line, err)
			continue
		}
		if g := p.rules[0].Grants; g != want {
			t.Errorf("%s: grants %b, want %b", line, g, want)
		}
	}
}

// Each bad line is refused with what is wrong and where; the line is the
// third of the file, after a comment and a good rule.
func TestParsePolicyErrors(t *testing.T) {
	for _, c := range []struct{ line, want string }{
		{`jobs reed`, `column 6: expected a grant (read, insert, update, update(...), delete, write), found "reed"`},
		{`jobs`, `column 5: expected a grant (read, insert, update, update(...), delete, write), found the end of the line`},
		{`jobs read,`, `column 11: expected a grant (read, insert, update, update(...), delete, write), found the end of the line`},
		{`1jobs read`, `column 1: expected a collection name or *, found "1"`},
		{`jobs read what`, `column 11: expected where, for or the end of the line, found "what"`},
		{`jobs read where`, `column 16: expected a filter after where, found the end of the line`},
		{`jobs read where owner = `, `column 25: expected a value, found end of expression`},
		{`jobs read where owner == 1`, `column 24: expected a value, found "="`},
		{`jobs read where a = "é" and )`, `column 29: expected a value, found ")"`},
		{`jobs read where nope(x) = 1`, `column 17: unknown function nope`},
		{`jobs read where owner = $1`, `column 25: $1: a policy has no parameters`},
		{`jobs read where new.owner = $jwt.sub`, `column 17: new.owner reads the row as written, which only insert and update rules have`},
		{`jobs delete where owner = $jwt.sub and new.owner is null`, `column 40: new.owner reads the row as written`},
		{`jobs write where new.owner = $jwt.sub`, `column 18: new.owner reads the row as written`},
		{`jobs update(owner, ) where x = 1`, `column 20: expected a field name, found ")"`},
		{`jobs update(owner owner)`, `column 19: expected "," or ")", found "owner"`},
		{`jobs update(owner, owner)`, `column 20: update(...) names owner twice`},
		{`jobs update(id)`, `column 13: update(...) cannot name id`},
		{`jobs read, read`, `column 12: read repeats a grant given before it on this line`},
		{`jobs write, update(a)`, `column 13: update repeats a grant given before it on this line`},
		{`jobs read for`, `column 14: expected a role after for, found the end of the line`},
		{`jobs read for worker now`, `column 22: expected the end of the line after the role, found "now"`},
		{`jobs read where owner = $jwt.sub for`, `column 34: expected an operator or end of expression, found "for"`},
	} {
		_, err := ParsePolicy("policy.txt", []byte("# workers\njobs read\n"+c.line+"\n"))
		want := "policy.txt line 3, " + c.want
		if err == nil || !strings.HasPrefix(err.Error(), want) {
			t.Errorf("%s:\n got %v\nwant %s…", c.line, err, want)
		}
	}
}

// A trailing `for` is the role only outside strings and comments.
func TestParsePolicyRoleSuffix(t *testing.T) {
	for line, role := range map[string]string{
		`jobs read where x = 'for worker'`:       "",
		`jobs read where x = "a\" for b"`:        "",
		`jobs read where a = 1 -- for worker`:    "",
		`jobs read where (a = 1) for  worker  `:  "worker",
		`jobs read where a = "for x" for worker`: "worker",
		`jobs read where a = 'x\'s' for worker`:  "worker",
	} {
		p, err := ParsePolicy("p", []byte(line))
		if err != nil {
			t.Errorf("%s: %v", line, err)
			continue
		}
		if got := p.rules[0].role; got != role {
			t.Errorf("%s: role %q, want %q", line, got, role)
		}
	}
}

func claimsOf(t *testing.T, js string) map[string]any {
	t.Helper()
	d := json.NewDecoder(strings.NewReader(js))
	d.UseNumber()
	var m map[string]any
	if err := d.Decode(&m); err != nil {
		t.Fatal(err)
	}
	return m
}

func ruleNames(s *engine.Scope) string {
	var names []string
	for _, r := range s.Rules {
		names = append(names, strings.TrimPrefix(r.Name, "policy line "))
	}
	return strings.Join(names, ",")
}

func TestScopeRules(t *testing.T) {
	p, err := ParsePolicy("p", []byte(workerPolicy+"jobs read where queue in $jwt.queues\njobs read where $jwt.admin\n"))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ claims, rules string }{
		{`{"sub": "w1", "role": "worker", "queue": "mail"}`, "2,3,4,5"},
		{`{"sub": "w1", "role": ["worker", "x"], "queue": "mail"}`, "2,3,4,5"},
		{`{"sub": "w1", "role": "worker"}`, "2,4,5"},                // no queue: line 3 does not apply
		{`{"sub": "w1", "role": "worker", "queue": null}`, "2,4,5"}, // a null claim is missing
		{`{"sub": "w1"}`, ""},
		{`{"role": "operator"}`, "8"},
		{`{"queues": ["mail", "sms"]}`, "9"},
		{`{"queues": "mail"}`, ""}, // in needs a list
		{`{"admin": true}`, "10"},
	} {
		if got := ruleNames(p.Scope(claimsOf(t, c.claims))); got != c.rules {
			t.Errorf("%s: rules %q, want %q", c.claims, got, c.rules)
		}
	}
}

func TestScopeKey(t *testing.T) {
	p, err := ParsePolicy("p", []byte(workerPolicy))
	if err != nil {
		t.Fatal(err)
	}
	key := func(js string) string { return p.ScopeKey(p.Scope(claimsOf(t, js))) }
	a := key(`{"sub": "w1", "role": "worker", "queue": "mail", "exp": 1, "jti": "a"}`)
	if b := key(`{"sub": "w1", "role": "worker", "queue": "mail", "exp": 2, "jti": "b"}`); a != b {
		t.Errorf("claims no rule reads split the line: %s %s", a, b)
	}
	for _, other := range []string{
		`{"sub": "w2", "role": "worker", "queue": "mail"}`,
		`{"sub": "w1", "role": "worker", "queue": "sms"}`,
		`{"sub": "w1", "role": "worker"}`,
	} {
		if key(other) == a {
			t.Errorf("%s shares a line with w1's mail token", other)
		}
	}
}

// A list claim works with `in`, through the engine.
func TestScopeListClaim(t *testing.T) {
	db, err := engine.Open(engine.Options{File: ":memory:", Clock: clock.NewManual()})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	run := func(s *engine.Scope, q string) string {
		t.Helper()
		ps, err := engine.Parse([]engine.Statement{{Query: q}})
		if err != nil {
			t.Fatal(err)
		}
		ps[0].Scope = s
		rs, err := db.Run(context.Background(), ps, engine.RunOptions{})
		if err != nil {
			return err.Error()
		}
		return string(rs[0].AppendJSON(nil))
	}
	run(nil, `create collection jobs (queue text, n int)`)
	run(nil, `put jobs [{queue: "mail", n: 1}, {queue: "sms", n: 2}, {queue: "push", n: 3}]`)
	p, err := ParsePolicy("p", []byte(`jobs read where queue in $jwt.queues`))
	if err != nil {
		t.Fatal(err)
	}
	if got := run(p.Scope(claimsOf(t, `{"queues": ["mail", "push"]}`)), `get jobs select n`); got != `[{"n":1},{"n":3}]` {
		t.Errorf("queues [mail, push]: %s", got)
	}
	if got := run(p.Scope(claimsOf(t, `{"queues": "mail"}`)), `get jobs select n`); !strings.HasSuffix(got, "no collection jobs") {
		t.Errorf("queues not a list: %s", got)
	}
}
