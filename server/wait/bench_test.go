package wait

import (
	"context"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"syscall"
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

// BenchmarkNearestOfHeld times a put to the nearest of n held couriers,
// in memory and in process, as queuebench's "put → nearest of n held
// couriers": each courier's claim takes the ride nearest its own point, so
// every courier is a line of its own and every put is looked at by all of
// them. It reports the p50 and the CPU per ride (the process's, over the
// puts):
//
//	cd server && go test ./wait -run '^$' -bench NearestOfHeld -benchtime 100x
func BenchmarkNearestOfHeld(b *testing.B) {
	for _, n := range []int{100, 1000} {
		b.Run(fmt.Sprintf("couriers=%d", n), func(b *testing.B) { benchNearest(b, n) })
	}
}

func benchNearest(b *testing.B, n int) {
	db, err := engine.Open(engine.Options{File: ":memory:"})
	if err != nil {
		b.Fatal(err)
	}
	hub := New(db, nil)
	defer func() { hub.Close(); db.Close() }()
	ctx := context.Background()
	if _, err := db.Exec(ctx, `create collection rides (pickup geo @geo, run_at timestamp @sorted, owner text)`, nil); err != nil {
		b.Fatal(err)
	}
	ps, err := engine.Parse([]engine.Statement{{Query: `set rides {owner: $1, run_at: now() + 30000} where run_at <= now() order distance(pickup, $2) limit 1 returning id`}})
	if err != nil {
		b.Fatal(err)
	}
	rnd := rand.New(rand.NewPCG(1, 2))
	point := func() fenecql.Value {
		return fenecql.List([]fenecql.Value{fenecql.Float(29.0 + rnd.Float64()*0.119), fenecql.Float(41.0 + rnd.Float64()*0.09)})
	}
	took := make(chan string, n)
	stop := make(chan struct{})
	for i := range n {
		me, at := fenecql.Text(fmt.Sprint("c", i)), point()
		go func() {
			for {
				p := []engine.Parsed{{Stmt: ps[0].Stmt, Params: []fenecql.Value{me, at}}}
				rs, _, err := hub.Hold(ctx, &Request{Parsed: p, Wait: 30 * time.Second})
				select {
				case <-stop:
					return
				default:
				}
				if err == nil && len(rs[0].Rows) == 1 {
					took <- "x"
					db.Exec(ctx, `del rides where id = $1`, []fenecql.Value{rs[0].Rows[0][0]})
				}
			}
		}()
	}
	defer close(stop)
	awaitHeld := func() {
		for deadline := time.Now().Add(30 * time.Second); hub.Held() != n; time.Sleep(100 * time.Microsecond) {
			if time.Now().After(deadline) {
				b.Fatalf("%d claims held, not %d", hub.Held(), n)
			}
		}
	}
	awaitHeld()
	lat := make([]time.Duration, 0, b.N)
	cpu0 := processCPU()
	b.ResetTimer()
	for range b.N {
		start := time.Now()
		if _, err := db.Exec(ctx, `put rides {pickup: $1, run_at: now()}`, []fenecql.Value{point()}); err != nil {
			b.Fatal(err)
		}
		<-took
		lat = append(lat, time.Since(start))
		b.StopTimer()
		awaitHeld()
		b.StartTimer()
	}
	b.StopTimer()
	cpu := processCPU() - cpu0
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
	b.ReportMetric(float64(cpu.Microseconds())/float64(b.N), "cpu-µs/ride")
}

func processCPU() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
