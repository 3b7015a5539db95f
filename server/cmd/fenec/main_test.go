package main

import (
	"fmt"
	"os"
	"testing"

	"github.com/fenecdb/fenec/server/httpapi/apitest"
)

// bin is the fenec binary these tests start, built once in TestMain.
var bin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "fenec-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	// FENEC_TEST_BIN runs the tests against a binary of one's own, such as
	// one built with -race (docs/cluster.md, Tests).
	if bin = os.Getenv("FENEC_TEST_BIN"); bin == "" {
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

// start runs `fenec serve` with args and answers it with a client for it.
func start(t *testing.T, args ...string) (*apitest.Process, *apitest.Client) {
	t.Helper()
	p := apitest.Start(t, bin, args...)
	return p, &apitest.Client{T: t, Base: p.URL}
}
