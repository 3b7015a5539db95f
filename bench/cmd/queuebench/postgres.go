package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
)

// The peer's queue, as the queue page writes it: claim ten with FOR UPDATE
// SKIP LOCKED so workers pass over each other's rows, ack by DELETE.
const (
	pgSchema = `CREATE TABLE jobs (id bigserial PRIMARY KEY, payload jsonb NOT NULL, run_at timestamptz, owner text, attempts int NOT NULL DEFAULT 0);
CREATE INDEX jobs_run_at ON jobs (run_at);`
	pgClaim = `UPDATE jobs SET owner = $1, run_at = now() + interval '30 seconds', attempts = attempts + 1
WHERE id IN (SELECT id FROM jobs WHERE run_at <= now() ORDER BY run_at LIMIT 10 FOR UPDATE SKIP LOCKED)
RETURNING *`
	pgAck = `DELETE FROM jobs WHERE id = $1 AND owner = $2`
)

// ensurePeers installs PostgreSQL and Redis from Debian's packages when
// their servers are missing, so a fresh machine needs nothing beforehand.
func ensurePeers() error {
	_, err := exec.LookPath("redis-server")
	if pgBin() != "" && err == nil {
		return nil
	}
	if err := aptInstall("postgresql", "redis-server"); err != nil {
		return err
	}
	if pgBin() == "" {
		return errors.New("apt-get installed postgresql, but no /usr/lib/postgresql/*/bin/postgres")
	}
	return nil
}

// ensureRedis installs Redis from Debian's packages when it is missing.
func ensureRedis() error {
	if _, err := exec.LookPath("redis-server"); err == nil {
		return nil
	}
	return aptInstall("redis-server")
}

// aptInstall installs Debian's packages (as root).
func aptInstall(pkgs ...string) error {
	if os.Geteuid() != 0 {
		return fmt.Errorf("%s missing: run as root, or apt-get install -y %s", strings.Join(pkgs, " or "), strings.Join(pkgs, " "))
	}
	for _, args := range [][]string{{"update"}, append([]string{"install", "-y"}, pkgs...)} {
		cmd := exec.Command("apt-get", args...)
		cmd.Env = append(os.Environ(), "DEBIAN_FRONTEND=noninteractive")
		cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
		if err := cmd.Run(); err != nil {
			return fmt.Errorf("apt-get %s: %w", args[0], err)
		}
	}
	return nil
}

// pgBin returns the directory of the newest PostgreSQL's programs, where
// Debian puts them (off the PATH), or "".
func pgBin() string {
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Slice(dirs, func(i, j int) bool { return pgMajor(dirs[i]) > pgMajor(dirs[j]) })
	for _, d := range dirs {
		if _, err := os.Stat(filepath.Join(d, "postgres")); err == nil {
			return d
		}
	}
	return ""
}

func pgMajor(dir string) int {
	n, _ := strconv.Atoi(filepath.Base(filepath.Dir(dir)))
	return n
}

// freePort returns a loopback port nothing listens on now.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// stopProcess interrupts cmd and waits for it to end, killing it after a
// while.
func stopProcess(cmd *exec.Cmd, sig os.Signal) {
	_ = cmd.Process.Signal(sig)
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		_ = cmd.Process.Kill()
		<-done
	}
}

// pgServer is a PostgreSQL the benchmark initialised in a temporary
// directory and started on loopback.
type pgServer struct {
	cmd     *exec.Cmd
	url     string
	log     *bytes.Buffer
	version string
}

// startPostgres runs initdb and postgres in dir/pg with fsync on and
// synchronous_commit on (workers that want it off say so per session), and
// waits until it takes connections (each queue is a database of its own:
// database). PostgreSQL refuses to run as root, so as root it runs as the
// postgres user the Debian package made.
func startPostgres(dir string) (*pgServer, error) {
	bin := pgBin()
	if bin == "" {
		return nil, errors.New("no PostgreSQL under /usr/lib/postgresql")
	}
	data, err := os.MkdirTemp(dir, "pg-")
	if err != nil {
		return nil, err
	}
	var cred *syscall.Credential
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			return nil, fmt.Errorf("running PostgreSQL as root's stand-in: %w", err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		cred = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
		// The postgres user must reach its directory through ours.
		if err := os.Chmod(dir, 0o711); err != nil {
			return nil, err
		}
		if err := os.Chown(data, uid, gid); err != nil {
			return nil, err
		}
	}
	command := func(name string, args ...string) *exec.Cmd {
		cmd := exec.Command(filepath.Join(bin, name), args...)
		cmd.Dir = data
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
		return cmd
	}
	if out, err := command("initdb", "-D", data, "-A", "trust", "-U", "postgres", "-E", "UTF8", "--no-sync").CombinedOutput(); err != nil {
		return nil, fmt.Errorf("initdb: %w\n%s", err, out)
	}
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	s := &pgServer{log: &bytes.Buffer{}, url: fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", port)}
	s.cmd = command("postgres", "-D", data, "-p", strconv.Itoa(port), "-k", data,
		"-c", "listen_addresses=127.0.0.1", "-c", "fsync=on", "-c", "synchronous_commit=on",
		"-c", "shared_buffers=512MB", "-c", "max_connections=64")
	s.cmd.Stdout, s.cmd.Stderr = s.log, s.log
	if err := s.cmd.Start(); err != nil {
		return nil, err
	}
	if out, err := exec.Command(filepath.Join(bin, "postgres"), "--version").Output(); err == nil {
		// "postgres (PostgreSQL) 15.18 (Debian 15.18-0+deb12u1)"
		s.version = strings.TrimPrefix(strings.TrimSpace(string(out)), "postgres (PostgreSQL) ")
	}
	ctx := context.Background()
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		conn, err := pgx.Connect(ctx, s.url)
		if err == nil {
			conn.Close(ctx)
			return s, nil
		}
		if time.Now().After(deadline) {
			s.stop()
			return nil, fmt.Errorf("PostgreSQL did not take connections in 30 s: %w\n%s", err, s.log)
		}
	}
}

