// Package testwait waits, in tests, until a state is reached: a condition
// polled under a deadline, never a fixed sleep, for the time a state takes
// to come depends on the machine's load (CI runs on two cores). One
// definition for every package's tests, below them all.
package testwait

import (
	"flag"
	"strconv"
	"testing"
	"time"
)

// Timeout is how long Until waits before it fails the test: far longer
// than any state a test waits for takes, even on a loaded machine.
const Timeout = 10 * time.Second

// Until polls cond until it holds, and fails tb, naming what it waited
// for, when it has not within Timeout. Call it from the test's goroutine.
func Until(tb testing.TB, what string, cond func() bool) {
	tb.Helper()
	if !Within(Timeout, cond) {
		tb.Fatalf("waited %v for %s", Timeout, what)
	}
}

// Within polls cond until it holds or d has passed, and returns whether it
// held.
func Within(d time.Duration, cond func() bool) bool {
	for end := time.Now().Add(d); !cond(); time.Sleep(time.Millisecond) {
		if time.Now().After(end) {
			return cond()
		}
	}
	return true
}

// Parallel sets -test.parallel to n unless the command line gave it: for
// a test binary whose parallel tests spend their time waiting (on servers,
// timeouts, processes, elections), not on the test's own cores, so that
// more of them than cores run at once. Call it from TestMain after
// flag.Parse.
func Parallel(n int) {
	set := false
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == "test.parallel" })
	if !set {
		flag.Set("test.parallel", strconv.Itoa(n))
	}
}
