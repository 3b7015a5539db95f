package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"database/sql"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/fenecdb/fenec/server/cluster"
	"github.com/fenecdb/fenec/server/engine"
	"modernc.org/sqlite"
)

// The operator's commands beside serve: backup and restore (this file),
// export and import (export.go). docs/operations.md says when to use each.

// runCmd runs one of them and returns its exit status.
func runCmd(name string, cmd func([]string, io.Writer, io.Writer) error, args []string) int {
	if err := cmd(args, os.Stdout, os.Stderr); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		fmt.Fprintf(os.Stderr, "fenec %s: %v\n", name, err)
		return 1
	}
	return 0
}

// remote is a server the command talks to: its URL, the operator's
// token, and the CA its https certificate is checked against.
type remote struct {
	url, token, ca string
	hc             *http.Client
}

func (r *remote) define(fs *flag.FlagSet, urlFlag, what string) {
	fs.StringVar(&r.url, urlFlag, "", "the `URL` of the server "+what+" (http://127.0.0.1:8080)")
	fs.StringVar(&r.token, "token", "", "the server's --token (default $FENEC_TOKEN)")
	fs.StringVar(&r.ca, "ca", "", "check an https server's certificate against the CAs of this PEM `file` (default: the system's)")
}

// fileArg parses a command's flags around its one FILE argument, which
// may come first (fenec restore FILE --to PATH) or after the flags, and
// returns it; missing says how to name it.
func fileArg(fs *flag.FlagSet, args []string, missing string) (string, error) {
	var file string
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		file, args = args[0], args[1:]
	}
	if err := fs.Parse(args); err != nil {
		return "", err
	}
	if file == "" && fs.NArg() == 1 {
		file = fs.Arg(0)
	} else if fs.NArg() > 0 {
		return "", fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	if file == "" {
		return "", errors.New(missing)
	}
	return file, nil
}

// parse parses a command's flags, which take no arguments, and checks the
// remote's (flag urlFlag).
func (r *remote) parse(fs *flag.FlagSet, args []string, urlFlag string) error {
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	return r.check(urlFlag)
}

func (r *remote) check(urlFlag string) error {
	if r.url == "" {
		return fmt.Errorf("--%s is required", urlFlag)
	}
	r.url = strings.TrimRight(r.url, "/")
	if !strings.HasPrefix(r.url, "http://") && !strings.HasPrefix(r.url, "https://") {
		return fmt.Errorf("--%s %q: want an http:// or https:// URL", urlFlag, r.url)
	}
	if r.token == "" {
		r.token = os.Getenv("FENEC_TOKEN")
	}
	// No overall timeout: a backup or a large chunk takes what it takes.
	r.hc = &http.Client{}
	if r.ca != "" {
		pem, err := os.ReadFile(r.ca)
		if err != nil {
			return fmt.Errorf("--ca: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return fmt.Errorf("--ca %s: no PEM certificate in it", r.ca)
		}
		tr := http.DefaultTransport.(*http.Transport).Clone()
		tr.TLSClientConfig = &tls.Config{RootCAs: pool}
		r.hc.Transport = tr
	}
	return nil
}

func (r *remote) request(ctx context.Context, method, path string, body io.Reader, header map[string]string) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, method, r.url+path, body)
	if err != nil {
		return nil, err
	}
	if r.token != "" {
		req.Header.Set("Authorization", "Bearer "+r.token)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	return r.hc.Do(req)
}

// answerError reads an error answer (docs/http.md's error form) into an
// error naming the route and the status.
func answerError(route string, resp *http.Response) error {
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	var e struct{ Error, Code string }
	if json.Unmarshal(b, &e) == nil && e.Error != "" {
		return fmt.Errorf("%s: %d %s: %s", route, resp.StatusCode, e.Code, e.Error)
	}
	return fmt.Errorf("%s: %d %s", route, resp.StatusCode, strings.TrimSpace(string(b)))
}

// progress prints a line that rewrites itself, on a terminal only: piped
// or logged, the commands print only their last line.
type progress struct {
	w    io.Writer
	tty  bool
	last time.Time
}