// database returns the URL of a database of this name, which it creates
// with the queue's table: each durability's queue has one of its own, so
// both can be filled at once.
func (s *pgServer) database(name string) (string, error) {
	url := strings.Replace(s.url, "/postgres?", "/"+name+"?", 1)
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, s.url)
	if err != nil {
		return "", err
	}
	_, err = conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize())
	conn.Close(ctx)
	if err != nil {
		return "", err
	}
	if conn, err = pgx.Connect(ctx, url); err != nil {
		return "", err
	}
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, pgSchema)
	return url, err
}

// stop asks for a fast shutdown: sessions ended, a checkpoint written.
func (s *pgServer) stop() { stopProcess(s.cmd, os.Interrupt) }

// pgQueue is the queue in a database of PostgreSQL, each worker on a
// connection of its own with synchronous_commit as the durability it is
// compared at.
type pgQueue struct {
	s          *pgServer
	url        string // the database's
	syncCommit string // on or off
}

func (q *pgQueue) connect() (*pgx.Conn, error) {
	cfg, err := pgx.ParseConfig(q.url)
	if err != nil {
		return nil, err
	}
	cfg.RuntimeParams["synchronous_commit"] = q.syncCommit
	return pgx.ConnectConfig(context.Background(), cfg)
}

// fill COPYs the missing jobs in and then vacuums, as an operator would
// after a bulk load, so every run starts from a table without dead rows.
func (q *pgQueue) fill(n int) error {
	ctx := context.Background()
	conn, err := q.connect()
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	var have int
	if err := conn.QueryRow(ctx, `SELECT count(*) FROM jobs`).Scan(&have); err != nil {
		return err
	}
	for _, batch := range top(have, n) {
		rows := make([][]any, len(batch))
		for i, j := range batch {
			rows[i] = []any{[]byte(`{"to": "` + j.to() + `"}`), j.runAt, 0}
		}
		if _, err := conn.CopyFrom(ctx, pgx.Identifier{"jobs"}, []string{"payload", "run_at", "attempts"}, pgx.CopyFromRows(rows)); err != nil {
			return err
		}
	}
	_, err = conn.Exec(ctx, `VACUUM ANALYZE jobs`)
	return err
}

// serverPID is the postmaster: its children serve the connections and
// write the WAL.
func (q *pgQueue) serverPID() int { return q.s.cmd.Process.Pid }

// settle has PostgreSQL write the load's pages now (CHECKPOINT, after
// fill's VACUUM), rather than in a checkpoint during the run.
func (q *pgQueue) settle() error {
	conn, err := q.connect()
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	_, err = conn.Exec(context.Background(), `CHECKPOINT`)
	return err
}

func (q *pgQueue) worker(i int) (worker, error) {
	conn, err := q.connect()
	if err != nil {
		return nil, err
	}
	return &pgWorker{conn: conn, id: i}, nil
}

type pgWorker struct {
	conn   *pgx.Conn
	id     int
	claims int
}

func (w *pgWorker) close() { w.conn.Close(context.Background()) }

// step claims ten and acks them in one batch: ten DELETEs in one round
// trip, one implicit transaction (one Sync), as Fenec's /batch is one.
func (w *pgWorker) step(ctx context.Context) (time.Duration, int, int, error) {
	me := owner(w.id, &w.claims)
	start := time.Now()
	rows, err := w.conn.Query(ctx, pgClaim, me)
	if err != nil {
		return 0, 0, 0, err
	}
	var ids []int64
	for rows.Next() {
		var (
			id       int64
			payload  []byte
			runAt    time.Time
			who      *string
			attempts int32
		)
		if err := rows.Scan(&id, &payload, &runAt, &who, &attempts); err != nil {
			rows.Close()
			return 0, 0, 0, err
		}
		ids = append(ids, id)
	}
	if err := rows.Err(); err != nil {
		return 0, 0, 0, err
	}
	took := time.Since(start)
	if len(ids) == 0 {
		return took, 0, 0, nil
	}
	b := &pgx.Batch{}
	for _, id := range ids {
		b.Queue(pgAck, id, me)
	}
	br := w.conn.SendBatch(ctx, b)
	for range ids {
		tag, err := br.Exec()
		if err == nil && tag.RowsAffected() != 1 {
			err = fmt.Errorf("ack deleted %d rows", tag.RowsAffected())
		}
		if err != nil {
			br.Close()
			return 0, 0, 0, err
		}
	}
	return took, len(ids), len(ids), br.Close()
}
