package httpapi

import (
	"slices"
	"strings"
)

// schedTrace asks the Go runtime for a scheduler trace line every
// 2^31-1 ms (24.8 days), which it never gets to: what it changes is that
// the runtime's monitor thread (sysmon) then never enters its deep sleep.
const schedTrace = "schedtrace=2147483647"

// SchedEnv returns environ (as os.Environ returns it) with schedTrace
// added to GODEBUG, and whether it added it: fenec serve re-executes
// itself with it (and the package's benchmark starts its server with it).
// A GODEBUG that names schedtrace already is left as it is: schedtrace=0
// turns this off.
//
// Why: sysmon sleeps deeply once every P is idle, and the next system
// call that blocks wakes it and sets it to poll every 20 µs again, for as
// long as any P is busy (runtime/proc.go, sysmon; golang/go#18236). A
// server under --sync always with few clients goes idle between requests
// and makes one blocking call per request (the log's fdatasync), so each
// request paid a wake of sysmon and a few of its 20-µs polls while the
// sync was under way. Kept out of the deep sleep, sysmon backs off to a
// poll every 10 ms while it finds nothing to do, which saves context
// switches and CPU at few workers (BenchmarkHTTPQueue under --sync always
// shows it; docs/benchmarks.md, "The runtime's monitor thread"). The price
// is sysmon's 100 wakes a second while the server is idle, and a
// scheduler trace in the output of a fatal error.
func SchedEnv(environ []string) ([]string, bool) {
	for i, kv := range environ {
		v, ok := strings.CutPrefix(kv, "GODEBUG=")
		if !ok {
			continue
		}
		// The runtime reads the first GODEBUG (as os.Getenv does).
		for _, f := range strings.Split(v, ",") {
			if strings.HasPrefix(strings.TrimSpace(f), "schedtrace=") {
				return environ, false
			}
		}
		out := slices.Clone(environ)
		if v == "" {
			out[i] = "GODEBUG=" + schedTrace
		} else {
			out[i] = kv + "," + schedTrace
		}
		return out, true
	}
	return append(slices.Clone(environ), "GODEBUG="+schedTrace), true
}
