package httpapi

import (
	"context"
	"math"
	"runtime/debug"
	"sync/atomic"
	"testing"
	"time"
)

func TestTuneGC(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(100))
	defer debug.SetMemoryLimit(debug.SetMemoryLimit(math.MaxInt64))

	t.Setenv("GOGC", "")
	t.Setenv("GOMEMLIMIT", "")
	if !TuneGC(0) && memTotal() > 0 {
		t.Error("TuneGC(0) without GOMEMLIMIT: not the default limit")
	}
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
	if TuneGC(0) {
		t.Error("TuneGC(0) with GOMEMLIMIT set: the default limit")
	}
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
	if TuneGC(300 << 20) {
		t.Error("TuneGC(--memory): the default limit")
	}
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

// The default limit follows the live heap: the floor for a small one, half
// again what is live for a large one, never past half the machine; and it
// moves as the live heap does, until stopped.
func TestFollowLive(t *testing.T) {
	const gib = 1 << 30
	for _, tt := range []struct{ live, total, want int64 }{
		{0, 16 * gib, LiveFloor},
		{100 << 20, 16 * gib, LiveFloor},
		{gib, 16 * gib, gib + gib/2},
		{6 * gib, 16 * gib, 8 * gib},
		{gib, 0, gib + gib/2},
		{100 << 20, 512 << 20, 256 << 20},
	} {
		if got := liveLimit(tt.live, tt.total); got != tt.want {
			t.Errorf("liveLimit(%d, %d) = %d, want %d", tt.live, tt.total, got, tt.want)
		}
	}

	var live, set atomic.Int64
	live.Store(2 * gib)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		followLive(ctx, time.Millisecond, live.Load, 16*gib, set.Store)
		close(done)
	}()
	waitFor := func(want int64) {
		t.Helper()
		for deadline := time.Now().Add(10 * time.Second); set.Load() != want; time.Sleep(time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("limit %d, want %d", set.Load(), want)
			}
		}
	}
	waitFor(3 * gib)
	live.Store(gib) // half the documents deleted: the limit comes down
	waitFor(gib + gib/2)
	cancel()
	<-done
	live.Store(4 * gib)
	time.Sleep(20 * time.Millisecond)
	if got := set.Load(); got != gib+gib/2 {
		t.Errorf("the limit moved to %d after the follower stopped", got)
	}
}
