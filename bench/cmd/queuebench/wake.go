package main

import (
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/fenecdb/fenec/server/fenecql"
)

const (
	jobsSchema = `create collection jobs (payload json, run_at timestamp @sorted, due timestamp, owner text, attempts int)`
	claimOne   = `set jobs {owner: $1, run_at: now() + 30000, attempts: attempts + 1} where run_at <= now() order run_at limit 1 returning id, due, run_at`
	ackOne     = `del jobs where id = $1 and owner = $2 require 1`
)

// wake puts jobs one at a time to one worker, and times each from the put
// to the worker holding it: held by Fenec-Wait, then polling every 10 ms
// and every 100 ms, counting the claims each sent. The server keeps a file
// at --sync 250, as Redis, beside it, keeps its append-only file at
// everysec; with withRedis, BLPOP is timed the same way. The held figure,
// the one the targets are set for (docs/benchmarks.md, "Targets"), is taken in windows of samples
// jobs, Fenec's and Redis's in turn with both servers running, and pooled
// (rounds.go): a slow patch of the host lands on both. The polling lines
// are one window each.
func wake(bin, dir string, samples, windows int, withRedis bool, versions map[string]string) ([]figure, error) {
	fw, err := startFenecWaker(bin, dir, 0)
	if err != nil {
		return nil, err
	}
	var rw *redisWaker
	if withRedis {
		r, err := startRedis(dir, "everysec")
		if err != nil {
			fw.close()
			return nil, err
		}
		versions["redis"] = r.version
		rw = startRedisWaker(r)
	}
	var fws, rws [][]time.Duration
	for i := range windows {
		for _, sys := range rotate([]string{"fenec", "redis"}, i) {
			switch {
			case sys == "fenec":
				fws = append(fws, fw.window(samples))
			case rw != nil:
				lat, err := rw.window(samples)
				if err != nil {
					fw.close()
					rw.close()
					return nil, fmt.Errorf("BLPOP: %w", err)
				}
				rws = append(rws, lat)
			}
		}
	}
	held := pooled(fws)
	held.Value, held.Unit = fw.perJob(windows*samples), "claims/job"
	held.Note = fmt.Sprintf("%d jobs in %s of %d", windows*samples, plural(windows, "window"), samples)
	fw.close()
	figs := []figure{{Section: secWait, Name: "put → held worker (Fenec-Wait; Redis BLPOP)", Fenec: held}}
	if rw != nil {
		figs[0].Redis = pooled(rws)
		figs[0].Redis.Note = fmt.Sprintf("%d jobs in %s of %d, appendfsync everysec", windows*samples, plural(windows, "window"), samples)
		rw.close()
	}
	for _, mode := range []struct {
		name string
		poll time.Duration
		n    int
	}{
		{"put → worker polling every 10 ms", 10 * time.Millisecond, samples},
		{"put → worker polling every 100 ms", 100 * time.Millisecond, samples / 3},
	} {
		fw, err := startFenecWaker(bin, dir, mode.poll)
		if err != nil {
			return nil, err
		}
		lat := fw.window(mode.n)
		p50, p99 := percentiles(lat)
		figs = append(figs, figure{Section: secWait, Name: mode.name, Fenec: &result{P50: p50, P99: p99,
			Value: fw.perJob(mode.n), Unit: "claims/job", Note: fmt.Sprintf("%d jobs", mode.n), Samples: millis(lat)}})
		fw.close()
	}
	return figs, nil
}

// fenecWaker is a `fenec serve` at --sync 250 with one worker claiming
// from it, held by Fenec-Wait (poll 0) or polling every poll.
type fenecWaker struct {
	s      *server
	file   string
	poll   time.Duration
	got    chan time.Time
	claims atomic.Int64
	stop   atomic.Bool
}

