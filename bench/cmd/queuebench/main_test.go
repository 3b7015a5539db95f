package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/fenecdb/fenec/server/httpapi/apitest"
)

// TestSmoke runs Fenec's parts of the benchmark over a few hundred jobs,
// so the program keeps working between the runs of make queue-bench; the
// peers are left out, as they need packages a test may not install.
func TestSmoke(t *testing.T) {
	if testing.Short() {
		t.Skip("starts fenec servers")
	}
	// FENEC_BIN benchmarks a binary of one's own (make test unsets it, so
	// that the smoke run is of the source).
	bin := os.Getenv("FENEC_BIN")
	if bin == "" {
		var err error
		if bin, err = apitest.Build(t.TempDir()); err != nil {
			t.Fatal(err)
		}
	}
	parts, err := parseParts("claim,process,http,wake")
	if err != nil {
		t.Fatal(err)
	}
	rep, err := run(config{bin: bin, jobs: 300, workers: []int{1, 4}, duration: 200 * time.Millisecond, rounds: 2, samples: 6, parts: parts})
	if err != nil {
		t.Fatal(err)
	}
	out := t.TempDir()
	if err := rep.write(out); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"queue.md", "queue.json", "queue.png"} {
		if st, err := os.Stat(filepath.Join(out, f)); err != nil || st.Size() == 0 {
			t.Errorf("%s: %v", f, err)
		}
	}
	b, _ := os.ReadFile(filepath.Join(out, "queue.json"))
	var back report
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	// The claim at 1 000 and 300 jobs, @sorted and not, and over 300
	// leased: 6; in process, 2 worker counts by 2 ways to claim: 4; over
	// HTTP, 2 durabilities by 2 worker counts and three round trips: 6;
	// put → worker, held and polling twice: 3.
	if len(back.Figures) != 6+4+6+3 {
		t.Errorf("%d figures, want 19:\n%s", len(back.Figures), rep.markdown(1))
	}
	for _, f := range back.Figures {
		r := f.Fenec
		if r == nil || (r.JobsPerSec == 0 && r.P50 == 0 && r.Unit == "") {
			t.Errorf("%s: nothing measured", f.Name)
		}
		if f.Method == threeStatements && r != nil && r.Unit == "" {
			t.Errorf("%s: no share of lost races", f.Name)
		}
		// Each throughput cell is two drives, the held figure two
		// windows of 6 jobs, pooled.
		if r != nil && r.JobsPerSec > 0 && len(r.Rounds) != 2 {
			t.Errorf("%s: %d drives, want 2", f.Name, len(r.Rounds))
		}
		if strings.Contains(f.Name, "Fenec-Wait") && (len(r.Rounds) != 2 || len(r.Samples) != 12) {
			t.Errorf("%s: %d windows, %d samples; want 2 and 12", f.Name, len(r.Rounds), len(r.Samples))
		}
	}
	if md := rep.markdown(1); !strings.Contains(md, "| 4 workers, claim 10, ack each |") {
		t.Errorf("no line for 4 workers over HTTP:\n%s", md)
	}
	docs := filepath.Join(out, "benchmarks.md")
	os.WriteFile(docs, []byte("# Benchmarks\n\n"+docsBegin+"\nold\n"+docsEnd+"\n"), 0o644)
	if err := rep.updateDocs(docs); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(docs); strings.Contains(string(b), "\nold\n") || !strings.Contains(string(b), "### Queue benchmark") {
		t.Errorf("the table did not replace the old one:\n%s", b)
	}
}

// TestTopInOrder checks that a fill's jobs are ready in the order they are
// put, across its batches as within one: interleaved ready times made a
// claim take jobs put thousands apart.
func TestTopInOrder(t *testing.T) {
	batches := top(1000, 2*loadBatch+1500)
	var sizes []int
	var last job
	for _, b := range batches {
		sizes = append(sizes, len(b))
		for _, j := range b {
			if last.seq != 0 && (j.seq <= last.seq || !j.runAt.After(last.runAt)) {
				t.Fatalf("job %d (ready %v) after job %d (ready %v)", j.seq, j.runAt, last.seq, last.runAt)
			}
			last = j
		}
	}
	if want := []int{loadBatch, loadBatch, 500}; !slices.Equal(sizes, want) {
		t.Errorf("batch sizes %v, want %v", sizes, want)
	}
	if len(top(10, 10)) != 0 || len(top(11, 10)) != 0 {
		t.Error("a full queue was given jobs")
	}
	if !last.runAt.Before(time.Now().Add(-time.Second)) {
		t.Errorf("the last job is ready at %v, not a second ago", last.runAt)
	}
}

