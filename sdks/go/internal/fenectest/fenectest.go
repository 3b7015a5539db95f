// Package fenectest starts real Fenec servers for the SDK's tests: the
// fenec binary built from ../../server (or named by $FENEC_BIN), serving an
// in-memory database with the manual clock.
package fenectest

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

var (
	buildOnce sync.Once
	binPath   string
	buildErr  error
	buildDir  string
)

// Main runs a package's tests and removes the binary built for them:
//
//	func TestMain(m *testing.M) { os.Exit(fenectest.Main(m)) }
func Main(m *testing.M) int {
	code := m.Run()
	if buildDir != "" {
		os.RemoveAll(buildDir)
	}
	return code
}

// binary returns the fenec binary: $FENEC_BIN, or one built from the
// repository's server module once per test process.
func binary(t testing.TB) string {
	t.Helper()
	buildOnce.Do(func() {
		if p := os.Getenv("FENEC_BIN"); p != "" {
			binPath, buildErr = filepath.Abs(p)
			return
		}
		_, file, _, _ := runtime.Caller(0)
		server := filepath.Join(filepath.Dir(file), "..", "..", "..", "..", "server")
		if buildDir, buildErr = os.MkdirTemp("", "fenec-sdk-go-"); buildErr != nil {
			return
		}
		binPath = filepath.Join(buildDir, "fenec")
		cmd := exec.Command("go", "build", "-o", binPath, "./cmd/fenec")
		cmd.Dir = server
		if out, err := cmd.CombinedOutput(); err != nil {
			buildErr = &buildError{err: err, out: string(out)}
		}
	})
	if buildErr != nil {
		t.Fatalf("building the fenec server: %v", buildErr)
	}
	return binPath
}

type buildError struct {
	err error
	out string
}

func (e *buildError) Error() string { return e.err.Error() + "\n" + e.out }

// Server is a running fenec serve.
type Server struct {
	// URL is the server's URL, such as http://127.0.0.1:40123.
	URL  string
	t    testing.TB
	args []string
	cmd  *exec.Cmd
	done chan struct{}
	log  *lockedBuffer
}

// Start starts `fenec serve --clock manual --file :memory: --http
// 127.0.0.1:0` with extra flags, and returns its URL. The server is
// stopped (SIGTERM) when the test ends.
func Start(t testing.TB, flags ...string) string {
	t.Helper()
	return StartServer(t, append([]string{"--clock", "manual", "--file", ":memory:"}, flags...)...).URL
}

// StartServer starts `fenec serve --http 127.0.0.1:0` with flags, which
// name its clock and file. [Server.Stop] and [Server.Restart] stop and
// start it again on the same address; it is stopped when the test ends.
func StartServer(t testing.TB, flags ...string) *Server {
	t.Helper()
	s := &Server{t: t, args: append([]string{"serve"}, flags...)}
	s.start("127.0.0.1:0")
	t.Cleanup(s.Stop)
	return s
}

func (s *Server) start(addr string) {
	s.t.Helper()
	if err := s.tryStart(addr); err != nil {
		s.t.Fatal(err)
	}
}

// tryStart starts the server, or returns why it did not.
func (s *Server) tryStart(addr string) error {
	cmd := exec.Command(binary(s.t), append(s.args, "--http", addr)...)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	s.log = new(lockedBuffer)
	cmd.Stderr = s.log
	if err := cmd.Start(); err != nil {
		return err
	}
	s.cmd, s.done = cmd, make(chan struct{})
	go func() { cmd.Wait(); close(s.done) }()
	found := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if a, ok := strings.CutPrefix(sc.Text(), "listening on "); ok {
				found <- a
			}
		}
	}()
	select {
	case a := <-found:
		s.URL = "http://" + a
		if slices.Contains(s.args, "--tls-cert") {
			s.URL = "https://" + a
		}
		return nil
	case <-s.done:
		s.cmd = nil
		return fmt.Errorf("fenec serve exited; stderr:\n%s", s.log.String())
	case <-time.After(30 * time.Second):
		cmd.Process.Kill()
		<-s.done
		s.cmd = nil
		return fmt.Errorf("fenec serve did not print its address in 30 s; stderr:\n%s", s.log.String())
	}
}

// Stop stops the server (SIGTERM, then SIGKILL after 10 s).
func (s *Server) Stop() {
	if s.cmd == nil {
		return
	}
	s.cmd.Process.Signal(syscall.SIGCONT)
	s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.done:
	case <-time.After(10 * time.Second):
		s.cmd.Process.Kill()
		<-s.done
	}
	s.cmd = nil
}

// Pause freezes the server (SIGSTOP): it accepts connections and answers
// nothing until [Server.Resume].
func (s *Server) Pause() {
	s.cmd.Process.Signal(syscall.SIGSTOP)
	stat := fmt.Sprintf("/proc/%d/stat", s.cmd.Process.Pid)
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		b, err := os.ReadFile(stat)
		// The state is the field after the command's ")".
		if i := strings.LastIndexByte(string(b), ')'); err == nil && i > 0 && i+2 < len(b) && b[i+2] == 'T' {
			return
		}
	}
	s.t.Fatal("the server did not stop on SIGSTOP")
}

// Resume thaws a paused server (SIGCONT).
func (s *Server) Resume() { s.cmd.Process.Signal(syscall.SIGCONT) }

// Restart starts the stopped server again, with the same flags, on the
// same address.
func (s *Server) Restart() {
	s.t.Helper()
	addr := strings.TrimPrefix(s.URL, "http://")
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if c, err := net.Listen("tcp", addr); err == nil {
			c.Close()
			break
		} else if time.Now().After(deadline) {
			s.t.Fatalf("the address %s stays taken: %v", addr, err)
		}
	}
	s.start(addr)
}

// Advance moves the manual clock of the server at url on by ms
// milliseconds (POST /_clock).
func Advance(url string, ms int64) error {
	resp, err := http.Post(url+"/_clock", "application/json", strings.NewReader(fmt.Sprintf(`{"advance_ms": %d}`, ms)))
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		return fmt.Errorf("POST /_clock: status %d", resp.StatusCode)
	}
	return nil
}

// HeldClaims reads the fenec_held_claims gauge of the server at url: how
// many claims it holds for Fenec-Wait now.
func HeldClaims(url string) (int, error) {
	resp, err := http.Get(url + "/_metrics")
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "fenec_held_claims "); ok {
			n, err := strconv.ParseFloat(v, 64)
			return int(n), err
		}
	}
	return 0, errors.New("no fenec_held_claims in /_metrics")
}

// lockedBuffer keeps the server's log for a failure message; the process
// writes it while the test may read it.
type lockedBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
