package httpapi

import (
	"context"
	"os"
	"runtime/debug"
	"time"
)

// TuneGC sets the collector for a database server (fenec serve, and the
// package's benchmark server): its documents live as long as
// the server does, so Go's default — collect whenever the heap has doubled —
// spends most of its work marking the same long-lived documents again and
// again (over a million jobs, a fifth of the server's CPU). Unless GOGC says
// otherwise the heap may grow to five times what is live before a
// collection. The soft limit brings collections back sooner as the heap
// nears it: limit when it is positive (fenec serve --memory), else
// GOMEMLIMIT when set, else half the machine's memory until FollowLive
// takes over. It returns whether the limit is that default, which
// FollowLive should then keep.
func TuneGC(limit int64) (byDefault bool) {
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(400)
	}
	switch {
	case limit > 0:
		debug.SetMemoryLimit(limit)
	case os.Getenv("GOMEMLIMIT") == "":
		if total := memTotal(); total > 0 {
			debug.SetMemoryLimit(total / 2)
			return true
		}
	}
	return false
}

// LiveFloor is the least default soft limit: below it the heap may grow to
// five times what is live (GOGC=400), which is the queue's CPU (a server
// with a small backlog collects rarely).
const LiveFloor = 512 << 20

// liveLimit is the default soft limit for a live heap of live bytes on a
// machine of total bytes: half again what is live, at least LiveFloor, at
// most half the machine. At GOGC=400 alone a large backlog's heap grows to
// five times what is live between collections — ten million jobs filled
// over HTTP, 1.4 GB live, held 6.2 GB of RSS (bench/results/memory-10m.md)
// — and what a server holds once, the system rarely gets back while it
// runs. Past LiveFloor the collector runs when the heap has grown by half
// of what is live: its work marks the documents' headers, 24 bytes each
// (docs/architecture.md, Memory), so it stays cheap beside a backlog
// that size.
func liveLimit(live, total int64) int64 {
	l := max(LiveFloor, live+live/2)
	if total > 0 {
		l = min(l, total/2)
	}
	return l
}

// FollowLive keeps the default soft limit at liveLimit of the live heap
// (what the last collection found reachable), read every interval, until
// ctx is done. fenec serve runs it once its file is loaded, when TuneGC
// says the limit is the default: an operator's --memory or GOMEMLIMIT is
// left as given.
func FollowLive(ctx context.Context, every time.Duration) {
	followLive(ctx, every, liveHeap, memTotal(), func(l int64) { debug.SetMemoryLimit(l) })
}

func followLive(ctx context.Context, every time.Duration, live func() int64, total int64, set func(int64)) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		set(liveLimit(live(), total))
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// LoadGCPercent is the collector's target while a file loads. The engine
// decodes the file's rows on every CPU (engine/load.go), so garbage is
// made faster than the collector, working beside the decoders, marks: at
// Go's default of 100 the heap overshot its goal, and a million jobs
// loaded with a peak RSS of ~545 MiB, against ~495 MiB for a load on one
// goroutine. The peak is what the machine must have free to restart, and
// it is measured against Redis's used_memory for the same jobs
// (bench/results/memory.md): at 60 a million jobs peaked at 290 MB (2.2
// times), at 20 at ~250 MB, for ~0.9 s more CPU (3.4 s against 2.5 s,
// in process), the load still taking ~2 s on two cores: the documents
// hold few pointers (a header each, docs/architecture.md "Memory"), so
// a collection marks little.
const LoadGCPercent = 20

// Loading sets the collector for loading a file, and returns the function
// that sets it back once the file is loaded. A load makes garbage as fast
// as it makes documents (each row's text, decoded, and its decoding's
// scratch); at TuneGC's setting the heap would grow to several times the
// documents before a collection, and a server restarted on a million jobs
// would hold that peak as its resident memory for as long as it runs
// (bench/results/memory.md). So the load collects sooner than Go's default
// (LoadGCPercent), and when it is done the garbage is collected and given
// back to the system at once.
func Loading() (loaded func()) {
	if os.Getenv("GOGC") != "" {
		return func() {}
	}
	prev := debug.SetGCPercent(LoadGCPercent)
	return func() {
		debug.SetGCPercent(prev)
		debug.FreeOSMemory()
	}
}
