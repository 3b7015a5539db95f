package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
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
	duration time.Duration // of one drive
	rounds   int           // drives of each cell
	fenec    bool
	postgres bool
	redis    bool
	versions map[string]string // filled in: each peer's version
}

// A contender is one queue driven in a group: a system at a durability.
type contender struct {
	name string // fenec, three (Fenec claiming in three round trips), postgresql, redis
	q    queue
	only int // drive only at this worker count (0: at every count)
}

// network runs the queue over the network at both durabilities, and
// answers a line a durability and worker count with the three systems
// side by side; then Fenec's three round trips at the most workers.
//
// Every server runs at once, so their drives can be interleaved: for each
// durability, round after round, worker count after worker count, a group
// fills every system's queue to the job count and lets each settle, then
// drives each in turn for the drive's duration (group). A cell is the
// median of its drives (cell), each of them a minute or less from the
// other systems' drives of the same round: a slow patch of the host moves
// one drive of each system alike, or one drive of one, which the median
// passes over.
func network(c *comparison) ([]figure, error) {
	type key struct {
		name    string
		dur     string
		workers int
	}
	tallies := map[key][]*tally{}
	most := c.workers[len(c.workers)-1]
	var pids []int // every server's, for quietAll
	var pg *pgServer
	if c.postgres {
		s, err := startPostgres(c.dir)
		if err != nil {
			return nil, err
		}
		defer s.stop()
		pg = s
		c.versions["postgresql"] = s.version
		pids = append(pids, s.cmd.Process.Pid)
	}
	var rd *redisServer
	if c.redis {
		s, err := startRedis(c.dir, durabilities[0].redis)
		if err != nil {
			return nil, err
		}
		defer s.stop()
		rd = s
		c.versions["redis"] = s.version
		pids = append(pids, s.cmd.Process.Pid)
	}
	for _, d := range durabilities {
		err := func() error {
			var cs []contender
			// The drives whose server has yet to finish its work for
			// them, by contender: finished before that contender fills
			// again, before any drive, and before the servers stop.
			unfinished := map[string]func() error{}
			servers := append([]int(nil), pids...)
			if c.fenec {
				// Two servers: the queue claimed in one statement, and the
				// one claimed in three round trips, each filled on its own.
				for _, three := range []bool{false, true} {
					name, only := "fenec", 0
					if three {
						name, only = "three", most
					}
					file := filepath.Join(c.dir, "http-"+d.name+"-"+name+".db")
					s, err := startServer(c.bin, "--file", file, "--sync", d.fenec)
					if err != nil {
						return err
					}
					defer removeDB(file)
					defer s.stop()
					if _, err := s.query(jobsSchema, nil, 0); err != nil {
						return err
					}
					cs = append(cs, contender{name: name, q: &httpQueue{s: s, three: three}, only: only})
					servers = append(servers, s.cmd.Process.Pid)
				}
			}
			if pg != nil {
				cs = append(cs, contender{name: "postgresql", q: &pgQueue{s: pg, syncCommit: d.pg}})
			}
			if rd != nil {
				// One load serves both durabilities: appendfsync is
				// switched on the running server.
				if err := rd.rdb.ConfigSet(context.Background(), "appendfsync", d.redis).Err(); err != nil {
					return fmt.Errorf("redis appendfsync %s: %w", d.redis, err)
				}
				cs = append(cs, contender{name: "redis", q: &redisQueue{s: rd}})
			}
			for r := range c.rounds {
				for _, w := range c.workers {
					var in []contender
					for _, ct := range cs {
						if ct.only == 0 || ct.only == w {
							in = append(in, ct)
						}
					}
					start := time.Now()
					ts, err := group(in, w, r, c.jobs, c.duration, servers, unfinished)
					if err != nil {
						msg := fmt.Sprintf("%s, round %d, %s: %v", d.name, r+1, plural(w, "worker"), err)
						if pg != nil {
							msg += "\n" + pg.log.String()
						}
						if rd != nil {
							msg += "\n" + rd.log.String()
						}
						return errors.New(msg)
					}
					var said []string
					for i, ct := range in {
						k := key{ct.name, d.name, w}
						tallies[k] = append(tallies[k], ts[i])
						said = append(said, fmt.Sprintf("%s %.0f", ct.name, float64(ts[i].jobs)/ts[i].took.Seconds()))
					}
					fmt.Fprintf(os.Stderr, "queuebench: %s, round %d/%d, %s: %s jobs/s (%.0f s)\n",
						d.name, r+1, c.rounds, plural(w, "worker"), strings.Join(said, ", "), time.Since(start).Seconds())
				}
			}
			for name, f := range unfinished {
				if err := f(); err != nil {
					return fmt.Errorf("%s, %s: after its last drive: %w", d.name, name, err)
				}
			}
			return nil
		}()
		if err != nil {
			return nil, err
		}
	}
	var figs []figure
	for _, d := range durabilities {
		for _, w := range c.workers {
			at := func(name string) *result { return cell(values(tallies[key{name, d.name, w}]), name == "three") }
			figs = append(figs, figure{Section: d.section, Name: fmt.Sprintf("%s, claim 10, ack each", plural(w, "worker")),
				Durability: d.name, Workers: w, Method: oneStatement, Fenec: at("fenec"), Postgres: at("postgresql"), Redis: at("redis")})
		}
		if r := cell(values(tallies[key{"three", d.name, most}]), true); r != nil {
			figs = append(figs, figure{Section: d.section, Name: fmt.Sprintf("%s, claim in three round trips (read, compare-and-set, read back), ack each", plural(most, "worker")),
				Durability: d.name, Workers: most, Method: threeStatements, Fenec: r})
		}
	}
	return figs, nil
}

