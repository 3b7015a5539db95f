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
	TuneGC(0)
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
	TuneGC(0)
	if got := debug.SetGCPercent(100); got != 100 {
		t.Errorf("GC percent %d with GOGC set", got)
	}
	if limit := debug.SetMemoryLimit(-1); limit != math.MaxInt64 {
		t.Errorf("memory limit %d with GOMEMLIMIT set", limit)
	}
}

// --memory wins over GOMEMLIMIT: the flag is the operator's latest word.
// Loading runs at LoadGCPercent and sets the server's target back.
func TestTuneGCLimitAndLoading(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(100))
	defer debug.SetMemoryLimit(debug.SetMemoryLimit(math.MaxInt64))

	t.Setenv("GOGC", "")
	t.Setenv("GOMEMLIMIT", "1GiB")
	TuneGC(300 << 20)
	if limit := debug.SetMemoryLimit(-1); limit != 300<<20 {
		t.Errorf("memory limit %d, want --memory's %d", limit, 300<<20)
	}
	loaded := Loading()
	if got := debug.SetGCPercent(-1); got != LoadGCPercent {
		t.Errorf("GC percent %d while loading, want %d", got, LoadGCPercent)
	}
	debug.SetGCPercent(100)
	loaded()
	if got := debug.SetGCPercent(400); got != 400 {
		t.Errorf("GC percent %d once loaded, want 400 back", got)
	}

	// An operator's GOGC holds while loading too.
	t.Setenv("GOGC", "50")
	debug.SetGCPercent(50)
	Loading()()
	if got := debug.SetGCPercent(100); got != 50 {
		t.Errorf("GC percent %d after loading with GOGC=50", got)
	}
}
