package engine

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/fenecdb/fenec/server/clock"
)

func parseReq(t *testing.T, qs ...string) []Parsed {
	t.Helper()
	stmts := make([]Statement, len(qs))
	for i, q := range qs {
		stmts[i] = Statement{Query: q}
	}
	ps, err := Parse(stmts)
	if err != nil {
		t.Fatal(err)
	}
	return ps
}

func TestHoldable(t *testing.T) {
	for _, tc := range []struct {
		q   string
		err string
	}{
		{`set jobs {owner: "w"} where run_at <= now() order run_at limit 1`, ""},
		{`set jobs {owner: "w"} where run_at < now()`, ""},
		{`del jobs where now() - 5000 >= run_at`, ""},
		{`set jobs {owner: "w"} where run_at <= now() + 500 and attempts < 5`, ""},
		{`set jobs {owner: "w", run_at: now() + 30000} where run_at <= now() + $1`, ""},
		{`del jobs where id = 3`, ""},
		{`put jobs {attempts: 0}`, "this put writes every time"},
		{`insert jobs {attempts: 0}`, "this insert writes every time"},
		{`create collection x (a int)`, "this create writes every time"},
		{`drop collection jobs`, "this drop writes every time"},
		{`get jobs`, "has none"},
		{`set jobs {owner: "w"} where bucket(now(), 60000) = run_at`, "reads the time only as a field compared with now()"},
		{`set jobs {owner: "w"} where run_at + 1000 <= now()`, "reads the time only"},
		{`set jobs {owner: "w"} where run_at = now()`, "reads the time only"},
		{`set jobs {owner: "w"} where run_at <= now() * 2`, "reads the time only"},
	} {
		err := Holdable(parseReq(t, tc.q))
		if tc.err == "" && err != nil || tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)) {
			t.Errorf("%s: %v, want %q", tc.q, err, tc.err)
		}
	}
	if err := Holdable(parseReq(t, `get jobs count`, `del jobs where run_at <= now() limit 1`)); err != nil {
		t.Errorf("a batch of a read and a claim: %v", err)
	}
}

func TestNextDue(t *testing.T) {
	db, clk := openMem(t)
	mustExec(t, db, jobsSchema)
	mustExec(t, db, `create collection plain (run_at timestamp)`)
	now := clock.ManualStart
	mustExec(t, db, `put jobs [{run_at: now() + 300}, {run_at: now() + 100}, {run_at: now() + 1000}, {run_at: null}]`)
	mustExec(t, db, `put plain [{run_at: now() + 300}, {run_at: now() + 100}]`)
	for _, tc := range []struct {
		q   string
		due int64 // 0: none
	}{
		{`set jobs {owner: "w"} where run_at <= now()`, now + 100},
		{`set jobs {owner: "w"} where run_at < now()`, now + 101},
		{`del jobs where now() - 5000 >= run_at`, now + 5100},
		{`set jobs {owner: "w"} where run_at <= now() + 500`, now + 500},
		{`set jobs {owner: "w"} where run_at <= now() + 1000`, 0},
		{`set jobs {owner: "w"} where owner = "x"`, 0},
		{`set plain {run_at: null} where run_at <= now()`, now + 100},
	} {
		due, ok := db.NextDue(parseReq(t, tc.q))
		if tc.due == 0 && ok || tc.due != 0 && (!ok || due != tc.due) {
			t.Errorf("%s: due %d (%v), want %d", tc.q, due-now, ok, tc.due-now)
		}
	}
	clk.Advance(100)
	if due, ok := db.NextDue(parseReq(t, `set jobs {owner: "w"} where run_at <= now()`)); !ok || due != now+300 {
		t.Errorf("after 100 ms: due %d", due-now)
	}
}

func TestLookAndOnlyIfTakes(t *testing.T) {
	db, _ := openMem(t)
	mustExec(t, db, `create collection rides (pickup geo @geo, run_at timestamp @sorted, owner text)`)
	near := parseReq(t, `set rides {owner: "a"} where run_at <= now() order distance(pickup, [29.03, 41.05]) limit 1 returning id`)
	far := parseReq(t, `set rides {owner: "b"} where run_at <= now() order distance(pickup, [29.5, 41.5]) limit 1 require 1`)
	bids := db.Look([][]Parsed{near, far})
	if bids[0].Takes || bids[1].Takes {
		t.Fatalf("empty collection bids: %+v", bids)
	}
	if _, err := db.Run(context.Background(), far, RunOptions{OnlyIfTakes: true}); !errors.Is(err, ErrNothingTaken) {
		t.Fatalf("a claim taking nothing, refused only by its require: %v", err)
	}
	mustExec(t, db, `put rides {pickup: [29.02, 41.04], run_at: now()}`)
	bids = db.Look([][]Parsed{near, far})
	if !bids[0].Takes || !bids[1].Takes || bids[0].Key.Float() >= bids[1].Key.Float() {
		t.Fatalf("bids: %+v", bids)
	}
	rs, err := db.Run(context.Background(), near, RunOptions{OnlyIfTakes: true})
	if err != nil || answer(rs[0]) != `[{"id":1}]` {
		t.Fatalf("near claim: %v", err)
	}
	if got := answer(mustExec(t, db, `get rides select owner`)); got != `[{"owner":"a"}]` {
		t.Errorf("after: %s", got)
	}
}
