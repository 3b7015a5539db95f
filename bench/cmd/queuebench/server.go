package main

import (
	"bufio"
	"bytes"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/fenecdb/fenec/server/httpapi/gen"
)

// server is a `fenec serve` the benchmark started, and a client for it.
type server struct {
	cmd  *exec.Cmd
	url  string
	http *http.Client
}

func startServer(bin string, args ...string) (*server, error) {
	return startServerTLS(bin, nil, args...)
}

// startServerTLS starts a server whose args include --tls-cert, its
// client trusting client's roots; with client nil, as startServer.
func startServerTLS(bin string, client *tls.Config, args ...string) (*server, error) {
	cmd := exec.Command(bin, append([]string{"serve", "--http", "127.0.0.1:0", "--slow-ms", "0"}, args...)...)
	cmd.Stderr = io.Discard
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting %s: %w", bin, err)
	}
	addr := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if a, ok := strings.CutPrefix(sc.Text(), "listening on "); ok {
				addr <- a
			}
		}
	}()
	select {
	case a := <-addr:
		tr := &http.Transport{MaxIdleConnsPerHost: 4096, TLSClientConfig: client}
		scheme := "http://"
		if client != nil {
			scheme = "https://"
		}
		return &server{cmd: cmd, url: scheme + a, http: &http.Client{Transport: tr, Timeout: 60 * time.Second}}, nil
	case <-time.After(10 * time.Minute): // a server loading a large file takes a while (50 million jobs: minutes)
		cmd.Process.Kill()
		return nil, fmt.Errorf("%s did not print its address in 10 minutes", bin)
	}
}

func (s *server) stop() {
	s.cmd.Process.Signal(os.Interrupt)
	done := make(chan struct{})
	go func() { s.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		s.cmd.Process.Kill()
	}
}

// cpu returns the server process's CPU time so far.
func (s *server) cpu() time.Duration { return procCPU(s.cmd.Process.Pid) }

// procCPU returns a process's CPU time so far, user and system, from /proc.
func procCPU(pid int) time.Duration {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	// Fields after the command name, which is in parentheses.
	f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+2:]))
	utime, _ := strconv.ParseInt(f[11], 10, 64)
	stime, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(utime+stime) * time.Second / 100 // USER_HZ
}

// selfCPU returns this process's CPU time so far, user and system, every
// thread's (getrusage): the clients' cost, measured as the server's is.
func selfCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// treeCPU returns the CPU time, user and system, of a process and of its
// children, those running (from /proc/<pid>/stat) and those it has
// reaped (its cutime and cstime): PostgreSQL serves each connection from
// a process of its own, and Redis rewrites its file in a child.
func treeCPU(pid int) time.Duration {
	ticks := func(f []string, from, to int) int64 {
		var n int64
		for i := from; i <= to; i++ {
			v, _ := strconv.ParseInt(f[i], 10, 64)
			n += v
		}
		return n
	}
	own := statFields(pid)
	if own == nil {
		return 0
	}
	total := ticks(own, 11, 14) // utime, stime, cutime, cstime
	dirs, _ := os.ReadDir("/proc")
	for _, d := range dirs {
		child, err := strconv.Atoi(d.Name())
		if err != nil || child == pid {
			continue
		}
		if f := statFields(child); f != nil && f[1] == strconv.Itoa(pid) {
			total += ticks(f, 11, 14)
		}
	}
	return time.Duration(total) * time.Second / 100 // USER_HZ
}

// statFields returns the fields of /proc/<pid>/stat after the command
// name (f[0] the state, f[1] the parent, f[11] utime), or nil.
func statFields(pid int) []string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return nil
	}
	at := bytes.LastIndexByte(b, ')')
	if at < 0 || at+2 > len(b) {
		return nil
	}
	f := strings.Fields(string(b[at+2:]))
	if len(f) < 15 {
		return nil
	}
	return f
}

