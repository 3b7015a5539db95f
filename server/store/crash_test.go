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
	parts := strings.Split(spec, "|")
	path, syncFlag := parts[0], parts[1]
	mode, err := ParseSync(syncFlag)
	if err != nil {
		t.Fatal(err)
	}
	out := bufio.NewWriter(os.Stdout)
	var outMu sync.Mutex
	var opts Options
	if len(parts) > 2 && parts[2] == "fold" {
		// From the fifth fold on, say "folding" midway through the fold and
		// hold it there: the parent kills the child inside the transaction.
		folds := 0
		opts.Fault = func(at string) error {
			if at == FaultFold {
				if folds++; folds >= 5 {
					outMu.Lock()
					fmt.Fprintln(out, "folding")
					out.Flush()
					outMu.Unlock()
					// Held here until the parent's SIGKILL (the crash under test).
					time.Sleep(10 * time.Second)
				}
			}
			return nil
		}
	}
	opts.Sync = mode
	// Chunks of 8 rows: groups of more than 8 documents are folded in
	// parts, which a kill may fall between. Segments of 8 KB
	// (preallocated, as the server's are): the log moves to a new one
	// every few dozen groups, and folded ones are deleted, which a kill
	// may fall between too.
	tune := tuning{foldBytes: 16 << 10, foldAge: 20 * time.Millisecond, foldChunk: 16 << 10, foldRows: 8, maxPending: 64 << 20, busyTimeout: time.Second, segBytes: 8 << 10, prealloc: 256 << 10}
	if len(parts) > 2 && parts[2] == "serial" {
		// No folds: every write to the log between two acknowledgements is
		// the unit's own, which TestSyncBeforeAck requires.
		tune.foldBytes, tune.foldAge = 1<<40, time.Hour
	}
	if len(parts) > 2 && parts[2] == "drop" {
		// From the third deletion of folded segments on, say "dropping"
		// once the WAL is synced, just before the deletion, and hold it
		// there: the parent kills the child between the two.
		drops := 0
		tune.onDrop = func() {
			if drops++; drops >= 3 {
				outMu.Lock()
				fmt.Fprintln(out, "dropping")
				out.Flush()
				outMu.Unlock()
				// Held here until the parent's SIGKILL (the crash under test).
				time.Sleep(10 * time.Second)
			}
		}
	}
	s, err := open(path, opts, tune)
	if err != nil {
		t.Fatal(err)
	}
	if mode.Kind == SyncInterval {
		// The parent allows for slow writes (a loaded machine's fsyncs).
		s.Subscribe(func(e Event) {
			outMu.Lock()
			fmt.Fprintf(out, "wrote %d\n", e.Wrote.Microseconds())
			out.Flush()
			outMu.Unlock()
		})
	}
	if _, err := s.Load(func(Change) error { return nil }); err != nil {
		t.Fatal(err)
	}
	if err := s.Commit(1, []Change{{Op: OpCreate, Coll: "c", ID: 1}})(); err != nil {
		t.Fatal(err)
	}
	if len(parts) > 2 && parts[2] == "serialdrop" {
		// One writer, 400 units of 300 bytes, folds every few groups, 8 KB
		// segments: TestSyncBeforeDrop watches the deletions.
		tune.foldBytes, tune.foldAge = 4<<10, time.Hour
	}
	if len(parts) > 2 && strings.HasPrefix(parts[2], "serial") {
		n := uint64(101)
		body := []byte("v")
		if parts[2] == "serialdrop" {
			n, body = 401, make([]byte, 300)
		}
		// One writer, 100 units: each its own group, acknowledged (a write
		// to stdout) once its wait returns. TestSyncBeforeAck watches.
		for i := uint64(2); i <= n; i++ {
			if err := s.Commit(i, []Change{{Op: OpMetaPut, Key: fmt.Sprint("m", i), Body: body}})(); err != nil {
				t.Fatal(err)
			}
			fmt.Fprintf(os.Stdout, "ack %d\n", i)
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		return
	}
	var mu sync.Mutex // the engine's write lock
	seq := uint64(1)
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
	t.Parallel()
	if testing.Short() {
		t.Skip("kills child processes")
	}
	t.Run("always", func(t *testing.T) {
		for round := range 3 {
			path := filepath.Join(t.TempDir(), "f.db")
			acked := runAndKill(t, path, "always", "", 200+300*round)
			checkCrashed(t, path, "always", acked)
		}
	})
	// A kill while a fold's transaction is open (the child holds it open
	// midway and says so) loses nothing acknowledged.
	t.Run("in a fold", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "f.db")
		acked := runAndKill(t, path, "always", "fold", 0)
		checkCrashed(t, path, "always", acked)
	})
	// A kill between the sync of the folds and the deletion of the
	// segments they cover loses nothing acknowledged either.
	t.Run("deleting segments", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "f.db")
		acked := runAndKill(t, path, "always", "drop", 0)
		checkCrashed(t, path, "always", acked)
	})
}

