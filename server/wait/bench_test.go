package wait

import (
	"context"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/fenecdb/fenec/server/engine"
	"github.com/fenecdb/fenec/server/fenecql"
	"github.com/fenecdb/fenec/server/store"
)

// BenchmarkWake times a put to the held claim it wakes, in process (no
// HTTP): one claim held at a time, as queuebench's "put → held worker",
// over a file under --sync always and an interval:
//
//	cd server && go test ./wait -run '^$' -bench Wake -benchtime 300x
func BenchmarkWake(b *testing.B) { benchWake(b, 2*time.Millisecond) }

// BenchmarkWakeAtOnce is BenchmarkWake with each put sent the moment its
// claim is held, as a busy queue's are: within lookGap of the claim's
// first look.
//
//	cd server && go test ./wait -run '^$' -bench WakeAtOnce -benchtime 300x
func BenchmarkWakeAtOnce(b *testing.B) { benchWake(b, 0) }

func benchWake(b *testing.B, pause time.Duration) {
	for _, sync := range []string{"always", "250"} {
		b.Run("sync="+sync, func(b *testing.B) {
			mode, err := store.ParseSync(sync)
			if err != nil {
				b.Fatal(err)
			}
			db, err := engine.Open(engine.Options{File: filepath.Join(b.TempDir(), "f.db"), Sync: mode})
			if err != nil {
				b.Fatal(err)
			}
			hub := New(db, nil)
			defer func() { hub.Close(); db.Close() }()
			ctx := context.Background()
			if _, err := db.Exec(ctx, `create collection jobs (run_at timestamp @sorted, owner text)`, nil); err != nil {
				b.Fatal(err)
			}
			ps, err := engine.Parse([]engine.Statement{{Query: `set jobs {owner: "w", run_at: now() + 30000} where run_at <= now() order run_at limit 1 returning id`}})
			if err != nil {
				b.Fatal(err)
			}
			put := []fenecql.Value(nil)
			lat := make([]time.Duration, 0, b.N)
			b.ResetTimer()
			for range b.N {
				done := make(chan time.Time, 1)
				go func() {
					rs, _, err := hub.Hold(ctx, &Request{Parsed: ps, Wait: 30 * time.Second})
					if err != nil || len(rs[0].Rows) != 1 {
						b.Errorf("the held claim answered %v, %v", rs, err)
					}
					done <- time.Now()
				}()
				for hub.Held() == 0 {
					time.Sleep(100 * time.Microsecond)
				}
				time.Sleep(pause) // past lookGap: the put's write looks at once
				start := time.Now()
				if _, err := db.Exec(ctx, `put jobs {run_at: now()}`, put); err != nil {
					b.Fatal(err)
				}
				lat = append(lat, (<-done).Sub(start))
			}
			b.StopTimer()
			slices.Sort(lat)
			b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
			b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
		})
	}
}