func newProgress(w io.Writer) *progress {
	f, ok := w.(*os.File)
	tty := false
	if ok {
		if fi, err := f.Stat(); err == nil {
			tty = fi.Mode()&os.ModeCharDevice != 0
		}
	}
	return &progress{w: w, tty: tty}
}

// show rewrites the line, at most ten times a second.
func (p *progress) show(format string, args ...any) {
	if !p.tty || time.Since(p.last) < 100*time.Millisecond {
		return
	}
	p.last = time.Now()
	fmt.Fprintf(p.w, "\r\x1b[K"+format, args...)
}

// done clears the line.
func (p *progress) done() {
	if p.tty && !p.last.IsZero() {
		fmt.Fprint(p.w, "\r\x1b[K")
	}
}

// countingWriter counts the bytes through it for the progress line.
type countingWriter struct {
	w     io.Writer
	n     int64
	total int64
	p     *progress
	what  string
}

func (c *countingWriter) Write(b []byte) (int, error) {
	n, err := c.w.Write(b)
	c.n += int64(n)
	if c.total > 0 {
		c.p.show("%s: %s of %s (%d%%)", c.what, mb(c.n), mb(c.total), c.n*100/c.total)
	} else {
		c.p.show("%s: %s", c.what, mb(c.n))
	}
	return n, err
}

func mb(n int64) string { return fmt.Sprintf("%.1f MB", float64(n)/(1<<20)) }

// backupCmd is `fenec backup`: GET /_backup into a file, checked before it
// is given its name.
func backupCmd(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("fenec backup", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var r remote
	r.define(fs, "from", "to back up")
	to := fs.String("to", "", "the `file` to write the copy to; written beside it first, renamed once checked")
	force := fs.Bool("force", false, "replace --to if it exists")
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), "Usage: fenec backup --from URL --to FILE [flags]\n\nCopies a running server's database (GET /_backup) while it takes writes,\nchecks the copy and says which write it ends at (its Fenec-Seq).\n\nFlags:\n")
		fs.PrintDefaults()
	}
	if err := r.parse(fs, args, "from"); err != nil {
		return err
	}
	if *to == "" {
		return errors.New("--to is required")
	}
	if _, err := os.Stat(*to); err == nil && !*force {
		return fmt.Errorf("--to %s exists: pass --force to replace it", *to)
	}
	ctx := context.Background()
	start := time.Now()
	resp, err := r.request(ctx, "GET", "/_backup", nil, nil)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return answerError("GET /_backup", resp)
	}
	seq, err := strconv.ParseUint(resp.Header.Get("Fenec-Seq"), 10, 64)
	if err != nil {
		return fmt.Errorf("GET /_backup: Fenec-Seq %q: %v", resp.Header.Get("Fenec-Seq"), err)
	}
	tmp, err := os.CreateTemp(filepath.Dir(*to), filepath.Base(*to)+".partial-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	p := newProgress(stderr)
	cw := &countingWriter{w: tmp, total: resp.ContentLength, p: p, what: "receiving " + r.url + "/_backup"}
	_, err = io.Copy(cw, resp.Body)
	p.done()
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("writing %s: %w", tmp.Name(), err)
	}
	if resp.ContentLength >= 0 && cw.n != resp.ContentLength {
		return fmt.Errorf("GET /_backup: received %d bytes of %d", cw.n, resp.ContentLength)
	}
	got, err := checkCopy(tmp.Name())
	if err != nil {
		return fmt.Errorf("the copy received is not sound, and was not kept: %w", err)
	}
	if got.seq != seq {
		return fmt.Errorf("the copy opens at Fenec-Seq %d, but the server said %d; it was not kept", got.seq, seq)
	}
	if err := os.Rename(tmp.Name(), *to); err != nil {
		return err
	}
	if err := syncDir(filepath.Dir(*to)); err != nil {
		return err
	}
	where := ""
	if node := nodeOf(ctx, &r); node != "" {
		where = " (the state cluster node " + node + " had applied)"
	}
	fmt.Fprintf(stdout, "backed up %s to %s: %s, %d collections, %d documents, up to Fenec-Seq %d%s; integrity ok; %.1fs\n",
		r.url, *to, mb(cw.n), got.colls, got.docs, seq, where, time.Since(start).Seconds())
	return nil
}

