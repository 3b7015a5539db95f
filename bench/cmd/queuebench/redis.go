package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// redisServer is a redis-server the benchmark started on loopback, its
// append-only file in a temporary directory and no snapshots.
type redisServer struct {
	cmd     *exec.Cmd
	rdb     *redis.Client
	log     *bytes.Buffer
	version string
}

func startRedis(dir, appendfsync string) (*redisServer, error) {
	// A directory of its own: a server started earlier left its
	// append-only file, which this one would load.
	data, err := os.MkdirTemp(dir, "redis-")
	if err != nil {
		return nil, err
	}
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	s := &redisServer{log: &bytes.Buffer{}}
	s.cmd = exec.Command("redis-server", "--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--dir", data,
		"--appendonly", "yes", "--appendfsync", appendfsync, "--save", "", "--daemonize", "no")
	s.cmd.Stdout, s.cmd.Stderr = s.log, s.log
	if err := s.cmd.Start(); err != nil {
		return nil, err
	}
	if out, err := exec.Command("redis-server", "--version").Output(); err == nil {
		// "Redis server v=7.0.15 sha=00000000:0 malloc=jemalloc-5.3.0 …"
		for _, f := range strings.Fields(string(out)) {
			if v, ok := strings.CutPrefix(f, "v="); ok {
				s.version = v
			}
		}
	}
	// One client for every worker: its pool hands each a connection.
	s.rdb = redis.NewClient(&redis.Options{Addr: "127.0.0.1:" + strconv.Itoa(port), PoolSize: 64, ReadTimeout: time.Minute})
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		err := s.rdb.Ping(context.Background()).Err()
		if err == nil {
			return s, nil
		}
		if time.Now().After(deadline) {
			s.stop()
			return nil, fmt.Errorf("redis-server did not answer in 30 s: %w\n%s", err, s.log)
		}
	}
}

// stop has Redis shut down as on SIGTERM: the append-only file flushed.
func (s *redisServer) stop() {
	s.rdb.Close()
	stopProcess(s.cmd, os.Interrupt)
}

// redisQueue is Redis's reliable queue: a worker moves each job it takes
// into a processing list of its own (LMOVE), where a job outlives a worker
// that dies, and acks it by removing it from there (LREM). Ten LMOVEs in
// one pipeline are the claim of ten, ten LREMs in one its acks.
type redisQueue struct{ s *redisServer }

func (q *redisQueue) fill(n int) error {
	ctx := context.Background()
	have, err := q.s.rdb.LLen(ctx, "jobs").Result()
	if err != nil {
		return err
	}
	pipe := q.s.rdb.Pipeline()
	for _, batch := range top(int(have), n) {
		vals := make([]any, len(batch))
		for i, j := range batch {
			vals[i] = `{"id":` + strconv.FormatInt(j.seq, 10) + `,"to":"` + j.to() + `"}`
		}
		pipe.RPush(ctx, "jobs", vals...)
		if pipe.Len() == 20 {
			if _, err := pipe.Exec(ctx); err != nil {
				return err
			}
		}
	}
	_, err = pipe.Exec(ctx)
	return err
}

func (q *redisQueue) serverPID() int { return q.s.cmd.Process.Pid }

// settle waits for an append-only file rewrite the load set off (Redis
// rewrites the file once it has doubled) to end.
func (q *redisQueue) settle() error {
	ctx := context.Background()
	for deadline := time.Now().Add(3 * time.Minute); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		info, err := q.s.rdb.Info(ctx, "persistence").Result()
		if err != nil {
			return err
		}
		if strings.Contains(info, "aof_rewrite_in_progress:0") && strings.Contains(info, "aof_rewrite_scheduled:0") {
			return nil
		}
	}
	return errors.New("redis still rewriting its append-only file 3 minutes after a load")
}

func (q *redisQueue) worker(i int) (worker, error) {
	return &redisWorker{rdb: q.s.rdb, processing: "processing:" + strconv.Itoa(i)}, nil
}

type redisWorker struct {
	rdb        *redis.Client
	processing string
}

func (w *redisWorker) close() {}

func (w *redisWorker) step(ctx context.Context) (time.Duration, int, int, error) {
	start := time.Now()
	cmds, err := w.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for range batchSize {
			p.LMove(ctx, "jobs", w.processing, "LEFT", "RIGHT")
		}
		return nil
	})
	// redis.Nil: the queue ran out before the tenth LMOVE.
	if err != nil && !errors.Is(err, redis.Nil) {
		return 0, 0, 0, err
	}
	took := time.Since(start)
	var jobs []string
	for _, c := range cmds {
		if v, err := c.(*redis.StringCmd).Result(); err == nil {
			jobs = append(jobs, v)
		}
	}
	if len(jobs) == 0 {
		return took, 0, 0, nil
	}
	acks, err := w.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for _, j := range jobs {
			p.LRem(ctx, w.processing, 1, j)
		}
		return nil
	})
	if err != nil {
		return 0, 0, 0, err
	}
	for _, c := range acks {
		if n := c.(*redis.IntCmd).Val(); n != 1 {
			return 0, 0, 0, fmt.Errorf("LREM removed %d", n)
		}
	}
	return took, len(jobs), len(jobs), nil
}

// redisWaker times BLPOP as a fenecWaker times Fenec-Wait: one client
// blocked on an empty list, an RPUSH from another at a random moment, the
// time from the push to the pop's answer.
type redisWaker struct {
	s      *redisServer
	got    chan time.Time
	failed chan error
}

func startRedisWaker(s *redisServer) *redisWaker {
	w := &redisWaker{s: s, got: make(chan time.Time, 1), failed: make(chan error, 1)}
	go func() {
		for {
			if _, err := s.rdb.BLPop(context.Background(), 30*time.Second, "wake").Result(); err != nil {
				w.failed <- err
				return
			}
			w.got <- time.Now()
		}
	}()
	time.Sleep(50 * time.Millisecond)
	return w
}

// window pushes n jobs one at a time, and returns the time from each push
// to the pop's answer.
func (w *redisWaker) window(n int) ([]time.Duration, error) {
	var lat []time.Duration
	for range n {
		time.Sleep(time.Duration(2+rand.IntN(20)) * time.Millisecond)
		start := time.Now()
		if err := w.s.rdb.RPush(context.Background(), "wake", "job").Err(); err != nil {
			return nil, err
		}
		select {
		case at := <-w.got:
			lat = append(lat, at.Sub(start))
		case err := <-w.failed:
			return nil, err
		}
	}
	return lat, nil
}

// close stops the server, which ends the blocked BLPOP.
func (w *redisWaker) close() { w.s.stop() }
