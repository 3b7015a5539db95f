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
// calls on the log segments and its acknowledgements (writes to stdout) in
// the order they happened. Before each acknowledgement a sync of the log
// must have returned since the acknowledgement before it.
func TestSyncBeforeAck(t *testing.T) {
	trace, out := straceChild(t, "serial")
	if n := strings.Count(out, "ack "); n != 100 {
		t.Fatalf("the child acknowledged %d units, want 100:\n%s", n, out)
	}
	acks, syncs, writes := syncedBefore(t, trace, `-log-[0-9a-f]{16}`, func(line string) bool {
		return strings.Contains(line, `write(1<`) && strings.Contains(line, `"ack `)
	})
	if acks != 100 {
		t.Fatalf("strace saw %d acknowledgements, want 100", acks)
	}
	t.Logf("strace: %d syncs of the log and %d writes to it, a sync after the last write before each of %d acknowledgements", syncs, writes, acks)
}

// TestSyncBeforeDrop: the invariant of the package comment, observed the
// same way. The child writes 400 units one at a time into small segments,
// folding as it goes; before each deletion of a log segment a sync of
// SQLite's WAL must have returned that started after the WAL's last write
// (the folds' frames), so no fold a power loss could undo covers a record
// that is gone.
func TestSyncBeforeDrop(t *testing.T) {
	trace, out := straceChild(t, "serialdrop")
	if n := strings.Count(out, "ack "); n != 400 {
		t.Fatalf("the child acknowledged %d units, want 400:\n%s", n, out)
	}
	drops, syncs, writes := syncedBefore(t, trace, `-wal`, func(line string) bool {
		return regexp.MustCompile(`unlink(at)?\(.*-log-[0-9a-f]{16}"`).MatchString(line) && strings.HasSuffix(line, "= 0")
	})
	if drops < 3 {
		t.Fatalf("strace saw %d deletions of log segments, want several", drops)
	}
	t.Logf("strace: %d syncs of the WAL and %d writes to it, a sync after the last write before each of %d segment deletions", syncs, writes, drops)
}

// straceChild runs the crash child in mode beneath strace and returns the
// trace's path and the child's output.
func straceChild(t *testing.T, mode string) (trace, out string) {
	t.Helper()
	strace, err := exec.LookPath("strace")
	if err != nil {
		t.Skip("strace is not installed (make test installs it: apt-get install strace); the sync test did not run")
	}
	dir := t.TempDir()
	trace = filepath.Join(dir, "trace")
	cmd := exec.Command(strace, "-f", "-y", "-qq", "-o", trace, "-e", "trace=fsync,fdatasync,write,pwrite64,unlink,unlinkat",
		os.Args[0], "-test.run=^TestCrashChild$")
	cmd.Env = append(os.Environ(), crashEnv+"="+filepath.Join(dir, "f.db")+"|always|"+mode)
	b, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("the child under strace: %v\n%s", err, b)
	}
	return trace, string(b)
}

// syncedBefore reads an strace trace and checks that before each event
// line, every write to the files matching file was made durable by a
// sync of such a file that started after the write and returned 0. It
// returns the events, syncs and writes seen.
//
// A sync counts only if it started after the last write before it (the
// child writes one unit at a time), and returned 0 before the event: a
// sync already under way when the write was made may not cover it. strace
// splits a call another thread interrupts into "<unfinished ...>" and
// "<... resumed>".
func syncedBefore(t *testing.T, trace, file string, event func(string) bool) (events, syncs, writes int) {
	t.Helper()
	f, err := os.Open(trace)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	syncCall := regexp.MustCompile(`^\d+ +f(data)?sync\(\d+<[^>]*` + file + `>`)
	resumed := regexp.MustCompile(`<\.\.\. f(data)?sync resumed>.*= 0$`)
	fileWrite := regexp.MustCompile(`^\d+ +p?write(64)?\(\d+<[^>]*` + file + `>`)
	started := map[string]int{} // pid → writes seen when its sync started
	covered := 0                // writes made durable by a sync that started after them
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		pid, _, _ := strings.Cut(line, " ")
		_, waiting := started[pid]
		switch {
		case fileWrite.MatchString(line):
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
		case event(line):
			if writes == 0 || covered < writes {
				t.Fatalf("event %d came before a sync of %s that started after the last write to it (%d writes, %d covered): %s", events+1, file, writes, covered, line)
			}
			events++
		}
	}
	return events, syncs, writes
}