// nodeOf returns the id of the cluster node at r, or "" on a lone
// server (GET /_cluster is 404 there).
func nodeOf(ctx context.Context, r *remote) string {
	resp, err := r.request(ctx, "GET", "/_cluster", nil, nil)
	if err != nil {
		return ""
	}
	defer resp.Body.Close()
	var c struct {
		ID   string `json:"id"`
		Role string `json:"role"`
	}
	if resp.StatusCode != http.StatusOK || json.NewDecoder(resp.Body).Decode(&c) != nil || c.ID == "" {
		return ""
	}
	return c.ID + ", " + c.Role
}

// copyFacts is what checkCopy found in a copy.
type copyFacts struct {
	seq         uint64
	colls, docs int
}

// checkCopy checks a copy as restore and backup need it: SQLite's
// integrity_check (every page, index and constraint), then opened as a
// database, every document read into memory as a server would. Opening it
// leaves the file as it was (a clean close writes nothing else).
func checkCopy(path string) (copyFacts, error) {
	if err := integrityCheck(path); err != nil {
		return copyFacts{}, err
	}
	db, err := engine.Open(engine.Options{File: path})
	if err != nil {
		return copyFacts{}, err
	}
	f := copyFacts{seq: db.Seq()}
	for _, c := range db.Collections() {
		f.colls++
		f.docs += c.Docs
	}
	if err := db.Close(); err != nil {
		return copyFacts{}, err
	}
	for _, extra := range []string{"-wal", "-shm"} {
		os.Remove(path + extra)
	}
	return f, nil
}

