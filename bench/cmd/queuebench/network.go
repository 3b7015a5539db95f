package main

import (
	"bytes"
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
	https    bool // Fenec over TLS too, at every worker count
	postgres bool
	redis    bool
	versions map[string]string // filled in: each peer's version
}

// A contender is one queue driven in a group: a system at a durability.
type contender struct {
	sys  string // fenec, three (Fenec claiming in three round trips), https (Fenec over TLS), postgresql, redis
	dur  string // durable, relaxed
	q    queue
	only int // drive only at this worker count (0: at every count)
}

func (c contender) name() string { return c.sys + " " + c.dur }

// network runs the queue over the network at both durabilities, and
// returns a line a durability and worker count with the three systems
// side by side; then Fenec's three round trips at the most workers.
//
// Every server runs at once, each system at each durability with a queue
// of its own (Fenec and Redis a server each, PostgreSQL a database each),
// so their drives can be interleaved: round after round, worker count
// after worker count, a group fills every queue to the job count and lets
// it settle, then drives each in turn for the drive's duration (group). A
// cell is the median of its drives (cell), each of them a minute or less
// from the other systems' drives of the same round: a slow patch of the
// host moves one drive of each system alike, or one drive of one, which
// the median passes over.
func network(c *comparison) ([]figure, error) {
	type key struct {
		sys     string
		dur     string
		workers int
	}
	tallies := map[key][]*tally{}
	most := c.workers[len(c.workers)-1]
	var (
		cs   []contender
		pids []int // every server's, for quietAll
		logs []*bytes.Buffer
	)
	if c.postgres {
		s, err := startPostgres(c.dir)
		if err != nil {
			return nil, err
		}
		defer s.stop()
		c.versions["postgresql"] = s.version
		pids, logs = append(pids, s.cmd.Process.Pid), append(logs, s.log)
		for _, d := range durabilities {
			url, err := s.database(d.name)
			if err != nil {
				return nil, err
			}
			cs = append(cs, contender{sys: "postgresql", dur: d.name, q: &pgQueue{s: s, url: url, syncCommit: d.pg}})
		}
	}
	if c.redis {
		for _, d := range durabilities {
			s, err := startRedis(c.dir, d.redis)
			if err != nil {
				return nil, err
			}
			defer s.stop()
			c.versions["redis"] = s.version
			pids, logs = append(pids, s.cmd.Process.Pid), append(logs, s.log)
			cs = append(cs, contender{sys: "redis", dur: d.name, q: &redisQueue{s: s}})
		}
	}
	if c.fenec {
		// At each durability two servers: the queue claimed in one
		// statement, and the one claimed in three round trips.
		for _, d := range durabilities {
			for _, three := range []bool{false, true} {
				sys, only := "fenec", 0
				if three {
					sys, only = "three", most
				}
				file := filepath.Join(c.dir, "http-"+d.name+"-"+sys+".db")
				s, err := startServer(c.bin, "--file", file, "--sync", d.fenec)
				if err != nil {
					return nil, err
				}
				defer removeDB(file)
				defer s.stop()
				if _, err := s.query(jobsSchema, nil, 0); err != nil {
					return nil, err
				}
				cs = append(cs, contender{sys: sys, dur: d.name, q: &httpQueue{s: s, three: three}, only: only})
				pids = append(pids, s.cmd.Process.Pid)
			}
		}
	}
	if c.https {
		cert, key, client, err := serverCert(c.dir)
		if err != nil {
			return nil, err
		}
		for _, d := range durabilities {
			file := filepath.Join(c.dir, "https-"+d.name+".db")
			s, err := startServerTLS(c.bin, client, "--file", file, "--sync", d.fenec, "--tls-cert", cert, "--tls-key", key)
			if err != nil {
				return nil, err
			}
			defer removeDB(file)
			defer s.stop()
			if _, err := s.query(jobsSchema, nil, 0); err != nil {
				return nil, err
			}
			cs = append(cs, contender{sys: "https", dur: d.name, q: &httpQueue{s: s}})
			pids = append(pids, s.cmd.Process.Pid)
		}
	}
	// The drives whose server has yet to finish its work for them, by
	// contender: finished before that contender fills again, before any
	// drive, and before the servers stop.
	unfinished := map[string]func() error{}
	for r := range c.rounds {
		for _, w := range c.workers {
			var in []contender
			for _, ct := range cs {
				if ct.only == 0 || ct.only == w {
					in = append(in, ct)
				}
			}
			start := time.Now()
			ts, filled, err := group(in, w, r, c.jobs, c.duration, pids, unfinished)
			if err != nil {
				msg := fmt.Sprintf("round %d, %s: %v", r+1, plural(w, "worker"), err)
				for _, l := range logs {
					msg += "\n" + l.String()
				}
				return nil, errors.New(msg)
			}
			var said []string
			for i, ct := range in {
				k := key{ct.sys, ct.dur, w}
				tallies[k] = append(tallies[k], ts[i])
				said = append(said, fmt.Sprintf("%s %.0f", ct.name(), float64(ts[i].jobs)/ts[i].took.Seconds()))
			}
			fmt.Fprintf(os.Stderr, "queuebench: round %d/%d, %s: %s jobs/s (%.0f s, of which %.0f s filling and settling)\n",
				r+1, c.rounds, plural(w, "worker"), strings.Join(said, ", "), time.Since(start).Seconds(), filled.Seconds())
		}
	}
	for name, f := range unfinished {
		if err := f(); err != nil {
			return nil, fmt.Errorf("%s: after its last drive: %w", name, err)
		}
	}
	var figs []figure
	for _, d := range durabilities {
		for _, w := range c.workers {
			at := func(sys string) *result { return cell(values(tallies[key{sys, d.name, w}]), false) }
			figs = append(figs, figure{Section: d.section, Name: fmt.Sprintf("%s, claim 10, ack each", plural(w, "worker")),
				Durability: d.name, Workers: w, Method: oneStatement, Fenec: at("fenec"), Postgres: at("postgresql"), Redis: at("redis")})
			if r := at("https"); r != nil {
				figs = append(figs, figure{Section: d.section, Name: fmt.Sprintf("%s, claim 10, ack each, over https (TLS 1.3, P-256)", plural(w, "worker")),
					Durability: d.name, Workers: w, Method: overTLS, Fenec: r})
			}
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
// returns the tallies in the contenders' order; a drive whose finishing
// is still in unfinished gets its drained figure when that is called.
func group(cs []contender, w, r, n int, d time.Duration, pids []int, unfinished map[string]func() error) (ts []*tally, filled time.Duration, err error) {
	began := time.Now()
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
		fs[i] = unfinished[ct.name()]
		delete(unfinished, ct.name())
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
					errs[i] = fmt.Errorf("%s: after its drive: %w", ct.name(), err)
					return
				}
			}
			if err := ct.q.fill(n); err != nil {
				errs[i] = fmt.Errorf("%s: fill: %w", ct.name(), err)
			} else if err := ct.q.settle(); err != nil {
				errs[i] = fmt.Errorf("%s: settle: %w", ct.name(), err)
			}
		}()
	}
	wg.Wait()
	clear(unfinished)
	if err := errors.Join(append(errs, rest...)...); err != nil {
		return nil, 0, err
	}
	filled = time.Since(began)
	// The order: the peers and one of Fenec's servers, turned by the
	// round; then Fenec's other server, whose fold is waited for in the
	// next group's fills rather than before another drive; then the three
	// round trips'. Which of Fenec's servers drives last alternates.
	var ones, threes, order []int
	for i, ct := range cs {
		switch ct.sys {
		case "fenec":
			ones = append(ones, i)
		case "three":
			threes = append(threes, i)
		default:
			order = append(order, i)
		}
	}
	var last []int
	if len(ones) > 0 {
		ones = rotate(ones, r)
		order, last = append(order, ones[1:]...), ones[:1]
	}
	order = append(append(rotate(order, r), last...), rotate(threes, r)...)
	out := make([]*tally, len(cs))
	for _, i := range order {
		for name := range unfinished {
			if err := finish(name); err != nil {
				return nil, 0, err
			}
		}
		if err := quietAll(pids); err != nil {
			return nil, 0, err
		}
		t, f, err := start(cs[i].q, w, d)
		if err != nil {
			return nil, 0, fmt.Errorf("%s: %w", cs[i].name(), err)
		}
		out[i], unfinished[cs[i].name()] = t, f
	}
	return out, filled, nil
}

// values returns the tallies pointed to.
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
