package engine

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/fenecdb/fenec/server/clock"
	"github.com/fenecdb/fenec/server/fenecql"
	"github.com/fenecdb/fenec/server/store"
)

func openMem(t testing.TB) (*DB, *clock.Manual) {
	t.Helper()
	clk := clock.NewManual()
	db, err := Open(Options{File: ":memory:", Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db, clk
}

func vals(params ...any) []fenecql.Value {
	out := make([]fenecql.Value, len(params))
	for i, p := range params {
		v, err := fenecql.FromGo(p)
		if err != nil {
			panic(err)
		}
		out[i] = v
	}
	return out
}

func mustExec(t testing.TB, db *DB, q string, params ...any) *Result {
	t.Helper()
	r, err := db.Exec(context.Background(), q, vals(params...))
	if err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	return r
}

func answer(r *Result) string { return string(r.AppendJSON(nil)) }

const jobsSchema = `create collection jobs (payload json, run_at timestamp @sorted, owner text, attempts int, error text)`

func TestStatements(t *testing.T) {
	db, _ := openMem(t)
	mustExec(t, db, jobsSchema)
	mustExec(t, db, `create collection users (email text @unique, name text @hash, age int)`)
	mustExec(t, db, `put users [{email: "a@x", name: "ann", age: 30}, {email: "b@x", name: "bob", age: 40}, {email: "c@x", name: "ann", age: 50}]`)
	tests := []struct {
		q    string
		want string
	}{
		{`get users select name where email = "b@x"`, `[{"name":"bob"}]`},
		{`get users select id where name = "ann"`, `[{"id":1},{"id":3}]`},
		{`get users select id where name in ["bob", "ann"] order age desc`, `[{"id":3},{"id":2},{"id":1}]`},
		{`get users select id, age * 2 as double where age > 30 order id desc limit 1`, `[{"id":3,"double":100}]`},
		{`get users count`, `[{"count":3}]`},
		{`get users where age >= 40 count`, `[{"count":2}]`},
		{`get users select id order name, age desc`, `[{"id":3},{"id":1},{"id":2}]`},
		{`get users select id limit 2 offset 1`, `[{"id":2},{"id":3}]`},
		{`get users where id = 2`, `[{"id":2,"email":"b@x","name":"bob","age":40}]`},
		{`get users select id where id in [3, 1, 9]`, `[{"id":1},{"id":3}]`},
		{`set users {age: age + 1} where name = "ann"`, `{"affected":2}`},
		{`set users {age: 0} where id = 2 returning id, age`, `[{"id":2,"age":0}]`},
		{`del users where email = "c@x" returning name`, `[{"name":"ann"}]`},
		{`get users select id, age`, `[{"id":1,"age":31},{"id":2,"age":0}]`},
		{`put users {email: "d@x"}`, `{"affected":1}`},
		{`get users select id where email = "d@x"`, `[{"id":4}]`},
		{`put users {id: 2, email: "b2@x"}`, `{"affected":1}`},
		{`get users where id = 2`, `[{"id":2,"email":"b2@x","name":null,"age":null}]`},
		{`put jobs {payload: {"to": "a", "n": [1, 2]}, run_at: 0}`, `{"affected":1}`},
		{`set jobs {payload.to: "b", payload.cc.x: 1} where id = 1 returning payload`, `[{"payload":{"to":"b","n":[1,2],"cc":{"x":1}}}]`},
		{`get jobs select payload.n, payload.missing`, `[{"payload.n":[1,2],"payload.missing":null}]`},
		{`get jobs select run_at`, `[{"run_at":"1970-01-01T00:00:00.000Z"}]`},
		{`drop collection jobs`, `{"affected":1}`},
		{`drop collection if exists jobs`, `{"affected":0}`},
	}
	for _, tc := range tests {
		if got := answer(mustExec(t, db, tc.q)); got != tc.want {
			t.Errorf("%s\n got %s\nwant %s", tc.q, got, tc.want)
		}
	}
}

func TestRefusals(t *testing.T) {
	db, _ := openMem(t)
	mustExec(t, db, jobsSchema)
	mustExec(t, db, `create collection users (email text @unique, age int)`)
	mustExec(t, db, `put users [{email: "a@x", age: 1}, {email: "b@x", age: 2}]`)
	before := answer(mustExec(t, db, `get users`))
	tests := []struct {
		q    string
		code fenecql.Code
		msg  string
	}{
		{`get nope`, fenecql.CodeUnknown, "no collection nope"},
		{`get users where agee = 1`, fenecql.CodeUnknown, "collection users has no field agee"},
		{`insert users {id: 1, email: "z@x"}`, fenecql.CodeTaken, "users: id 1 is taken"},
		{`insert users [{email: "q@x"}, {email: "a@x"}]`, fenecql.CodeTaken, `users.email: "a@x" is taken by document 1`},
		{`put users [{email: "q@x"}, {age: "old"}]`, fenecql.CodeInvalid, `field age: int expected`},
		{`set users {email: "same"}`, fenecql.CodeTaken, `is taken by document 1`},
		{`set users {age: age + 1} where id = 1 require 2`, fenecql.CodeUnmet, "`set users` wrote 1 row, and requires 2"},
		{`del users where age > 100 require 1`, fenecql.CodeUnmet, "`del users` wrote 0 rows, and requires 1"},
		{`set users {age: 9223372036854775807 + age}`, fenecql.CodeInvalid, "overflow"},
		{`set users {age: age / 0}`, fenecql.CodeInvalid, "division by zero"},
		{`set users {id: 3}`, fenecql.CodeInvalid, "id cannot be set"},
		{`set users {email.x: 3}`, fenecql.CodeInvalid, "json fields only"},
		{`create collection users (a int)`, fenecql.CodeTaken, "collection users exists"},
		{`put users {id: -3}`, fenecql.CodeInvalid, "id must be a whole number"},
		{`get users limit $1`, fenecql.CodeInvalid, "given no value"},
	}
	for _, tc := range tests {
		_, err := db.Exec(context.Background(), tc.q, nil)
		if err == nil {
			t.Errorf("%s: no error", tc.q)
			continue
		}
		if fenecql.CodeOf(err) != tc.code || !strings.Contains(err.Error(), tc.msg) {
			t.Errorf("%s: got %s %q, want %s containing %q", tc.q, fenecql.CodeOf(err), err, tc.code, tc.msg)
		}
	}
	if after := answer(mustExec(t, db, `get users`)); after != before {
		t.Errorf("refused statements changed the data:\n%s\n%s", before, after)
	}
	// A batch refused at its second statement leaves no trace of its first.
	_, err := db.Batch(context.Background(), []Statement{
		{Query: `put users {email: "new@x"}`},
		{Query: `create collection more (a int)`},
		{Query: `del users where id = 1 require 5`},
	})
	var be *BatchError
	if !errors.As(err, &be) || be.At != 2 || fenecql.CodeOf(err) != fenecql.CodeUnmet {
		t.Fatalf("batch: %v", err)
	}
	if after := answer(mustExec(t, db, `get users`)); after != before {
		t.Errorf("refused batch changed the data: %s", after)
	}
	if _, err := db.Exec(context.Background(), `get more`, nil); fenecql.CodeOf(err) != fenecql.CodeUnknown {
		t.Errorf("refused batch left its collection: %v", err)
	}
	// ids continue where they were: the refused put took none.
	if got := answer(mustExec(t, db, `put users {email: "next@x"} `)); got != `{"affected":1}` {
		t.Fatal(got)
	}
	if got := answer(mustExec(t, db, `get users select id where email = "next@x"`)); got != `[{"id":3}]` {
		t.Errorf("next id after refusals: %s", got)
	}
}

func TestOrderTiesAndNulls(t *testing.T) {
	db, _ := openMem(t)
	mustExec(t, db, `create collection t (p int @sorted, q int)`)
	mustExec(t, db, `put t [{p: 1, q: 1}, {p: 2, q: 1}, {q: 1}, {p: 2, q: 2}, {p: 1, q: 2}]`)
	for _, tc := range []struct{ q, want string }{
		{`get t select id order p`, `[{"id":3},{"id":1},{"id":5},{"id":2},{"id":4}]`},
		{`get t select id order p desc`, `[{"id":2},{"id":4},{"id":1},{"id":5},{"id":3}]`},
		{`get t select id order p desc limit 3`, `[{"id":2},{"id":4},{"id":1}]`},
		{`get t select id order q desc limit 3`, `[{"id":4},{"id":5},{"id":1}]`},
		{`get t select id where p >= 1 order p desc`, `[{"id":2},{"id":4},{"id":1},{"id":5}]`},
		{`get t select id where p < 2`, `[{"id":1},{"id":5}]`},
		{`get t select id where p > 1 and p <= 2 order p`, `[{"id":2},{"id":4}]`},
		{`get t select id limit 2`, `[{"id":1},{"id":2}]`},
		{`get t select id order p * -1, q desc`, `[{"id":3},{"id":4},{"id":2},{"id":5},{"id":1}]`},
	} {
		if got := answer(mustExec(t, db, tc.q)); got != tc.want {
			t.Errorf("%s\n got %s\nwant %s", tc.q, got, tc.want)
		}
	}
}

// TestPlansMatchScans checks that every index path answers what a scan
// answers, over random data and filters.
func TestPlansMatchScans(t *testing.T) {
	db, _ := openMem(t)
	// An int or timestamp @sorted index keeps numbers (sortedIndex.nums),
	// one of another type values: both are held to the scan.
	mustExec(t, db, `create collection ix (a int @sorted, b text @hash, c int @unique, g geo @geo, j json, t timestamp @sorted, s text @sorted)`)
	mustExec(t, db, `create collection sc (a int, b text, c int, g geo, j json, t timestamp, s text)`)
	for i := 0; i < 300; i++ {
		doc := fmt.Sprintf(`{a: %d, b: "%c", c: %d, g: [%f, %f], j: {"k": %d}, t: now() - %d, s: "%c%d"}`, (i*7)%23, 'a'+rune(i%5), i, 28.9+float64((i*13)%40)/200, 41+float64((i*17)%40)/200, i%3, (i*11)%37, 'a'+rune(i%4), i%3)
		if i%11 == 0 {
			doc = fmt.Sprintf(`{b: "%c", c: %d}`, 'a'+rune(i%5), i)
		}
		mustExec(t, db, `put ix `+doc)
		mustExec(t, db, `put sc `+doc)
	}
	filters := []string{
		`where a <= 10`, `where a > 5 and a < 12`, `where 7 >= a`, `where a = 3`, `where b = "c"`, `where b in ["a", "d"]`,
		`where c = 17`, `where c in [1, 2, 200]`, `where within(g, [28.95, 41.02, 29.0, 41.1])`,
		`where distance(g, [29.0, 41.05]) <= 3000`, `where id > 100 and a is null`, `where id in [5, 6, 7]`,
		`where a > 5.5 and a < 12.5`, `where a >= 2.0 and a <= 9.9`, `where a < -0.5 or a > 21.5`, `where a >= 22.0`,
		`where t >= now() - 20 and t < now() - 3`, `where t <= "2026-05-03T09:19:59.990Z"`,
		`where s >= "b" and s < "c2"`, `where t is null`,
	}
	orders := []string{``, `order a`, `order a desc`, `order distance(g, [29.0, 41.05])`, `order b, c desc`, `order t`, `order t desc`, `order s desc`}
	limits := []string{``, `limit 5`, `limit 1 offset 3`}
	for _, f := range filters {
		for _, o := range orders {
			for _, l := range limits {
				q := fmt.Sprintf(`select id, a %s %s %s`, f, o, l)
				got := answer(mustExec(t, db, `get ix `+q))
				want := answer(mustExec(t, db, `get sc `+q))
				if got != want {
					t.Errorf("get %s\n index %s\n  scan %s", q, got, want)
				}
			}
		}
	}
}

func TestClaimsReadOnlyTheirPage(t *testing.T) {
	db, _ := openMem(t)
	mustExec(t, db, jobsSchema)
	// A hundred thousand leased or delayed jobs (a fifth of that under the
	// race detector) and three ready ones: rows_read counts every row the
	// claim looks at, so a scan of them would show as plainly as in a
	// million.
	batches := 100
	if raceEnabled {
		batches = 20
	}
	var b strings.Builder
	for i := 0; i < batches; i++ {
		b.Reset()
		b.WriteString("put jobs [")
		for k := 0; k < 1000; k++ {
			if k > 0 {
				b.WriteString(",")
			}
			fmt.Fprintf(&b, `{payload: {"n": %d}, run_at: now() + %d, attempts: 0}`, i*1000+k, 1000+k)
		}
		b.WriteString("]")
		mustExec(t, db, b.String())
	}
	mustExec(t, db, `put jobs [{run_at: now() - 5, attempts: 0}, {run_at: now() - 3, attempts: 0}, {run_at: now(), attempts: 0}]`)
	claim := `set jobs {owner: "w1", run_at: now() + 30000, attempts: attempts + 1} where run_at <= now() order run_at limit 10 returning id`
	r := mustExec(t, db, `explain `+claim)
	if got := answer(r); !strings.Contains(got, `"rows_read":3,"index":"run_at","rows":3`) || !strings.Contains(got, `"order":"index"`) {
		t.Fatalf("explain: %s", got)
	}
	first := batches*1000 + 1
	if got := answer(mustExec(t, db, claim)); got != fmt.Sprintf(`[{"id":%d},{"id":%d},{"id":%d}]`, first, first+1, first+2) {
		t.Fatalf("claim: %s", got)
	}
	if got := answer(mustExec(t, db, `explain `+claim)); !strings.Contains(got, `"rows_read":0,"index":"run_at","rows":0`) {
		t.Fatalf("explain after: %s", got)
	}
	// An ack by id reads one row.
	if got := answer(mustExec(t, db, fmt.Sprintf(`explain del jobs where id = %d and owner = "w1" require 1`, first+1))); !strings.Contains(got, `"rows_read":1,"index":"id","rows":1`) {
		t.Fatalf("explain ack: %s", got)
	}
}

func TestConcurrentClaims(t *testing.T) {
	db, _ := openMem(t)
	mustExec(t, db, jobsSchema)
	const jobs, workers = 6000, 16
	for i := 0; i < jobs; i += 500 {
		var b strings.Builder
		b.WriteString("put jobs [")
		for k := 0; k < 500; k++ {
			if k > 0 {
				b.WriteString(",")
			}
			fmt.Fprintf(&b, `{payload: {"n": %d}, run_at: now(), attempts: 0}`, i+k)
		}
		b.WriteString("]")
		mustExec(t, db, b.String())
	}
	var mu sync.Mutex
	taken := map[int64]string{}
	acked := map[int64]int{}
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			owner := fmt.Sprintf("w%d", w)
			for {
				r, err := db.Exec(context.Background(), `set jobs {owner: $1, run_at: now() + 30000, attempts: attempts + 1} where run_at <= now() order run_at limit 10 returning id`, vals(owner))
				if err != nil {
					errs <- err
					return
				}
				if len(r.Rows) == 0 {
					return
				}
				for _, row := range r.Rows {
					id := row[0].Int()
					mu.Lock()
					if prev, dup := taken[id]; dup {
						mu.Unlock()
						errs <- fmt.Errorf("job %d handed to %s and %s", id, prev, owner)
						return
					}
					taken[id] = owner
					mu.Unlock()
					if _, err := db.Exec(context.Background(), `del jobs where id = $1 and owner = $2 require 1`, vals(id, owner)); err != nil {
						errs <- err
						return
					}
					mu.Lock()
					acked[id]++
					mu.Unlock()
				}
			}
		}(w)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if len(taken) != jobs || len(acked) != jobs {
		t.Fatalf("taken %d, acked %d of %d", len(taken), len(acked), jobs)
	}
	for id, n := range acked {
		if n != 1 {
			t.Errorf("job %d acked %d times", id, n)
		}
	}
	if got := answer(mustExec(t, db, `get jobs count`)); got != `[{"count":0}]` {
		t.Errorf("left: %s", got)
	}
}

func TestReopen(t *testing.T) {
	for _, sync := range []string{"always", "50", "off"} {
		t.Run(sync, func(t *testing.T) {
			mode, err := store.ParseSync(sync)
			if err != nil {
				t.Fatal(err)
			}
			file := filepath.Join(t.TempDir(), "f.db")
			clk := clock.NewManual()
			db, err := Open(Options{File: file, Sync: mode, Clock: clk})
			if err != nil {
				t.Fatal(err)
			}
			mustExec(t, db, jobsSchema)
			mustExec(t, db, `create collection rides (pickup geo @geo, who text @unique, n int @hash)`)
			mustExec(t, db, `put jobs [{payload: {"to": "a", "x": [1, 2.5]}, run_at: now(), attempts: 0}, {run_at: now() + 10, attempts: 0}, {run_at: now() + 20, attempts: 0}]`)
			mustExec(t, db, `put rides [{pickup: [29.01, 41.04], who: "a", n: 1}, {pickup: [29.03, 41.05], who: "b", n: 1}]`)
			mustExec(t, db, `set jobs {owner: "w1", run_at: now() + 30000, attempts: attempts + 1} where run_at <= now() order run_at limit 1`)
			mustExec(t, db, `del jobs where id = 3`)
			mustExec(t, db, `create collection gone (a int)`)
			mustExec(t, db, `drop collection gone`)
			queries := []string{
				`get jobs`, `get rides`, `get jobs select id order run_at desc`, `get rides select id order distance(pickup, [29.03, 41.05])`,
				`get rides select id where who = "b"`, `get rides select id where n = 1`,
			}
			var before []string
			for _, q := range queries {
				before = append(before, answer(mustExec(t, db, q)))
			}
			seq := db.Seq()
			if err := db.Close(); err != nil {
				t.Fatal(err)
			}
			db, err = Open(Options{File: file, Sync: mode, Clock: clk})
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			for i, q := range queries {
				if got := answer(mustExec(t, db, q)); got != before[i] {
					t.Errorf("%s after reopen:\n got %s\nwant %s", q, got, before[i])
				}
			}
			if db.Seq() != seq {
				t.Errorf("seq %d after reopen, was %d", db.Seq(), seq)
			}
			if _, err := db.Exec(context.Background(), `get gone`, nil); fenecql.CodeOf(err) != fenecql.CodeUnknown {
				t.Errorf("dropped collection back: %v", err)
			}
			if _, err := db.Exec(context.Background(), `insert rides {who: "a"}`, nil); fenecql.CodeOf(err) != fenecql.CodeTaken {
				t.Errorf("unique index not rebuilt: %v", err)
			}
			mustExec(t, db, `put jobs {attempts: 0}`)
			if got := answer(mustExec(t, db, `get jobs select id order id desc limit 1`)); got != `[{"id":4}]` {
				t.Errorf("ids did not continue: %s", got)
			}
		})
	}
}

// TestReopenBodiesOfEverySize writes documents whose bodies run from a few
// bytes to past a slab chunk (writeSlab), one unit at a time and in
// batches, with refused units between them, and holds the file reopened
// to what memory answered: no body is cut short, moved, or written over
// by a later one.
func TestReopenBodiesOfEverySize(t *testing.T) {
	file := filepath.Join(t.TempDir(), "f.db")
	db, err := Open(Options{File: file, Sync: store.SyncMode{Kind: store.SyncAlways}})
	if err != nil {
		t.Fatal(err)
	}
	mustExec(t, db, `create collection docs (body text, n int)`)
	ctx := context.Background()
	for i := 0; i < 300; i++ {
		body := strings.Repeat(string(rune('a'+i%26)), i*i%9000)
		if i%3 == 0 {
			stmts := []Statement{
				{Query: `put docs {body: $1, n: $2}`, Params: vals(body, i)},
				{Query: `put docs {body: $1, n: $2}`, Params: vals(strings.ToUpper(body), -i)},
			}
			if _, err := db.Batch(ctx, stmts); err != nil {
				t.Fatal(err)
			}
		} else {
			mustExec(t, db, `put docs {body: $1, n: $2}`, body, i)
		}
		// A refused unit: its body is encoded, then the unit undone.
		refused := []Statement{{Query: `put docs {body: $1, n: 0}`, Params: vals(body)}, {Query: `del docs where id = 0 require 1`}}
		if _, err := db.Batch(ctx, refused); fenecql.CodeOf(err) != fenecql.CodeUnmet {
			t.Fatalf("the refused batch: %v", err)
		}
	}
	mustExec(t, db, `set docs {body: body} where n % 7 = 0`) // rewrites some bodies
	before := answer(mustExec(t, db, `get docs order id`))
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	db, err = Open(Options{File: file})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if got := answer(mustExec(t, db, `get docs order id`)); got != before {
		t.Errorf("after reopen the documents differ (%d bytes, were %d)", len(got), len(before))
	}
}
