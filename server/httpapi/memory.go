package httpapi

import (
	"context"
	"log/slog"
	"runtime/metrics"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// MemoryReportEvery is how often, at most, the server logs and counts its
// live heap past --memory.
const MemoryReportEvery = time.Minute

// memoryWatch notices when --memory cannot be kept: the live heap (what
// the last collection found reachable, which no collecting frees) is past
// it. Every row is held in memory and none is evicted to the file yet, so
// the server can only go on: it serves every request as before — a claim
// or an ack is never refused for memory — and says so, in the log and in
// fenec_memory_over_limit_total, at most once per MemoryReportEvery while
// it lasts (docs/operations.md, Memory).
type memoryWatch struct {
	limit int64
	live  func() int64 // the live heap's bytes; a test sets its own
	now   func() time.Time
	log   *slog.Logger
	over  prometheus.Counter
	// told is when the watch last reported; zero: never.
	told time.Time
	// largest returns the collection estimated to take the most memory,
	// and its bytes, for the log line.
	largest func() (string, int64)
}

// check reads the live heap and reports it if it is past the limit and
// the last report is MemoryReportEvery old; it returns whether it did.
func (w *memoryWatch) check() bool {
	live := w.live()
	if live <= w.limit {
		return false
	}
	now := w.now()
	if !w.told.IsZero() && now.Sub(w.told) < MemoryReportEvery {
		return false
	}
	w.told = now
	w.over.Inc()
	attrs := []any{"live_bytes", live, "limit_bytes", w.limit}
	if name, b := w.largest(); name != "" {
		attrs = append(attrs, "largest_collection", name, "largest_collection_bytes", b)
	}
	w.log.Warn("the live heap is past --memory: serving on, the collector working harder; rows are not evicted to the file yet, so only fewer documents or a larger --memory brings it back under", attrs...)
	return true
}

// liveHeap returns the Go heap's live bytes as of the last collection.
func liveHeap() int64 {
	s := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindUint64 {
		return 0
	}
	return int64(s[0].Value.Uint64())
}

// WatchMemory checks the live heap against limit (fenec serve --memory)
// now and then every interval, until ctx is done; memoryWatch says what it
// does past it.
func (s *Server) WatchMemory(ctx context.Context, limit int64, every time.Duration) {
	w := s.memoryWatch(limit)
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		w.check()
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func (s *Server) memoryWatch(limit int64) *memoryWatch {
	return &memoryWatch{
		limit: limit, live: liveHeap, now: time.Now, log: s.log, over: s.metrics.memoryOver,
		largest: func() (name string, b int64) {
			for _, f := range s.db.Footprints() {
				if f.Bytes > b {
					name, b = f.Name, f.Bytes
				}
			}
			return name, b
		},
	}
}
