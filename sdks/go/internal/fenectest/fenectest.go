// Package fenectest starts real Fenec servers for the SDK's tests: the
// fenec binary built from ../../server (or named by $FENEC_BIN), serving an
// in-memory database with the manual clock.
package fenectest

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/fenecdb/fenec/sdks/go/internal/gen"
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

// binary answers the fenec binary: $FENEC_BIN, or one built from the
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

// Start starts `fenec serve --clock manual --file :memory: --http
// 127.0.0.1:0` with extra flags, and answers its URL. The server is
// stopped (SIGTERM) when the test ends.
func Start(t testing.TB, flags ...string) string {
	t.Helper()
	args := append([]string{"serve", "--clock", "manual", "--file", ":memory:", "--http", "127.0.0.1:0"}, flags...)
	cmd := exec.Command(binary(t), args...)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	stderr := new(lockedBuffer)
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
			<-done
		}
	})
	addr := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if a, ok := strings.CutPrefix(sc.Text(), "listening on "); ok {
				addr <- a
			}
		}
	}()
	select {
	case a := <-addr:
		return "http://" + a
	case <-time.After(30 * time.Second):
		t.Fatalf("fenec serve did not print its address in 30 s; stderr:\n%s", stderr.String())
		return ""
	}
}

// Advance moves the manual clock of the server at url on by ms
// milliseconds (POST /_clock).
func Advance(url string, ms int64) error {
	api, err := gen.NewClient(url)
	if err != nil {
		return err
	}
	var move gen.ClockMove
	if err := move.FromClockMove0(gen.ClockMove0{AdvanceMs: ms}); err != nil {
		return err
	}
	resp, err := api.MoveClock(context.Background(), move)
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
	api, err := gen.NewClient(url)
	if err != nil {
		return 0, err
	}
	resp, err := api.Metrics(context.Background())
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