func startFenecWaker(bin, dir string, poll time.Duration) (*fenecWaker, error) {
	file := tempFile(dir, "wake")
	s, err := startServer(bin, "--file", file, "--sync", "250")
	if err != nil {
		return nil, err
	}
	s.must(jobsSchema)
	f := &fenecWaker{s: s, file: file, poll: poll, got: make(chan time.Time, 1)}
	go func() {
		for !f.stop.Load() {
			wait := 30 * time.Second
			if poll > 0 {
				wait = 0
			}
			rows, err := s.query(claimOne, []any{"w"}, wait)
			f.claims.Add(1)
			if err != nil {
				return
			}
			if len(rows) == 0 {
				time.Sleep(poll)
				continue
			}
			f.got <- time.Now()
			s.query(ackOne, []any{rows[0]["id"], "w"}, 0)
		}
	}()
	time.Sleep(50 * time.Millisecond)
	f.claims.Store(0)
	return f, nil
}

// window puts n jobs one at a time, and returns the time from each put to
// the worker holding it.
func (f *fenecWaker) window(n int) []time.Duration {
	var lat []time.Duration
	for range n {
		// A pause unrelated to the polling period and longer than it,
		// so puts land at every phase of it: the poller's sleep starts
		// again as it takes each job.
		spread := max(20*time.Millisecond, 2*f.poll)
		time.Sleep(2*time.Millisecond + rand.N(spread))
		start := time.Now()
		f.s.must(`put jobs {run_at: now(), attempts: 0}`)
		lat = append(lat, (<-f.got).Sub(start))
	}
	return lat
}

// perJob returns the claims the worker sent per job, over jobs put.
func (f *fenecWaker) perJob(jobs int) float64 { return float64(f.claims.Load()) / float64(jobs) }

func (f *fenecWaker) close() {
	f.stop.Store(true)
	f.s.stop()
	removeDB(f.file)
}

// delayed puts jobs due 50 ms on to a held worker, and measures how late
// each was taken past its time by the server's own clock (never early).
func delayed(bin string, n int) ([]figure, error) {
	s, err := startServer(bin, "--file", ":memory:")
	if err != nil {
		return nil, err
	}
	defer s.stop()
	s.must(jobsSchema)
	type taken struct{ due, at time.Time }
	got := make(chan taken, 1)
	var stop atomic.Bool
	go func() {
		for !stop.Load() {
			rows, err := s.query(claimOne, []any{"w"}, 30*time.Second)
			if err != nil || len(rows) == 0 {
				continue
			}
			due, _ := time.Parse(time.RFC3339Nano, fmt.Sprint(rows[0]["due"]))
			lease, _ := time.Parse(time.RFC3339Nano, fmt.Sprint(rows[0]["run_at"]))
			got <- taken{due: due, at: lease.Add(-30 * time.Second)}
			s.query(ackOne, []any{rows[0]["id"], "w"}, 0)
		}
	}()
	var late []time.Duration
	early := 0
	for i := 0; i < n; i++ {
		s.must(`put jobs {run_at: now() + 50, due: now() + 50, attempts: 0}`)
		t := <-got
		if t.at.Before(t.due) {
			early++
		}
		late = append(late, t.at.Sub(t.due))
	}
	stop.Store(true)
	s.must(`put jobs {run_at: now(), attempts: 0}`)
	p50, p99 := percentiles(late)
	return []figure{{Section: secHeld, Name: "delayed job taken past its run_at (server clock, ms resolution)", Fenec: &result{P50: p50, P99: p99,
		Value: float64(early), Unit: "taken early", Note: fmt.Sprintf("%d jobs due 50 ms after their put", n)}}}, nil
}

