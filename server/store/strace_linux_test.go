package store

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestSyncBeforeAck observes durability against power loss, not only
// process death (a SIGKILL leaves the page cache, so the crash tests would
// pass with no sync at all): the crash child runs one writer under
// --sync always beneath strace, which records its fsync and fdatasync
// calls on the WAL and its acknowledgements (writes to stdout) in the
// order they happened. Before each acknowledgement a sync of the WAL must
// have returned since the acknowledgement before it.
func TestSyncBeforeAck(t *testing.T) {
	strace, err := exec.LookPath("strace")
	if err != nil {
		t.Skip("strace is not installed (make test installs it: apt-get install strace); the sync-before-ack test did not run")
	}
	dir := t.TempDir()
	trace := filepath.Join(dir, "trace")
	cmd := exec.Command(strace, "-f", "-y", "-qq", "-o", trace, "-e", "trace=fsync,fdatasync,write,pwrite64",
		os.Args[0], "-test.run=^TestCrashChild$")
	cmd.Env = append(os.Environ(), crashEnv+"="+filepath.Join(dir, "f.db")+"|always|serial")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("the child under strace: %v\n%s", err, out)
	}
	if n := strings.Count(string(out), "ack "); n != 100 {
		t.Fatalf("the child acknowledged %d units, want 100:\n%s", n, out)
	}
	f, err := os.Open(trace)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	// A sync counts for an acknowledgement only if it started after the
	// last write to the WAL before it (the unit's frames: the child writes
	// one unit at a time and folds nothing), and returned 0 before the
	// acknowledgement: a sync already under way when the frames were
	// written may not cover them. strace splits a call another thread
	// interrupts into "<unfinished ...>" and "<... resumed>".
	syncCall := regexp.MustCompile(`^\d+ +f(data)?sync\(\d+<[^>]*-wal>`)
	resumed := regexp.MustCompile(`<\.\.\. f(data)?sync resumed>.*= 0$`)
	walWrite := regexp.MustCompile(`^\d+ +p?write(64)?\(\d+<[^>]*-wal>`)
	writes := 0                 // writes to the WAL so far
	started := map[string]int{} // pid → writes seen when its WAL sync started
	covered := 0                // writes made durable by a sync that started after them
	acks, syncs := 0, 0
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		pid, _, _ := strings.Cut(line, " ")
		_, waiting := started[pid]
		switch {
		case walWrite.MatchString(line):
			writes++
		case syncCall.MatchString(line):
			if strings.HasSuffix(line, "<unfinished ...>") {
				started[pid] = writes
			} else if strings.HasSuffix(line, "= 0") {
				covered, syncs = writes, syncs+1
			}
		case waiting && resumed.MatchString(line):
			covered, syncs = max(covered, started[pid]), syncs+1
			delete(started, pid)
		case strings.Contains(line, `write(1<`) && strings.Contains(line, `"ack `):
			if writes == 0 || covered < writes {
				t.Fatalf("acknowledgement %d was written before a sync of the WAL that started after its frames were written (%d writes to the WAL, %d covered): %s", acks+1, writes, covered, line)
			}
			acks++
		}
	}
	if acks != 100 {
		t.Fatalf("strace saw %d acknowledgements, want 100", acks)
	}
	t.Logf("strace: %d syncs of the WAL and %d writes to it, a sync after the last write before each of %d acknowledgements", syncs, writes, acks)
}
