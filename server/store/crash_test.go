package store

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// The crash test re-runs this test binary as a child that commits units
// until it is killed with SIGKILL. Each unit i (from 2 on; unit 1 creates
// the collection) puts documents 2i and 2i+1 and meta record m<i>, all with
// body "unit <i>"; under always the child prints "ack <i>" once its wait
// returns. Small fold thresholds make kills land in folds as well.
const crashEnv = "FENEC_STORE_CRASH_CHILD"

func TestCrashChild(t *testing.T) {
	spec := os.Getenv(crashEnv)
	if spec == "" {
		t.Skip("only run as the crash test's child")
	}
	path, syncFlag, _ := strings.Cut(spec, "|")
	mode, err := ParseSync(syncFlag)
	if err != nil {
		t.Fatal(err)
	}
	s, err := open(path, Options{Sync: mode}, tuning{foldBytes: 16 << 10, foldAge: 20 * time.Millisecond, maxPending: 64 << 20, busyTimeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Load(func(Change) error { return nil }); err != nil {
		t.Fatal(err)
	}
	if err := s.Commit(1, []Change{{Op: OpCreate, Coll: "c", ID: 1}})(); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex // the engine's write lock
	seq := uint64(1)
	out := bufio.NewWriter(os.Stdout)
	var outMu sync.Mutex
	deadline := time.Now().Add(20 * time.Second) // in case the parent is gone
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for time.Now().Before(deadline) {
				mu.Lock()
				seq++
				i := seq
				body := []byte(fmt.Sprintf("unit %d %s", i, strings.Repeat("x", 100)))
				wait := s.Commit(i, []Change{
					{Op: OpPut, Coll: "c", ID: int64(2 * i), Body: body},
					{Op: OpPut, Coll: "c", ID: int64(2*i + 1), Body: body},
					{Op: OpMetaPut, Key: fmt.Sprint("m", i), Body: body},
				})
				mu.Unlock()
				if err := wait(); err != nil {
					panic(err)
				}
				outMu.Lock()
				fmt.Fprintf(out, "ack %d\n", i)
				out.Flush()
				outMu.Unlock()
			}
		})
	}
	wg.Wait()
}

func TestCrash(t *testing.T) {
	if testing.Short() {
		t.Skip("kills child processes")
	}
	for _, syncFlag := range []string{"always", "5"} {
		t.Run(syncFlag, func(t *testing.T) {
			for round := range 3 {
				path := filepath.Join(t.TempDir(), "f.db")
				// Under always, kill after some acknowledgements; under
				// interval (whose waits do not wait) after some time.
				acked := runAndKill(t, path, syncFlag, 200+300*round, time.Duration(50+100*round)*time.Millisecond)
				checkCrashed(t, path, syncFlag, acked)
			}
		})
	}
}

// runAndKill starts the child and SIGKILLs it once it has acknowledged
// acks units (under always) or run for d after its first one (otherwise);
// it answers the highest acknowledged seq.
func runAndKill(t *testing.T, path, syncFlag string, acks int, d time.Duration) uint64 {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestCrashChild$")
	cmd.Env = append(os.Environ(), crashEnv+"="+path+"|"+syncFlag)
	cmd.Stderr = os.Stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var high uint64
	sc := bufio.NewScanner(stdout)
	if syncFlag != "always" {
		if sc.Scan() {
			time.Sleep(d)
		}
		acks = 0
	}
	for n := 0; n < acks && sc.Scan(); n++ {
		if i, ok := strings.CutPrefix(sc.Text(), "ack "); ok {
			v, err := strconv.ParseUint(i, 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			high = max(high, v)
		}
	}
	cmd.Process.Kill()
	// Acks printed before the kill landed count too.
	for sc.Scan() {
		if i, ok := strings.CutPrefix(sc.Text(), "ack "); ok {
			v, _ := strconv.ParseUint(i, 10, 64)
			high = max(high, v)
		}
	}
	cmd.Wait()
	if high == 0 {
		t.Fatal("the child acknowledged nothing")
	}
	return high
}

// checkCrashed reopens the killed child's file and checks that the units
// present are exactly 2..k for some k (nothing half there, no holes) and,
// under always, that k covers every acknowledged unit.
func checkCrashed(t *testing.T, path, syncFlag string, acked uint64) {
	t.Helper()
	got, seq, _, s := load(t, path, Options{}, defaultTuning)
	defer s.Close()
	c := got.colls["c"]
	if c == nil {
		if syncFlag == "always" || seq > 0 {
			t.Fatalf("collection c is gone (seq %d)", seq)
		}
		t.Logf("sync %s: nothing was written before the kill", syncFlag)
		return
	}
	var k uint64
	for i := uint64(2); ; i++ {
		want := fmt.Sprintf("unit %d %s", i, strings.Repeat("x", 100))
		a, okA := c.docs[int64(2*i)]
		b, okB := c.docs[int64(2*i+1)]
		m, okM := got.meta[fmt.Sprint("m", i)]
		if !okA && !okB && !okM {
			break
		}
		if !okA || !okB || !okM || a != want || b != want || string(m.Body) != want {
			t.Fatalf("unit %d is half there: docs %v %v, meta %v", i, okA, okB, okM)
		}
		k = i
	}
	if n := uint64(len(c.docs)); n != 2*(k-1) {
		t.Fatalf("units 2..%d present, but %d documents (a hole or a stray)", k, n)
	}
	if seq != k {
		t.Fatalf("Load answered seq %d, units up to %d present", seq, k)
	}
	if syncFlag == "always" && k < acked {
		t.Fatalf("unit %d was acknowledged, but only units up to %d survived", acked, k)
	}
	t.Logf("sync %s: %d acknowledged, %d present", syncFlag, acked, k)
}