// TestCrashInterval: under --sync <ms> a crash loses at most the writes of
// the last interval plus one fold chunk (docs/reliability.md): every unit
// acknowledged more than the interval plus lossMargin before the kill
// survives. The parent reads the acknowledgements as they come, stamping
// each, and kills the child at a set time after the first.
func TestCrashInterval(t *testing.T) {
	if testing.Short() {
		t.Skip("kills child processes")
	}
	if raceEnabled {
		// make test runs it in the plain pass; under -race one group's
		// write alone takes hundreds of ms.
		t.Skip("a timed bound: run without -race")
	}
	const interval = 10 * time.Millisecond
	// lossMargin covers one fold chunk and a busy machine's scheduling;
	// the kills come before 1 s, so an interval of 100× would lose all.
	const lossMargin = 400 * time.Millisecond
	// The two kills run side by side (a child each): each child's own
	// slowest write sets its bound.
	for _, after := range []time.Duration{600 * time.Millisecond, 900 * time.Millisecond} {
		t.Run(after.String(), func(t *testing.T) {
			t.Parallel()
			path := filepath.Join(t.TempDir(), "f.db")
			// A unit acknowledged waits at most for the write in progress and
			// its own group's: allow two of the slowest writes seen, and run
			// the child long enough for some acks to be older than that.
			boundOf := func(slowest time.Duration) time.Duration { return interval + lossMargin + 2*slowest }
			acks, slowest, kill := runAndKillAfter(t, path, "10", func(slowest time.Duration) time.Duration {
				return max(after, boundOf(slowest)+200*time.Millisecond)
			})
			bound := boundOf(slowest)
			var mustSurvive uint64
			for _, a := range acks {
				if kill.Sub(a.at) > bound {
					mustSurvive = max(mustSurvive, a.seq)
				}
			}
			if mustSurvive == 0 {
				t.Fatalf("the child acknowledged nothing more than %v before the kill (%d acks in all): nothing to check", bound, len(acks))
			}
			k := checkCrashed(t, path, "10", 0)
			if k < mustSurvive {
				t.Fatalf("unit %d was acknowledged more than %v before the kill, but only units up to %d survived", mustSurvive, bound, k)
			}
			// The measured loss: the age at the kill of the oldest lost ack.
			var lost time.Duration
			for _, a := range acks {
				if a.seq > k {
					lost = max(lost, kill.Sub(a.at))
				}
			}
			t.Logf("sync 10 ms, killed %v after the first ack: %d acks, units up to %d survived; the oldest lost ack was %v old (slowest write %v)", kill.Sub(acks[0].at).Round(time.Millisecond), len(acks), k, lost.Round(time.Millisecond), slowest)
		})
	}
}

type ack struct {
	seq uint64
	at  time.Time
}

// runAndKillAfter starts the child, reads its acknowledgements as they
// come (stamping each), SIGKILLs it once runFor(the slowest group write the
// child reported so far) has passed since the first, and returns them, the
// slowest write, and the time of the kill.
func runAndKillAfter(t *testing.T, path, syncFlag string, runFor func(slowest time.Duration) time.Duration) ([]ack, time.Duration, time.Time) {
	t.Helper()
	cmd, sc := startChild(t, path, syncFlag, "")
	var mu sync.Mutex
	var acks []ack
	var slowest time.Duration
	first := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for sc.Scan() {
			if us, ok := strings.CutPrefix(sc.Text(), "wrote "); ok {
				if v, err := strconv.ParseInt(us, 10, 64); err == nil {
					mu.Lock()
					slowest = max(slowest, time.Duration(v)*time.Microsecond)
					mu.Unlock()
				}
				continue
			}
			i, ok := strings.CutPrefix(sc.Text(), "ack ")
			if !ok {
				continue
			}
			v, err := strconv.ParseUint(i, 10, 64)
			if err != nil {
				continue
			}
			mu.Lock()
			if len(acks) == 0 {
				close(first)
			}
			acks = append(acks, ack{v, time.Now()})
			mu.Unlock()
		}
	}()
	select {
	case <-first:
	case <-time.After(20 * time.Second):
		cmd.Process.Kill()
		t.Fatal("the child acknowledged nothing in 20 s")
	}
	start := time.Now()
	for {
		mu.Lock()
		d := runFor(slowest)
		mu.Unlock()
		if time.Since(start) >= d || time.Since(start) > 10*time.Second {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	mu.Lock()
	kill := time.Now()
	cmd.Process.Kill()
	mu.Unlock()
	<-done
	cmd.Wait()
	return acks, slowest, kill
}

func startChild(t *testing.T, path, syncFlag, mode string) (*exec.Cmd, *bufio.Scanner) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestCrashChild$")
	cmd.Env = append(os.Environ(), crashEnv+"="+path+"|"+syncFlag+"|"+mode)
	cmd.Stderr = os.Stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	return cmd, bufio.NewScanner(stdout)
}

// runAndKill starts the child (under always) and SIGKILLs it once it has
// acknowledged acks units, or (mode fold, drop) once it says it is folding
// or deleting segments; it returns the highest acknowledged seq.
func runAndKill(t *testing.T, path, syncFlag, mode string, acks int) uint64 {
	t.Helper()
	cmd, sc := startChild(t, path, syncFlag, mode)
	var high uint64
	for n := 0; sc.Scan(); {
		if (mode == "fold" && sc.Text() == "folding") || (mode == "drop" && sc.Text() == "dropping") {
			break
		}
		if i, ok := strings.CutPrefix(sc.Text(), "ack "); ok {
			v, err := strconv.ParseUint(i, 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			high = max(high, v)
			if n++; mode == "" && n >= acks {
				break
			}
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
// under always, that k covers every acknowledged unit. It returns k.
func checkCrashed(t *testing.T, path, syncFlag string, acked uint64) uint64 {
	t.Helper()
	got, seq, _, s := load(t, path, Options{}, defaultTuning)
	defer s.Close()
	if got.colls["c"] == nil {
		t.Fatalf("sync %s: collection c is gone (seq %d): nothing was written before the kill", syncFlag, seq)
	}
	k := prefixOf(t, got, seq)
	if syncFlag == "always" && k < acked {
		t.Fatalf("unit %d was acknowledged, but only units up to %d survived", acked, k)
	}
	if syncFlag == "always" {
		t.Logf("sync %s: %d acknowledged, %d present", syncFlag, acked, k)
	}
	return k
}
