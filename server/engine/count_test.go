package engine

import (
	"fmt"
	"runtime"
	"strings"
	"testing"
)

// TestCountKeepsNoRows: a count answers as the rows would, and without a
// limit, offset or sort it makes no list of them (plan.count): counting
// 50 000 rows allocates a few KB, not a pointer per row.
func TestCountKeepsNoRows(t *testing.T) {
	db, _ := openMem(t)
	mustExec(t, db, jobsSchema)
	const n = 50_000
	for i := 0; i < n; i += 5000 {
		var b strings.Builder
		for k := i; k < i+5000; k++ {
			if k > i {
				b.WriteByte(',')
			}
			fmt.Fprintf(&b, `{run_at: %d, attempts: %d}`, 1_700_000_000_000+k, k%4)
		}
		mustExec(t, db, `put jobs [`+b.String()+`]`)
	}
	for q, want := range map[string]int{
		`get jobs count`:                                   n,
		`get jobs count where attempts = 1`:                n / 4,
		`get jobs count where run_at >= 1700000040000`:     10_000,
		`get jobs count order run_at`:                      n,
		`get jobs count where attempts = 2 limit 7`:        7,
		`get jobs count where attempts = 3 offset 12495`:   5,
		`get jobs count where attempts < 2 order attempts`: n / 2,
	} {
		if got := answer(mustExec(t, db, q)); got != fmt.Sprintf(`[{"count":%d}]`, want) {
			t.Errorf("%s: %s, want %d", q, got, want)
		}
	}
	if raceEnabled {
		return
	}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	mustExec(t, db, `get jobs count`)
	mustExec(t, db, `get jobs count where attempts = 1`)
	runtime.ReadMemStats(&after)
	if b := after.TotalAlloc - before.TotalAlloc; b > 64<<10 {
		t.Errorf("two counts of %d rows allocated %d bytes, want under 64 KiB", n, b)
	}
}
