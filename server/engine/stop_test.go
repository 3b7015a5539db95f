package engine

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/fenecdb/fenec/server/fenecql"
)

// fillMany puts n rows in collection big (n int, s text).
func fillMany(t *testing.T, db *DB, n int) {
	t.Helper()
	mustExec(t, db, `create collection big (n int, s text)`)
	docs := make([]fenecql.Value, n)
	for i := range docs {
		docs[i] = fenecql.ObjectOf(&fenecql.Object{Keys: []string{"n", "s"}, Vals: []fenecql.Value{fenecql.Int(int64(i)), fenecql.Text("x")}})
	}
	if _, err := db.Exec(context.Background(), `put big $1`, []fenecql.Value{fenecql.List(docs)}); err != nil {
		t.Fatal(err)
	}
}

// manyDocs is how many documents the stop tests fill: enough that a
// statement over them outlasts its 5 ms timeout, or a cancel at a tenth
// of its run, by far; a quarter of that under the race detector, which
// slows every row several times.
func manyDocs() int {
	if raceEnabled {
		return 50_000
	}
	return 200_000
}

// heavy is a filter that costs a little on every row.
const heavy = `where (n * 7 + 3) % 11 <> -1 and s <> "y" and coalesce(n, 0) >= 0`

// TestStatementTimeout: statements past their context's deadline stop,
// answer statement_timeout and write nothing — reads, sets, dels, puts.
func TestStatementTimeout(t *testing.T) {
	db, _ := openMem(t)
	fillMany(t, db, manyDocs())
	seq := db.Seq()
	before := answer(mustExec(t, db, `get big count where s = "x"`))
	for _, q := range []string{
		`get big ` + heavy + ` count`,
		`get big ` + heavy + ` order s desc, n desc limit 1`,
		`set big {s: "y"} ` + heavy,
		`del big ` + heavy,
		`explain get big ` + heavy,
	} {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Millisecond)
		start := time.Now()
		// A timeout that falls mid-statement, not before it starts: the
		// first rows are read under a live context.
		_, err := db.Run(ctx, []Parsed{{Stmt: mustParse(t, q)}}, RunOptions{})
		took := time.Since(start)
		cancel()
		if !errors.Is(err, ErrStatementTimeout) {
			t.Fatalf("%s: %v after %v, want statement_timeout", q, err, took)
		}
		if took > time.Second {
			t.Errorf("%s: stopped only after %v", q, took)
		}
	}
	if db.Seq() != seq || answer(mustExec(t, db, `get big count where s = "x"`)) != before {
		t.Fatal("a stopped statement wrote")
	}
	// Untimed, the same statements run to the end.
	if r := mustExec(t, db, `get big `+heavy+` count`); answer(r) != fmt.Sprintf(`[{"count":%d}]`, manyDocs()) {
		t.Fatalf("untimed: %s", answer(r))
	}
}

// TestCancelledStatementStops: a client that goes away mid-statement stops
// it: the run answers unavailable soon after the cancel, not at its end.
func TestCancelledStatementStops(t *testing.T) {
	db, _ := openMem(t)
	fillMany(t, db, manyDocs())
	q := mustParse(t, `set big {s: "y"} `+heavy)
	// How long the whole statement takes here, undone by a require.
	start := time.Now()
	if _, err := db.Run(context.Background(), []Parsed{{Stmt: mustParse(t, `set big {s: "y"} `+heavy+` require 0`)}}, RunOptions{}); fenecql.CodeOf(err) != fenecql.CodeUnmet {
		t.Fatal(err)
	}
	full := time.Since(start)
	seq := db.Seq()
	ctx, cancel := context.WithCancel(context.Background())
	// The client goes away a tenth of the way in (the behaviour under
	// test: a cancel mid-statement).
	go func() {
		time.Sleep(full / 10)
		cancel()
	}()
	start = time.Now()
	_, err := db.Run(ctx, []Parsed{{Stmt: q}}, RunOptions{})
	took := time.Since(start)
	t.Logf("the whole set: %v; cancelled after %v, stopped after %v", full, full/10, took)
	if !errors.Is(err, ErrUnavailable) {
		t.Fatalf("%v, want unavailable", err)
	}
	if took > full/2 {
		t.Errorf("cancelled after %v, stopped only after %v (the whole set takes %v)", full/10, took, full)
	}
	if db.Seq() != seq {
		t.Fatal("the cancelled set wrote")
	}
}