// quiet waits until a process has spent under a tenth of a core for a
// quarter of a second: the writes a bulk load queued are on disk, and the
// run that follows does not pay for them.
func quiet(pid int) error {
	const window = 250 * time.Millisecond
	for deadline := time.Now().Add(3 * time.Minute); time.Now().Before(deadline); {
		before := procCPU(pid)
		time.Sleep(window)
		if procCPU(pid)-before < window/10 {
			return nil
		}
	}
	return fmt.Errorf("process %d still busy 3 minutes after a load", pid)
}

// quietAll waits until every process of pids, with its children, has
// spent under a tenth of a core for a quarter of a second: no server's
// work (a fold, a checkpoint, a rewrite of Redis's file) lands on the
// drive that follows, whichever system it drives.
func quietAll(pids []int) error {
	const window = 250 * time.Millisecond
	for deadline := time.Now().Add(3 * time.Minute); time.Now().Before(deadline); {
		before := make([]time.Duration, len(pids))
		for i, pid := range pids {
			before[i] = treeCPU(pid)
		}
		time.Sleep(window)
		busy := false
		for i, pid := range pids {
			busy = busy || treeCPU(pid)-before[i] >= window/10
		}
		if !busy {
			return nil
		}
	}
	return fmt.Errorf("processes %v still busy after 3 minutes", pids)
}

// rss returns the server process's resident memory, from /proc.
func (s *server) rss() int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/statm", s.cmd.Process.Pid))
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b))
	pages, _ := strconv.ParseInt(f[1], 10, 64)
	return pages * int64(os.Getpagesize())
}

// unfolded reads fenec_store_unfolded_bytes from /_metrics: the bytes of
// the store's log not yet folded into its tables; ok is false when the
// binary has no such metric.
func (s *server) unfolded() (n float64, ok bool, err error) {
	resp, err := s.http.Get(s.url + "/_metrics")
	if err != nil {
		return 0, false, err
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if v, found := strings.CutPrefix(sc.Text(), "fenec_store_unfolded_bytes "); found {
			n, err = strconv.ParseFloat(v, 64)
			return n, err == nil, err
		}
	}
	return 0, false, sc.Err()
}

// query sends one statement, held up to wait (0: not held), and returns
// the rows (nil for a count answer) or the error.
func (s *server) query(q string, params []any, wait time.Duration) ([]map[string]any, error) {
	b, err := s.post("/query", statement(q, params...), wait)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", q, err)
	}
	if len(b) > 0 && b[0] != '[' {
		return nil, nil
	}
	var rows []map[string]any
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	return rows, d.Decode(&rows)
}

// statement is one statement of a /query or /batch body, as openapi.yaml
// has it; params is always sent, [] when there are none.
func statement(q string, params ...any) gen.QueryRequest {
	ps := make([]*gen.Value, len(params))
	for i := range params {
		ps[i] = &params[i]
	}
	return gen.QueryRequest{Query: q, Params: &ps}
}

// batch sends statements as one /batch: all or nothing.
func (s *server) batch(stmts []gen.QueryRequest) error {
	_, err := s.post("/batch", gen.BatchRequest{Statements: stmts}, 0)
	return err
}

// post sends body as JSON and returns the answer's body, or an error for
// any status but 200.
func (s *server) post(path string, body any, wait time.Duration) ([]byte, error) {
	j, err := json.Marshal(body)
	if err != nil {
		return nil, err
	}
	req, err := http.NewRequest("POST", s.url+path, bytes.NewReader(j))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	if wait > 0 {
		req.Header.Set("Fenec-Wait", strconv.FormatInt(wait.Milliseconds(), 10))
	}
	resp, err := s.http.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != 200 {
		return nil, fmt.Errorf("%d %s", resp.StatusCode, b)
	}
	return b, nil
}

func (s *server) must(q string, params ...any) []map[string]any {
	rows, err := s.query(q, params, 0)
	if err != nil {
		fmt.Fprintln(os.Stderr, "queuebench:", err)
		os.Exit(1)
	}
	return rows
}
