package main

import (
	"flag"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"

	"github.com/fenecdb/fenec/server/httpapi/apitest"
	"github.com/fenecdb/fenec/server/internal/testwait"
)

// bin is the fenec binary these tests start, built once in TestMain.
var bin string

// parallel is how many of these tests run at once unless -parallel says
// otherwise: they spend their time waiting on the processes they start,
// not on the test's own cores, so more of them than cores fit.
const parallel = 4

func TestMain(m *testing.M) {
	flag.Parse()
	testwait.Parallel(parallel)
	dir, err := os.MkdirTemp("", "fenec-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	// FENEC_TEST_BIN runs the tests against a binary of one's own, such as
	// one built with -race (docs/cluster.md, Tests); FENEC_BIN does too,
	// as in every suite that starts a server (make test unsets it here, so
	// that these tests test the source).
	if bin = os.Getenv("FENEC_TEST_BIN"); bin == "" {
		bin = os.Getenv("FENEC_BIN")
	}
	if bin == "" {
		bin, err = apitest.Build(dir)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "building fenec:", err)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// start runs `fenec serve` with args and returns it with a client for it.
func start(t *testing.T, args ...string) (*apitest.Process, *apitest.Client) {
	t.Helper()
	p := apitest.Start(t, bin, args...)
	return p, &apitest.Client{T: t, Base: p.URL}
}

// TestVersion runs `fenec version`: its four lines, the SQLite one asked of
// the embedded library.
func TestVersion(t *testing.T) {
	t.Parallel()
	out, err := exec.Command(bin, "version").Output()
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(lines) != 4 || !strings.HasPrefix(lines[0], "fenec ") || !strings.HasPrefix(lines[1], "commit ") ||
		!strings.HasPrefix(lines[2], "go go1.") || !regexp.MustCompile(`^sqlite 3\.\d+\.\d+$`).MatchString(lines[3]) {
		t.Errorf("fenec version:\n%s", out)
	}
}
