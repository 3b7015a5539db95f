package engine

import (
	"context"
	"fmt"
	"runtime"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/fenecdb/fenec/server/fenecql"
)

// BenchmarkClaimLayout times the claim of ten as queue-bench's claim part
// does (bench/cmd/queuebench/process.go): each claim's jobs deleted by id
// and as many new ones put. The fill is the one queue-bench had until its
// fill was made one run (bench's TestTopInOrder): batches of 5000 jobs
// made at once, each batch's run_at one a millisecond over the same five
// seconds, so in run_at order consecutive jobs come from
// different batches, ids 5000 apart (spread); or one run_at a job in id
// order (inorder), as jobs enqueued over time are. spread-warm reads the
// claim's rows, untimed, just before it: what the claim costs when its
// rows are in the cache. p50-ns is the claim's.
//
//	cd server && go test ./engine -run '^$' -bench BenchmarkClaimLayout -benchtime 5000x
func BenchmarkClaimLayout(b *testing.B) {
	for _, layout := range []string{"spread", "inorder", "spread-warm"} {
		for _, n := range []int{1000, 1000000} {
			b.Run(fmt.Sprintf("layout=%s/jobs=%d", layout, n), func(b *testing.B) {
				db, _ := openMem(b)
				mustExec(b, db, jobsSchema)
				const batch = 5000
				for i := 0; i < n; i += batch {
					var sb strings.Builder
					sb.WriteString("put jobs [")
					for k := 0; k < batch && i+k < n; k++ {
						if k > 0 {
							sb.WriteString(",")
						}
						at := -6000 + k
						if layout == "inorder" {
							at = -1000 - n + i + k
						}
						fmt.Fprintf(&sb, `{payload: {"to": "u%d@example.com"}, run_at: now() + %d, attempts: 0}`, i+k, at)
					}
					sb.WriteString("]")
					mustExec(b, db, sb.String())
				}
				claim := `set jobs {owner: $1, run_at: now() + 30000, attempts: attempts + 1} where run_at <= now() order run_at limit 10 returning *`
				owner := vals("w0")
				put := `put jobs [{payload: {"to": "x@example.com"}, run_at: now() - 1010, attempts: 0}, {payload: {"to": "x@example.com"}, run_at: now() - 1009, attempts: 0}, {payload: {"to": "x@example.com"}, run_at: now() - 1008, attempts: 0}, {payload: {"to": "x@example.com"}, run_at: now() - 1007, attempts: 0}, {payload: {"to": "x@example.com"}, run_at: now() - 1006, attempts: 0}, {payload: {"to": "x@example.com"}, run_at: now() - 1005, attempts: 0}, {payload: {"to": "x@example.com"}, run_at: now() - 1004, attempts: 0}, {payload: {"to": "x@example.com"}, run_at: now() - 1003, attempts: 0}, {payload: {"to": "x@example.com"}, run_at: now() - 1002, attempts: 0}, {payload: {"to": "x@example.com"}, run_at: now() - 1001, attempts: 0}]`
				runtime.GC()
				times := make([]time.Duration, 0, b.N)
				var claimCPU time.Duration
				b.ResetTimer()
				warm := `get jobs where run_at <= now() order run_at limit 10`
				for i := 0; i < b.N; i++ {
					if layout == "spread-warm" {
						// The same rows read first, untimed: the claim then
						// finds them in the cache.
						mustExec(b, db, warm)
					}
					start := time.Now()
					r, err := db.Exec(context.Background(), claim, owner)
					times = append(times, time.Since(start))
					claimCPU += times[len(times)-1]
					if err != nil || len(r.Rows) != 10 {
						b.Fatalf("claim: %v", err)
					}
					delClaimed(b, db, r)
					mustExec(b, db, put)
				}
				b.StopTimer()
				sort.Slice(times, func(i, j int) bool { return times[i] < times[j] })
				b.ReportMetric(float64(times[len(times)/2].Nanoseconds()), "p50-ns")
				b.ReportMetric(float64(claimCPU.Nanoseconds())/float64(b.N), "mean-ns")
			})
		}
	}
}

// BenchmarkRowReach times what a claim does per row before it writes:
// find the document by id in the collection's id tree (get), and read its
// values as patch decodes them (get+copy), for ids taken in queue-bench's
// spread order (each next id 5000 on, from another batch) or one after
// another, over collections of 1 000 and 1 000 000 jobs. An op is one
// row: at a million jobs in spread order each is a walk down the id tree
// and a document out of the cache.
//
//	cd server && go test ./engine -run '^$' -bench BenchmarkRowReach -benchtime 2000000x
func BenchmarkRowReach(b *testing.B) {
	fields := []Field{{Name: "payload", Type: fenecql.TypeJSON}, {Name: "run_at", Type: fenecql.TypeTimestamp, Index: fenecql.IndexSorted}, {Name: "owner", Type: fenecql.TypeText}, {Name: "attempts", Type: fenecql.TypeInt}, {Name: "error", Type: fenecql.TypeText}}
	for _, order := range []string{"spread", "inorder"} {
		for _, n := range []int{1000, 1000000} {
			for _, what := range []string{"get", "get+copy"} {
				b.Run(fmt.Sprintf("order=%s/jobs=%d/%s", order, n, what), func(b *testing.B) {
					c := newCollection("jobs", fields)
					for i := 1; i <= n; i++ {
						vals := make([]fenecql.Value, len(fields))
						vals[0] = fenecql.Pack(fenecql.ObjectOf(&fenecql.Object{Keys: []string{"to"}, Vals: []fenecql.Value{fenecql.Text(fmt.Sprintf("u%d@example.com", i))}}))
						vals[1], vals[3] = fenecql.Time(int64(i)), fenecql.Int(0)
						c.set(c.s.encode(int64(i), vals))
					}
					ids := make([]int64, n)
					batches := max(n/5000, 1)
					for i := range ids {
						ids[i] = int64(i + 1)
						if order == "spread" {
							ids[i] = int64((i%batches)*5000 + i/batches + 1)
						}
					}
					var scratch fieldBuf
					runtime.GC()
					b.ResetTimer()
					// Each next row waits on the one before (its attempts, 0,
					// is added in), as a claim's rows do, each patched and
					// written before the next is found: the rows' misses
					// come one after another, not overlapped.
					k := 0
					for range b.N {
						d := c.get(ids[k])
						if what == "get" {
							k += int(d.ID) - int(ids[k])
						} else {
							k += int(d.vals(&scratch)[3].Int())
						}
						if k++; k == n {
							k = 0
						}
					}
				})
			}
		}
	}
}