// integrityCheck runs PRAGMA integrity_check on the file at path.
func integrityCheck(path string) error {
	db, err := sql.Open("sqlite", "file:"+(&url.URL{Path: path}).EscapedPath()+"?mode=ro")
	if err != nil {
		return err
	}
	defer db.Close()
	rows, err := db.Query(`PRAGMA integrity_check(20)`)
	if err != nil {
		return fmt.Errorf("%s: PRAGMA integrity_check: %w", path, err)
	}
	defer rows.Close()
	var found []string
	for rows.Next() {
		var line string
		if err := rows.Scan(&line); err != nil {
			return err
		}
		if line != "ok" {
			found = append(found, line)
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("%s: PRAGMA integrity_check: %w", path, err)
	}
	if len(found) > 0 {
		return fmt.Errorf("%s: PRAGMA integrity_check: %s", path, strings.Join(found, "; "))
	}
	return nil
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// restoreCmd is `fenec restore`: a backup put in place of a stopped
// server's file, checked first, by an atomic rename.
func restoreCmd(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("fenec restore", flag.ContinueOnError)
	fs.SetOutput(stderr)
	to := fs.String("to", "", "the database `file` to restore to (the server's --file); the server must be stopped")
	force := fs.Bool("force", false, "replace --to (and its log and WAL) if it exists")
	var seed clusterFlags
	fs.StringVar(&seed.id, "node-id", "", "seed a new cluster: the `name` of the one node that starts from this file (docs/cluster.md)")
	fs.StringVar(&seed.raft, "raft", "", "with --node-id: the `host:port` that node's raft transport listens on")
	fs.StringVar(&seed.dir, "raft-dir", "", "with --node-id: that node's raft `directory`, to be made (default <--to>.raft)")
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), "Usage: fenec restore FILE --to PATH [flags]\n\nChecks a backup (fenec backup) and puts it in place of a stopped server's\ndatabase file. With --node-id and --raft, also makes the raft directory of\nthe first node of a new cluster, which the others then join.\n\nFlags:\n")
		fs.PrintDefaults()
	}
	from, err := fileArg(fs, args, "name the backup file: fenec restore FILE --to PATH")
	if err != nil {
		return err
	}
	if *to == "" {
		return errors.New("--to is required")
	}
	if seed.id != "" || seed.raft != "" || seed.dir != "" {
		if seed.id == "" || seed.raft == "" {
			return errors.New("--node-id and --raft go together: they seed a new cluster's first node")
		}
		if seed.dir == "" {
			seed.dir = *to + ".raft"
		}
		if entries, err := os.ReadDir(seed.dir); err == nil && len(entries) > 0 {
			return fmt.Errorf("--raft-dir %s is not empty: a seed starts a new cluster's raft state (move the old one aside)", seed.dir)
		}
	}
	if _, err := os.Stat(from); err != nil {
		return err
	}
	if err := integrityCheck(from); err != nil {
		return fmt.Errorf("%s is not a sound backup, and nothing was changed: %w", from, err)
	}
	if err := inUse(*to); err != nil {
		return err
	}
	olds := oldFiles(*to)
	if len(olds) > 0 && !*force {
		return fmt.Errorf("--to %s exists (%s): pass --force to replace it", *to, strings.Join(olds, ", "))
	}
	// The copy is checked where it will be renamed from, beside --to (one
	// file system, so the rename is atomic): the backup itself is only read.
	tmp, err := os.CreateTemp(filepath.Dir(*to), filepath.Base(*to)+".restore-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	in, err := os.Open(from)
	if err != nil {
		tmp.Close()
		return err
	}
	_, err = io.Copy(tmp, in)
	in.Close()
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("copying %s: %w", from, err)
	}
	got, err := checkCopy(tmp.Name())
	if err != nil {
		return fmt.Errorf("%s is not a sound backup, and nothing was changed: %w", from, err)
	}
	if err := inUse(*to); err != nil {
		return err
	}
	// The old file's WAL and log segments go before the new file takes its
	// name: left beside it, they would be read as the new file's.
	for _, old := range olds {
		if old == *to {
			continue
		}
		if err := os.Remove(old); err != nil {
			return fmt.Errorf("removing %s: %w", old, err)
		}
	}
	if err := os.Rename(tmp.Name(), *to); err != nil {
		return err
	}
	if err := syncDir(filepath.Dir(*to)); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "restored %s to %s: %d collections, %d documents, up to Fenec-Seq %d; integrity ok\n", from, *to, got.colls, got.docs, got.seq)
	if seed.id != "" {
		if err := cluster.Seed(seed.dir, seed.id, seed.raft, *to, got.seq); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "seeded %s: start it with fenec serve --file %s --node-id %s --raft %s --raft-dir %s (no --bootstrap), then add the other nodes (docs/cluster.md)\n",
			seed.dir, *to, seed.id, seed.raft, seed.dir)
	}
	return nil
}

// oldFiles lists what a database at path is made of on the disk: the file,
// its WAL and its log segments.
func oldFiles(path string) []string {
	var out []string
	for _, p := range []string{path, path + "-wal", path + "-shm"} {
		if _, err := os.Stat(p); err == nil {
			out = append(out, p)
		}
	}
	segs, _ := filepath.Glob(path + "-log-*")
	return append(out, segs...)
}

// inUse refuses a database file a running server holds: the server keeps
// SQLite's lock on it from start to close.
func inUse(path string) error {
	if _, err := os.Stat(path); err != nil {
		return nil
	}
	db, err := sql.Open("sqlite", "file:"+(&url.URL{Path: path}).EscapedPath()+"?_pragma=busy_timeout(0)")
	if err != nil {
		return err
	}
	defer db.Close()
	_, err = db.Exec(`BEGIN IMMEDIATE; ROLLBACK`)
	var se *sqlite.Error
	if errors.As(err, &se) && (se.Code()&0xff == 5 || se.Code()&0xff == 6) { // SQLITE_BUSY, SQLITE_LOCKED
		return fmt.Errorf("--to %s is in use (a server runs on it?): stop the server first", path)
	}
	return nil
}
