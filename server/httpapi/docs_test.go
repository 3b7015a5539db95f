package engine

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/fenecdb/fenec/conformance"
	"github.com/fenecdb/fenec/server/clock"
	"github.com/fenecdb/fenec/server/fenecql"
)

// inProcess replays a docs page straight into an engine.
type inProcess struct {
	db  *DB
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
		body, _ := json.Marshal(map[string]string{"error": err.Error(), "code": string(Code(err))})
		return body, Code(err).Status(), nil
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
			db, clk := openMem(t)
			if err := p.Replay(&inProcess{db: db, clk: clk}); err != nil {
				t.Fatal(err)
			}
		})
	}
	if _, err := os.Stat(filepath.Join("..", "..", "docs", "queues.md")); err != nil {
		t.Fatal("docs/queues.md is missing")
	}
}
