package httpapi

import (
	"os"
	"runtime/debug"
)

// TuneGC sets the collector for a database server (fenec serve, and the
// package's benchmark server): its documents live as long as
// the server does, so Go's default — collect whenever the heap has doubled —
// spends most of its work marking the same long-lived documents again and
// again (over a million jobs, a fifth of the server's CPU). Unless GOGC says
// otherwise the heap may grow to five times what is live before a
// collection. The soft limit brings collections back sooner as the heap
// nears it: limit when it is positive (fenec serve --memory), else
// GOMEMLIMIT when set, else half the machine's memory.
func TuneGC(limit int64) {
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(400)
	}
	switch {
	case limit > 0:
		debug.SetMemoryLimit(limit)
	case os.Getenv("GOMEMLIMIT") == "":
		if total := memTotal(); total > 0 {
			debug.SetMemoryLimit(total / 2)
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
