package httpapi

import (
	"slices"
	"testing"
)

func TestSchedEnv(t *testing.T) {
	for _, tt := range []struct {
		in, want []string
		changed  bool
	}{
		{[]string{"HOME=/root"}, []string{"HOME=/root", "GODEBUG=" + schedTrace}, true},
		{[]string{"GODEBUG=", "A=b"}, []string{"GODEBUG=" + schedTrace, "A=b"}, true},
		{[]string{"GODEBUG=gctrace=1"}, []string{"GODEBUG=gctrace=1," + schedTrace}, true},
		// The user's schedtrace stays, whatever it is: 0 turns it off.
		{[]string{"GODEBUG=schedtrace=0"}, []string{"GODEBUG=schedtrace=0"}, false},
		{[]string{"GODEBUG=gctrace=1,schedtrace=1000"}, []string{"GODEBUG=gctrace=1,schedtrace=1000"}, false},
		// Only the first GODEBUG counts, as for the runtime.
		{[]string{"GODEBUG=gctrace=1", "GODEBUG=schedtrace=0"}, []string{"GODEBUG=gctrace=1," + schedTrace, "GODEBUG=schedtrace=0"}, true},
	} {
		in := slices.Clone(tt.in)
		got, changed := SchedEnv(in)
		if !slices.Equal(got, tt.want) || changed != tt.changed {
			t.Errorf("SchedEnv(%q) = %q, %v; want %q, %v", tt.in, got, changed, tt.want, tt.changed)
		}
		if !slices.Equal(in, tt.in) {
			t.Errorf("SchedEnv(%q) changed its argument to %q", tt.in, in)
		}
	}
}
