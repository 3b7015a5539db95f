package main

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/fenecdb/fenec/conformance"
	"github.com/fenecdb/fenec/server/httpapi/apitest"
)

// httpRunner replays a conformance page over HTTP.
type httpRunner struct{ c *apitest.Client }

func (r httpRunner) Query(query string, params []any) (json.RawMessage, int, error) {
	resp, err := r.c.Query(query, params...)
	if err != nil {
		return nil, 0, err
	}
	return resp.Body, resp.Status, nil
}

func (r httpRunner) Advance(ms int64) error {
	resp, err := r.c.Do("POST", "/_clock", map[string]int64{"advance_ms": ms}, nil)
	if err != nil {
		return err
	}
	if resp.Status != 200 {
		return fmt.Errorf("POST /_clock: %d %s", resp.Status, resp.Body)
	}
	return nil
}

// TestReplayDocs replays every page of conformance/cases — the docs'
// FenecQL blocks, docs/queues.md among them — each against a fresh
// `fenec serve --clock manual`, checking every "-- →".
func TestReplayDocs(t *testing.T) {
	t.Parallel()
	pages, err := conformance.ReadCases("../../../conformance/cases")
	if err != nil {
		t.Fatal(err)
	}
	if len(pages) == 0 {
		t.Fatal("no case file in conformance/cases")
	}
	for _, page := range pages {
		t.Run(page.Page, func(t *testing.T) {
			_, c := start(t, "--clock", "manual", "--file", ":memory:")
			if err := page.Replay(httpRunner{c}); err != nil {
				t.Error(err)
			}
		})
	}
}
