package httpapi

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// TestMemoryWatchOncePerMinute: past --memory the watch logs and counts
// once, then not again until a minute has gone by, however often it looks;
// back under the limit it says nothing. The time and the live heap are the
// test's own.
func TestMemoryWatchOncePerMinute(t *testing.T) {
	var logged bytes.Buffer
	now := time.Date(2026, 5, 3, 9, 20, 0, 0, time.UTC)
	live := int64(100)
	over := prometheus.NewCounter(prometheus.CounterOpts{Name: "over"})
	w := &memoryWatch{
		limit: 200, live: func() int64 { return live }, now: func() time.Time { return now },
		log: slog.New(slog.NewTextHandler(&logged, nil)), over: over,
		largest: func() (string, int64) { return "jobs", 4096 },
	}
	step := func(d time.Duration, heap int64, wantReport bool, wantCount float64) {
		t.Helper()
		now, live = now.Add(d), heap
		if got := w.check(); got != wantReport {
			t.Errorf("at +%v with %d live: reported %v, want %v", now.Sub(time.Date(2026, 5, 3, 9, 20, 0, 0, time.UTC)), heap, got, wantReport)
		}
		if got := testutil.ToFloat64(over); got != wantCount {
			t.Errorf("the counter is %v, want %v", got, wantCount)
		}
	}
	step(0, 100, false, 0)              // under
	step(10*time.Second, 200, false, 0) // at the limit is not past it
	step(10*time.Second, 201, true, 1)  // past: reported
	step(10*time.Second, 900, false, 1) // still past, 10 s later
	step(49*time.Second, 900, false, 1) // 59 s after the report
	step(time.Second, 900, true, 2)     // a minute after it
	step(30*time.Second, 150, false, 2) // back under
	step(2*time.Minute, 150, false, 2)  // and staying there
	step(10*time.Second, 300, true, 3)  // past again, over a minute since the last
	if n := strings.Count(logged.String(), "the live heap is past --memory"); n != 3 {
		t.Errorf("%d log lines, want 3:\n%s", n, logged.String())
	}
	if !strings.Contains(logged.String(), "live_bytes=900 limit_bytes=200 largest_collection=jobs largest_collection_bytes=4096") {
		t.Errorf("the log does not give the figures:\n%s", logged.String())
	}
}
