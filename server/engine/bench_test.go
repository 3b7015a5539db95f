package engine

import (
	"context"
	"fmt"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/fenecdb/fenec/server/fenecql"
	"github.com/fenecdb/fenec/server/store"
)

// fill puts n documents into coll, doc(i) the i-th, in statements of 1000.
func fill(b testing.TB, db *DB, coll string, n int, doc func(i int) string) {
	for i := 0; i < n; i += 1000 {
		var sb strings.Builder
		sb.WriteString("put " + coll + " [")
		for k := 0; k < 1000 && i+k < n; k++ {
			if k > 0 {
				sb.WriteString(",")
			}
			sb.WriteString(doc(i + k))
		}
		sb.WriteString("]")
		mustExec(b, db, sb.String())
	}
}

// fillJobs puts n ready jobs, the oldest first.
func fillJobs(b testing.TB, db *DB, n int) {
	fill(b, db, "jobs", n, func(i int) string {
		return fmt.Sprintf(`{payload: {"to": "u%d@example.com"}, run_at: now() - %d, attempts: 0}`, i, n-i)
	})
}

func percentiles(b *testing.B, d []time.Duration) {
	sort.Slice(d, func(i, j int) bool { return d[i] < d[j] })
	if len(d) == 0 {
		return
	}
	b.ReportMetric(float64(d[len(d)/2].Microseconds()), "p50-µs")
	b.ReportMetric(float64(d[len(d)*99/100].Microseconds()), "p99-µs")
}

// BenchmarkClaim times the queue page's claim of ten over a queue kept at
// its size: each claim's jobs are acked and as many new ones put.
func BenchmarkClaim(b *testing.B) {
	for _, tc := range []struct {
		jobs  int
		index string
	}{{1000, "@sorted"}, {1000000, "@sorted"}, {1000, ""}, {100000, ""}} {
		b.Run(fmt.Sprintf("jobs=%d/index=%s", tc.jobs, strings.TrimPrefix(tc.index, "@")), func(b *testing.B) {
			db, _ := openMem(b)
			mustExec(b, db, `create collection jobs (payload json, run_at timestamp `+tc.index+`, owner text, attempts int, error text)`)
			fillJobs(b, db, tc.jobs)
			claim := `set jobs {owner: $1, run_at: now() + 30000, attempts: attempts + 1} where run_at <= now() order run_at limit 10 returning *`
			owner := vals("w1")
			times := make([]time.Duration, 0, b.N)
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				start := time.Now()
				r, err := db.Exec(context.Background(), claim, owner)
				times = append(times, time.Since(start))
				if err != nil || len(r.Rows) != 10 {
					b.Fatalf("claim: %v", err)
				}
				delClaimed(b, db, r)
				mustExec(b, db, `put jobs [{run_at: now(), attempts: 0}, {run_at: now(), attempts: 0}, {run_at: now(), attempts: 0}, {run_at: now(), attempts: 0}, {run_at: now(), attempts: 0}, {run_at: now(), attempts: 0}, {run_at: now(), attempts: 0}, {run_at: now(), attempts: 0}, {run_at: now(), attempts: 0}, {run_at: now(), attempts: 0}]`)
			}
			b.StopTimer()
			percentiles(b, times)
		})
	}
}

// BenchmarkPut times one-document puts under each --sync, from one writer
// and from sixteen at once (group commit).
func BenchmarkPut(b *testing.B) {
	for _, sync := range []string{"always", "250", "off"} {
		for _, writers := range []int{1, 16} {
			b.Run(fmt.Sprintf("sync=%s/writers=%d", sync, writers), func(b *testing.B) {
				mode, _ := store.ParseSync(sync)
				db, err := Open(Options{File: filepath.Join(b.TempDir(), "b.db"), Sync: mode})
				if err != nil {
					b.Fatal(err)
				}
				defer db.Close()
				mustExec(b, db, jobsSchema)
				b.SetParallelism((writers + 1) / 2)
				b.ResetTimer()
				b.RunParallel(func(pb *testing.PB) {
					params := vals("someone@example.com")
					for pb.Next() {
						if _, err := db.Exec(context.Background(), `put jobs {payload: {"to": $1}, run_at: now(), attempts: 0}`, params); err != nil {
							b.Error(err)
							return
						}
					}
				})
				b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "stmts/s")
			})
		}
	}
}

