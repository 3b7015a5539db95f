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
	cmd := exec.Command(strace, "-f", "-y", "-qq", "-o", trace, "-e", "trace=fsync,fdatasync,write",
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
	// A sync of the WAL that returned 0: whole, or the end of one strace
	// split around another thread's call ("<... fdatasync resumed>").
	syncStart := regexp.MustCompile(`^\d+ +f(data)?sync\(\d+<[^>]*-wal>`)
	pending := map[string]bool{} // pid → a WAL sync under way
	synced, acks, syncs := false, 0, 0
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		pid, _, _ := strings.Cut(line, " ")
		switch {
		case syncStart.MatchString(line):
			if strings.HasSuffix(line, "<unfinished ...>") {
				pending[pid] = true
			} else if strings.HasSuffix(line, "= 0") {
				synced, syncs = true, syncs+1
			}
		case pending[pid] && regexp.MustCompile(`<\.\.\. f(data)?sync resumed>.*= 0$`).MatchString(line):
			delete(pending, pid)
			synced, syncs = true, syncs+1
		case strings.Contains(line, `write(1<`) && strings.Contains(line, `"ack `):
			if !synced {
				t.Fatalf("acknowledgement %d was written with no sync of the WAL since the one before: %s", acks+1, line)
			}
			synced = false
			acks++
		}
	}
	if acks != 100 {
		t.Fatalf("strace saw %d acknowledgements, want 100", acks)
	}
	t.Logf("strace: %d syncs of the WAL, one before each of %d acknowledgements", syncs, acks)
}
