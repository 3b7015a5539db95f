package httpapi

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/fenecdb/fenec/conformance"
	"github.com/fenecdb/fenec/server/clock"
	"github.com/fenecdb/fenec/server/engine"
	"github.com/fenecdb/fenec/server/fenecql"
	"github.com/fenecdb/fenec/server/httpapi/gen"
)

// inProcess replays a docs page straight into an engine, answering an
// error with the code and status this package maps it to.
type inProcess struct {
	db  *engine.DB
	clk *clock.Manual
}

func (r *inProcess) Query(query string, params []any) (json.RawMessage, int, error) {
	vs := make([]fenecql.Value, len(params))
	for i, p := range params {
		v, err := fenecql.FromGo(p)
		if err != nil {
			return nil, 0, err
		}
		vs[i] = v
	}
	res, err := r.db.Exec(context.Background(), query, vs)
	if err != nil {
		e := engineError(err, false)
		body, _ := json.Marshal(gen.Error{Error: e.msg, Code: e.code})
		return body, statuses[e.code], nil
	}
	return res.AppendJSON(nil), 200, nil
}

func (r *inProcess) Advance(ms int64) error {
	r.clk.Advance(ms)
	return nil
}

// TestDocs replays every FenecQL block of docs/*.md, each page on a fresh
// database with the manual clock, and checks every `-- →`.
func TestDocs(t *testing.T) {
	t.Parallel()
	pages, err := conformance.ReadDir(filepath.Join("..", "..", "docs"))
	if err != nil {
		t.Fatal(err)
	}
	if len(pages) == 0 {
		t.Fatal("no docs pages with fenecql blocks")
	}
	for _, p := range pages {
		t.Run(p.Page, func(t *testing.T) {
			if clock.ManualStart != conformance.ClockStartMS {
				t.Fatal("the manual clock and the conformance suite start at different times")
			}
			clk := clock.NewManual()
			db, err := engine.Open(engine.Options{File: ":memory:", Clock: clk})
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			if err := p.Replay(&inProcess{db: db, clk: clk}); err != nil {
				t.Fatal(err)
			}
		})
	}
	if _, err := os.Stat(filepath.Join("..", "..", "docs", "queues.md")); err != nil {
		t.Fatal("docs/queues.md is missing")
	}
}
