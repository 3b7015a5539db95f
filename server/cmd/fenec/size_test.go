package main

import (
	"strings"
	"testing"

	"github.com/fenecdb/fenec/server/engine"
)

// TestCheckMemoryNamesFigure: checkMemory refuses a limit below the
// indexes' IndexBytes, the evicted rows' counted as the engine estimates
// them now (engine/footprint.go), and names the figure and the --memory
// to give; at or above it, it starts. The figures are 50 000 000 jobs of
// the queue page's shape, all but a head evicted: 11 bytes each.
func TestCheckMemoryNamesFigure(t *testing.T) {
	fps := []engine.Footprint{{Name: "jobs", Rows: 16384, Evicted: 50_000_000 - 16384, IndexBytes: 16384*26 + (50_000_000-16384)*11}}
	err := checkMemory(512<<20, fps)
	if err == nil {
		t.Fatal("--memory 512MiB for the indexes of 50 000 000 jobs (525 MiB): started")
	}
	want := "--memory 512.0MiB is less than the indexes of the loaded collections alone need: about 524.8MiB (jobs: 50000000 documents, 524.8MiB); give --memory 525MiB or more"
	if err.Error() != want {
		t.Fatalf("refused with\n%q\nwant\n%q", err, want)
	}
	if err := checkMemory(1<<30, fps); err != nil {
		t.Fatalf("--memory 1GiB: %v", err)
	}
	if err := checkMemory(525<<20, fps); err != nil || !strings.Contains(want, "525MiB") {
		t.Fatalf("--memory 525MiB, the figure named: %v", err)
	}
}
