package changes

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/fenecdb/fenec/server/clock"
	"github.com/fenecdb/fenec/server/engine"
	"github.com/fenecdb/fenec/server/fenecql"
	"github.com/fenecdb/fenec/server/store"
)

// BenchmarkQueueLoop times a job's put, claim and ack (its delete) on a
// file, with no hub, with a hub and no consumer (no record is written:
// the journal only checks a flag), and with one consumer (each put and
// ack also writes its change record). The interval sync keeps fsyncs out
// of the figure (sync=interval): it is the CPU and bytes a write costs;
// sync=always is what a write under the default --sync waits.
//
//	cd server && go test ./changes -run '^$' -bench 'BenchmarkQueueLoop/sync=interval' -benchtime 20000x
//	cd server && go test ./changes -run '^$' -bench 'BenchmarkQueueLoop/sync=always' -benchtime 1000x
func BenchmarkQueueLoop(b *testing.B) {
	for _, sync := range []string{"interval", "always"} {
		for _, mode := range []string{"no-hub", "no-consumer", "one-consumer"} {
			b.Run("sync="+sync+"/"+mode, func(b *testing.B) { queueLoop(b, sync, mode) })
		}
	}
}

func queueLoop(b *testing.B, sync, mode string) {
	sm := store.SyncMode{Kind: store.SyncInterval, Interval: time.Second}
	if sync == "always" {
		sm = store.SyncMode{Kind: store.SyncAlways}
	}
	db, err := engine.Open(engine.Options{File: filepath.Join(b.TempDir(), "db.sqlite"), Clock: clock.System{}, Sync: sm})
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	ctx := context.Background()
	run := func(q string, args ...fenecql.Value) *engine.Result {
		r, err := db.Exec(ctx, q, args)
		if err != nil {
			b.Fatalf("%s: %v", q, err)
		}
		return r
	}
	run(`create collection jobs (payload json, run_at timestamp @sorted, owner text, attempts int)`)
	if mode != "no-hub" {
		h := New(db, Options{})
		defer h.Close()
		if mode == "one-consumer" {
			if err := h.Ack(ctx, "c", h.Head()); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.ResetTimer()
	for range b.N {
		run(`put jobs {payload: {"to": "x@example.com"}, run_at: now() - 1, attempts: 0}`)
		r := run(`set jobs {owner: "w", run_at: now() + 30000, attempts: attempts + 1} where run_at <= now() order run_at limit 1 returning id`)
		if len(r.Rows) != 1 {
			b.Fatalf("claimed %d", len(r.Rows))
		}
		run(`del jobs where id = $1`, r.Rows[0][0])
	}
}
