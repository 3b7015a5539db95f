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
// collection, and unless GOMEMLIMIT says otherwise a soft limit at half the
// machine's memory brings collections back sooner as it nears it.
func TuneGC() {
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(400)
	}
	if os.Getenv("GOMEMLIMIT") == "" {
		if total := memTotal(); total > 0 {
			debug.SetMemoryLimit(total / 2)
		}
	}
}