// couriers holds n couriers at random points of a city 10 km across, each
// claiming the nearest ride, and puts rides one at a time: the time from
// the put to the courier's answer, whether the nearest took it, and the
// server's CPU per ride.
func couriers(bin string, counts []int, orders int) ([]figure, error) {
	var figs []figure
	for _, n := range counts {
		s, err := startServer(bin, "--file", ":memory:")
		if err != nil {
			return nil, err
		}
		s.must(`create collection rides (pickup geo @geo, run_at timestamp @sorted, owner text)`)
		claim := `set rides {owner: $1, run_at: now() + 30000} where run_at <= now() order distance(pickup, $2) limit 1 returning id, owner`
		type win struct {
			who int
			at  time.Time
		}
		got := make(chan win, n)
		var stop atomic.Bool
		points := make([][2]float64, n)
		for i := range points {
			points[i] = cityPoint()
			go func(i int) {
				me := "c" + strconv.Itoa(i)
				for !stop.Load() {
					rows, err := s.query(claim, []any{me, points[i][:]}, 30*time.Second)
					if err != nil || len(rows) == 0 {
						continue
					}
					got <- win{who: i, at: time.Now()}
					s.query(`del rides where id = $1`, []any{rows[0]["id"]}, 0)
				}
			}(i)
		}
		if err := s.awaitHeld(n); err != nil {
			return nil, err
		}
		var lat []time.Duration
		nearest := 0
		cpu0 := s.cpu()
		for i := 0; i < orders; i++ {
			p := cityPoint()
			start := time.Now()
			s.must(`put rides {pickup: $1, run_at: now()}`, p[:])
			w := <-got
			lat = append(lat, w.at.Sub(start))
			if isNearest(points, p, w.who) {
				nearest++
			}
			if err := s.awaitHeld(n); err != nil {
				return nil, err
			}
		}
		cpu := s.cpu() - cpu0
		stop.Store(true)
		p50, p99 := percentiles(lat)
		figs = append(figs, figure{Section: secHeld, Name: fmt.Sprintf("put → nearest of %s held couriers", count(n)), Fenec: &result{P50: p50, P99: p99,
			Value: float64(cpu) / float64(orders) / float64(time.Millisecond), Unit: "ms server CPU/ride",
			Note: fmt.Sprintf("%d of %d rides to the nearest", nearest, orders)}})
		s.stop()
	}
	return figs, nil
}

// cityPoint is a random point in a square 10 km across around Istanbul.
func cityPoint() [2]float64 {
	return [2]float64{29.0 + rand.Float64()*0.119, 41.0 + rand.Float64()*0.09}
}

func isNearest(points [][2]float64, p [2]float64, who int) bool {
	best := math.Inf(1)
	for _, q := range points {
		best = math.Min(best, haversine(p, q))
	}
	return haversine(p, points[who]) <= best
}

func haversine(p, q [2]float64) float64 { return fenecql.Haversine(p[0], p[1], q[0], q[1]) }

// awaitHeld waits until the server holds n claims, read from /_metrics.
func (s *server) awaitHeld(n int) error {
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		if held, err := s.held(); err == nil && held == n {
			return nil
		}
		time.Sleep(2 * time.Millisecond)
	}
	return fmt.Errorf("the server did not hold %d claims in 30 s", n)
}

func (s *server) held() (int, error) {
	resp, err := s.http.Get(s.url + "/_metrics")
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "fenec_held_claims "); ok {
			f, err := strconv.ParseFloat(v, 64)
			return int(f), err
		}
	}
	return 0, fmt.Errorf("no fenec_held_claims in /_metrics")
}

// idle holds n claims on an empty queue and measures what they cost the
// server while nothing happens: CPU over two seconds, and memory each.
func idle(bin string, n int) ([]figure, error) {
	s, err := startServer(bin, "--file", ":memory:")
	if err != nil {
		return nil, err
	}
	defer s.stop()
	s.must(jobsSchema)
	rss0 := s.rss()
	var stop atomic.Bool
	for i := 0; i < n; i++ {
		go func() {
			for !stop.Load() {
				s.query(claimOne, []any{"w"}, 30*time.Second)
			}
		}()
	}
	if err := s.awaitHeld(n); err != nil {
		return nil, err
	}
	rss := s.rss() - rss0
	cpu0 := s.cpu()
	time.Sleep(2 * time.Second)
	cpu := s.cpu() - cpu0
	stop.Store(true)
	return []figure{{Section: secHeld, Name: fmt.Sprintf("%s claims held on an empty queue, idle", count(n)), Fenec: &result{Value: float64(cpu) / float64(2*time.Second) * 100, Unit: "% of a core",
		Note: fmt.Sprintf("%.1f KiB of server memory (RSS) per held claim", float64(rss)/1024/float64(n))}}}, nil
}