// BenchmarkNearest times the nearest ready ride to a point, walked by the
// @geo index (an R-tree searched nearest-first), over a city of rides.
func BenchmarkNearest(b *testing.B) {
	for _, n := range []int{1000, 100000, 1000000} {
		b.Run(fmt.Sprintf("rides=%d", n), func(b *testing.B) {
			db, _ := openMem(b)
			mustExec(b, db, `create collection rides (pickup geo @geo, run_at timestamp @sorted, owner text)`)
			fill(b, db, "rides", n, func(i int) string {
				x := uint64(i) * 2654435761 // scattered over the city
				return fmt.Sprintf(`{pickup: [%f, %f], run_at: now()}`, 29+float64(x%1190)/10000, 41+float64((x/1190)%900)/10000)
			})
			q := `get rides select id where run_at <= now() order distance(pickup, $1) limit 1`
			times := make([]time.Duration, 0, b.N)
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				p := vals([]any{29 + float64(i%119)/1000, 41 + float64(i%90)/1000})
				start := time.Now()
				if _, err := db.Exec(context.Background(), q, p); err != nil {
					b.Fatal(err)
				}
				times = append(times, time.Since(start))
			}
			b.StopTimer()
			percentiles(b, times)
		})
	}
}

// BenchmarkJob is the queue page's worker loop in process, as the HTTP
// path runs it: a claim of ten returning its rows, then one batch of ten
// acks by id and owner. An op is one job; the database is in memory,
// so the figure is the engine's CPU alone (the HTTP path's is
// httpapi.BenchmarkHTTPQueue):
//
//	cd server && go test ./engine -run '^$' -bench BenchmarkJob -benchmem
func BenchmarkJob(b *testing.B) { benchJob(b, false) }

// BenchmarkJobStored is BenchmarkJob with each written document encoded
// as a file-backed database hands it to its store (the store itself keeps
// nothing): the engine's share of a durable server's job.
func BenchmarkJobStored(b *testing.B) { benchJob(b, true) }

func benchJob(b *testing.B, stored bool) {
	db, _ := openMem(b)
	db.keep = stored
	mustExec(b, db, `create collection jobs (payload json, run_at timestamp @sorted, owner text, attempts int, error text)`)
	claims := (b.N + 9) / 10
	fillJobs(b, db, claims*10+100000)
	claim, err := Parse([]Statement{{Query: `set jobs {owner: $1, run_at: now() + 30000, attempts: attempts + 1} where run_at <= now() order run_at limit 10 returning *`}})
	if err != nil {
		b.Fatal(err)
	}
	ack, err := ParseStatement(`del jobs where id = $1 and owner = $2 require 1`)
	if err != nil {
		b.Fatal(err)
	}
	owner := fenecql.Text("w1")
	claim[0].Params = []fenecql.Value{owner}
	ctx := context.Background()
	runtime.GC() // the fill's garbage is not the loop's
	cpu0 := processCPU(b)
	b.ResetTimer()
	for range claims {
		rs, err := db.Run(ctx, claim, RunOptions{})
		if err != nil || len(rs[0].Rows) != 10 {
			b.Fatalf("claim: %v", err)
		}
		acks := make([]Parsed, len(rs[0].Rows))
		for k, row := range rs[0].Rows {
			acks[k] = Parsed{Stmt: ack, Params: []fenecql.Value{row[0], owner}}
		}
		if _, err := db.Run(ctx, acks, RunOptions{}); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(processCPU(b)-cpu0)/float64(b.N), "cpu-ns/op")
}

// processCPU returns the process's CPU time so far, user and system, in
// ns: on a shared machine a less noisy figure than the wall clock's.
func processCPU(b *testing.B) int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}

// BenchmarkHeldJobs times a full collection with a queue's jobs held in
// memory: what the collector marks on every cycle however little changes,
// so what a document's representation costs in CPU (cpu-ns/op is one
// collection's CPU, every worker's), bytes and objects.
//
//	cd server && go test ./engine -run '^$' -bench BenchmarkHeldJobs -benchtime 10x
func BenchmarkHeldJobs(b *testing.B) {
	for _, n := range []int{100000, 1000000} {
		b.Run(fmt.Sprintf("jobs=%d", n), func(b *testing.B) {
			db, _ := openMem(b)
			mustExec(b, db, `create collection jobs (payload json, run_at timestamp @sorted, owner text, attempts int, error text)`)
			fillJobs(b, db, n)
			runtime.GC()
			var ms runtime.MemStats
			runtime.ReadMemStats(&ms)
			cpu0 := processCPU(b)
			b.ResetTimer()
			for range b.N {
				runtime.GC()
			}
			b.StopTimer()
			b.ReportMetric(float64(processCPU(b)-cpu0)/float64(b.N), "cpu-ns/op")
			b.ReportMetric(float64(ms.HeapAlloc)/float64(n), "heap-B/job")
			b.ReportMetric(float64(ms.HeapObjects)/float64(n), "objects/job")
			runtime.KeepAlive(db)
		})
	}
}

// delClaimed deletes the rows a claim answered, by their ids (the first
// column), as a worker acks them.
func delClaimed(b *testing.B, db *DB, r *Result) {
	b.Helper()
	ids := make([]fenecql.Value, len(r.Rows))
	for k, row := range r.Rows {
		ids[k] = row[0]
	}
	if _, err := db.Exec(context.Background(), `del jobs where id in $1`, []fenecql.Value{fenecql.List(ids)}); err != nil {
		b.Fatal(err)
	}
}