// TestChartOfOnePoint draws the picture of a run with one worker count
// and alike wake samples: each plot's axis then holds one value, which a
// log scale drawn with the plot's own padding (to zero) refused with a
// panic after the run (-only http -workers 1).
func TestChartOfOnePoint(t *testing.T) {
	r := &report{Figures: []figure{
		{Section: secDurable, Name: "1 worker", Durability: "durable", Workers: 1, Method: oneStatement, Fenec: &result{JobsPerSec: 30000}},
		{Section: secWait, Name: "held", Fenec: &result{Samples: []float64{0.4, 0.4}}},
	}}
	file := filepath.Join(t.TempDir(), "queue.png")
	if err := r.chart(file); err != nil {
		t.Fatal(err)
	}
	if st, err := os.Stat(file); err != nil || st.Size() == 0 {
		t.Fatalf("no picture: %v", err)
	}
}

// TestWorkerSmoke runs make worker-bench's plain loop and Go worker (the
// programs a Go toolchain builds) over a few hundred jobs, so -mode workers
// keeps working between the runs of make worker-bench.
func TestWorkerSmoke(t *testing.T) {
	if testing.Short() {
		t.Skip("starts fenec servers")
	}
	bin := os.Getenv("FENEC_BIN")
	dir := t.TempDir()
	if bin == "" {
		var err error
		if bin, err = apitest.Build(dir); err != nil {
			t.Fatal(err)
		}
	}
	self := filepath.Join(dir, "queuebench")
	goWorker, err := filepath.Abs("../../workers/go")
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range [][]string{{".", self}, {goWorker, filepath.Join(goWorker, "worker")}} {
		cmd := exec.Command("go", "build", "-o", b[1], ".")
		cmd.Dir = b[0]
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("go build in %s: %v\n%s", b[0], err, out)
		}
	}
	cfg := workerConfig{bin: bin, dir: filepath.Dir(goWorker), systems: []string{"plain", "go"}, conc: []int{3},
		jobs: 300, limit: time.Minute, rounds: 2, command: "go test", out: dir, selfPath: self}
	runs, err := cfg.run()
	if err != nil {
		t.Fatal(err)
	}
	if len(runs) != 4 {
		t.Fatalf("%d runs, want 2 systems by 2 rounds", len(runs))
	}
	for _, r := range runs {
		if r.err != nil || r.done != 300 || r.serverCPU <= 0 || r.fsyncs < 1 || r.requests < 1 {
			t.Errorf("%s: %+v", r.system, r)
		}
	}
	md, _ := os.ReadFile(filepath.Join(dir, "workers.md"))
	for _, want := range []string{"## Concurrency 3", "| Go `NewWorker` |", "| plain HTTP loop"} {
		if !strings.Contains(string(md), want) {
			t.Errorf("workers.md has no %q:\n%s", want, md)
		}
	}
}

// The results' header says the Kotlin program ran warm, and only when it ran.
func TestWorkersHeaderWarmJVM(t *testing.T) {
	for _, systems := range [][]string{{"plain", "kotlin"}, {"plain", "go"}} {
		cfg := workerConfig{systems: systems, conc: []int{10}, jobs: 10, limit: time.Second, rounds: 1, command: "go test"}
		md := cfg.workersMarkdown(nil)
		if got, want := strings.Contains(md, "warms its JVM"), systems[1] == "kotlin"; got != want {
			t.Errorf("systems %v: the header says the JVM is warmed: %v, want %v:\n%s", systems, got, want, md)
		}
	}
}
