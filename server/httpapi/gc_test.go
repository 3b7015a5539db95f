package httpapi

import (
	"math"
	"runtime/debug"
	"testing"
)

func TestTuneGC(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(100))
	defer debug.SetMemoryLimit(debug.SetMemoryLimit(math.MaxInt64))

	t.Setenv("GOGC", "")
	t.Setenv("GOMEMLIMIT", "")
	TuneGC()
	if got := debug.SetGCPercent(100); got != 400 {
		t.Errorf("GC percent %d, want 400", got)
	}
	if limit := debug.SetMemoryLimit(-1); limit == math.MaxInt64 || limit != memTotal()/2 {
		t.Errorf("memory limit %d, want half of %d", limit, memTotal())
	}

	// An operator's GOGC and GOMEMLIMIT are left alone.
	debug.SetMemoryLimit(math.MaxInt64)
	t.Setenv("GOGC", "50")
	t.Setenv("GOMEMLIMIT", "1GiB")
	TuneGC()
	if got := debug.SetGCPercent(100); got != 100 {
		t.Errorf("GC percent %d with GOGC set", got)
	}
	if limit := debug.SetMemoryLimit(-1); limit != math.MaxInt64 {
		t.Errorf("memory limit %d with GOMEMLIMIT set", limit)
	}
}
