package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"
)

// A durability is one level the three systems are compared at, each
// system set the way that promises the same: durable, every write on disk
// before it is answered; relaxed, on disk within a second at most.
type durability struct {
	name    string
	section string
	fenec   string // --sync
	pg      string // synchronous_commit
	redis   string // appendfsync
}

var durabilities = []durability{
	{"durable", secDurable, "always", "on", "always"},
	{"relaxed", secRelaxed, "250", "off", "everysec"},
}

// A comparison is what the network runs take: which systems to run, and
// how.
type comparison struct {
	bin      string // fenec
	dir      string // temporary files
	jobs     int
	workers  []int
	duration time.Duration
	fenec    bool
	postgres bool
	redis    bool
	versions map[string]string // filled in: each peer's version
}

// network runs the queue over the network at both durabilities, each
// system with every worker count, and answers a line a durability and
// count with the three side by side; then Fenec's three round trips at the
// most workers.
func network(c *comparison) ([]figure, error) {
	type key struct {
		dur     string
		workers int
	}
	fen, pg, rd := map[key]*result{}, map[key]*result{}, map[key]*result{}
	three := map[string]*result{}
	most := c.workers[len(c.workers)-1]
	record := func(into map[key]*result, d durability, rs []*result) {
		for i, r := range rs {
			into[key{d.name, c.workers[i]}] = r
		}
	}
	if c.fenec {
		for _, d := range durabilities {
			file := filepath.Join(c.dir, "http-"+d.name+".db")
			s, err := startServer(c.bin, "--file", file, "--sync", d.fenec)
			if err != nil {
				return nil, err
			}
			if _, err := s.query(jobsSchema, nil, 0); err != nil {
				s.stop()
				return nil, err
			}
			rs, err := sweep(&httpQueue{s: s}, c.jobs, c.workers, c.duration, false)
			if err == nil {
				record(fen, d, rs)
				rs, err = sweep(&httpQueue{s: s, three: true}, c.jobs, []int{most}, c.duration, true)
			}
			s.stop()
			removeDB(file)
			if err != nil {
				return nil, fmt.Errorf("fenec --sync %s: %w", d.fenec, err)
			}
			three[d.name] = rs[0]
		}
	}
	if c.postgres {
		s, err := startPostgres(c.dir)
		if err != nil {
			return nil, err
		}
		c.versions["postgresql"] = s.version
		for _, d := range durabilities {
			rs, err := sweep(&pgQueue{s: s, syncCommit: d.pg}, c.jobs, c.workers, c.duration, false)
			if err != nil {
				s.stop()
				return nil, fmt.Errorf("postgresql synchronous_commit=%s: %w\n%s", d.pg, err, s.log)
			}
			record(pg, d, rs)
		}
		s.stop()
	}
	if c.redis {
		s, err := startRedis(c.dir, durabilities[0].redis)
		if err != nil {
			return nil, err
		}
		c.versions["redis"] = s.version
		for _, d := range durabilities {
			// One load serves both durabilities: appendfsync is switched
			// on the running server.
			err := s.rdb.ConfigSet(context.Background(), "appendfsync", d.redis).Err()
			var rs []*result
			if err == nil {
				rs, err = sweep(&redisQueue{s: s}, c.jobs, c.workers, c.duration, false)
			}
			if err != nil {
				s.stop()
				return nil, fmt.Errorf("redis appendfsync %s: %w\n%s", d.redis, err, s.log)
			}
			record(rd, d, rs)
		}
		s.stop()
	}
	var figs []figure
	for _, d := range durabilities {
		for _, w := range c.workers {
			k := key{d.name, w}
			figs = append(figs, figure{Section: d.section, Name: fmt.Sprintf("%s, claim 10, ack each", plural(w, "worker")),
				Durability: d.name, Workers: w, Method: oneStatement, Fenec: fen[k], Postgres: pg[k], Redis: rd[k]})
		}
		if r := three[d.name]; r != nil {
			figs = append(figs, figure{Section: d.section, Name: fmt.Sprintf("%s, claim in three round trips (read, compare-and-set, read back), ack each", plural(most, "worker")),
				Durability: d.name, Workers: most, Method: threeStatements, Fenec: r})
		}
	}
	return figs, nil
}

// removeDB removes a SQLite file and its WAL, so a million jobs do not
// wait on disk for the end of the run.
func removeDB(file string) {
	for _, f := range []string{file, file + "-wal", file + "-shm"} {
		os.Remove(f)
	}
}