// group drives each contender once with w workers for d, in round r.
// First every queue is filled to n jobs and settled, all at once: a fill
// needs no quiet machine, and Fenec's settle waits seconds for its store
// to fold the fill, while the peers' fills and checkpoints run. Then one
// contender after another, in an order turned by the round (rotate), each
// drive starting only once every server is quiet (quietAll) and every
// earlier drive's server has finished its work for it (unfinished: Fenec's
// fold of the drive's log, which would otherwise land on the next drive),
// so none pays for another's work. Fenec's three round trips drive last,
// and the fold of its drive is waited for in the next group's fills. It
// answers the tallies in the contenders' order; a drive whose finishing
// is still in unfinished gets its drained figure when that is called.
func group(cs []contender, w, r, n int, d time.Duration, pids []int, unfinished map[string]func() error) ([]*tally, error) {
	finish := func(name string) error {
		f := unfinished[name]
		delete(unfinished, name)
		if f == nil {
			return nil
		}
		if err := f(); err != nil {
			return fmt.Errorf("%s: after its drive: %w", name, err)
		}
		return nil
	}
	// Each contender's earlier drive is finished before it fills again;
	// those of contenders not in this group meanwhile.
	errs := make([]error, len(cs))
	fs := make([]func() error, len(cs))
	for i, ct := range cs {
		fs[i] = unfinished[ct.name]
		delete(unfinished, ct.name)
	}
	var wg sync.WaitGroup
	rest := make([]error, 0, len(unfinished))
	var mu sync.Mutex
	for name := range unfinished {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := unfinished[name](); err != nil {
				mu.Lock()
				rest = append(rest, fmt.Errorf("%s: after its drive: %w", name, err))
				mu.Unlock()
			}
		}()
	}
	for i, ct := range cs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if fs[i] != nil {
				if err := fs[i](); err != nil {
					errs[i] = fmt.Errorf("%s: after its drive: %w", ct.name, err)
					return
				}
			}
			if err := ct.q.fill(n); err != nil {
				errs[i] = fmt.Errorf("%s: fill: %w", ct.name, err)
			} else if err := ct.q.settle(); err != nil {
				errs[i] = fmt.Errorf("%s: settle: %w", ct.name, err)
			}
		}()
	}
	wg.Wait()
	clear(unfinished)
	if err := errors.Join(append(errs, rest...)...); err != nil {
		return nil, err
	}
	var order, last []int
	for i, ct := range cs {
		if ct.name == "three" {
			last = append(last, i)
		} else {
			order = append(order, i)
		}
	}
	out := make([]*tally, len(cs))
	for _, i := range append(rotate(order, r), last...) {
		for name := range unfinished {
			if err := finish(name); err != nil {
				return nil, err
			}
		}
		if err := quietAll(pids); err != nil {
			return nil, err
		}
		t, f, err := start(cs[i].q, w, d)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", cs[i].name, err)
		}
		out[i], unfinished[cs[i].name] = t, f
	}
	return out, nil
}

// values answers the tallies pointed to.
func values(ts []*tally) []tally {
	out := make([]tally, len(ts))
	for i, t := range ts {
		out[i] = *t
	}
	return out
}

// removeDB removes a SQLite file and its WAL, so a million jobs do not
// wait on disk for the end of the run.
func removeDB(file string) {
	for _, f := range []string{file, file + "-wal", file + "-shm"} {
		os.Remove(f)
	}
}
