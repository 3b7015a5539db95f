package main

// `make redis-bench` (queuebench -mode redis): the recipes of
// docs/redis.md under load, each checked for the one property it exists
// for, against a real `fenec serve` — a counter that loses no increment
// (beside Redis's INCR in the same run), a lock that one client of many
// wins each round and that is free again the moment it lapses, a rate
// limit never passed, and a million @ttl documents lapsing at once while
// reads stay right and another collection's claims go on.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fenecdb/fenec/server/engine"
)

// recipes is a run's settings, from the flags.
type recipes struct {
	bin, dir    string
	install     bool
	incClients  int // counter: clients, each adding incs times
	incs        int
	lockClients int // lock: clients racing each round
	lockRounds  int
	lapses      int           // lock: rounds left to lapse rather than released
	rateClients int           // rate limit: clients
	rateLimit   int           // allowed per window
	rateFor     time.Duration // how long the clients ask
	ttlRows     int           // documents lapsing at once
	note        string
	out         strings.Builder
	failed      []string
}

// fail records a property that did not hold: the run goes on, and exits 1
// once the report is written.
func (r *recipes) fail(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	r.failed = append(r.failed, msg)
	fmt.Fprintln(os.Stderr, "queuebench: FAILED:", msg)
}

func (r *recipes) printf(format string, args ...any) { fmt.Fprintf(&r.out, format, args...) }

// runRecipes runs every recipe and writes redis.md into out (if not "").
func runRecipes(r *recipes, out string) error {
	tmp, err := os.MkdirTemp(r.dir, "redisbench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	r.dir = tmp
	if r.install {
		if err := ensureRedis(); err != nil {
			return err
		}
	}
	r.printf("# Instead of Redis: the recipes under load\n\n")
	r.printf("`make redis-bench` (bench/cmd/queuebench, `-mode redis`), %s, on %s (%d cores, %.0f GiB, %s), fenec %s.\n",
		time.Now().UTC().Format("2006-01-02 15:04 UTC"), cpuModel(), runtime.NumCPU(), memGiB(), osName(), fenecVersion())
	r.printf("Command: `cd bench && go run ./cmd/queuebench %s`.", strings.Join(os.Args[1:], " "))
	if r.note != "" {
		r.printf(" %s", r.note)
	}
	r.printf("\nThe recipes are those of [docs/redis.md](../../docs/redis.md); every client is a goroutine of this process, over HTTP on loopback.\n\n")
	for _, step := range []struct {
		what string
		fn   func() error
	}{
		{"counter", r.counter},
		{"lock", r.lock},
		{"rate limit", r.rateLimitRun},
		{"expiry", r.expiry},
	} {
		start := time.Now()
		fmt.Fprintf(os.Stderr, "queuebench: %s…\n", step.what)
		if err := step.fn(); err != nil {
			return fmt.Errorf("%s: %w", step.what, err)
		}
		fmt.Fprintf(os.Stderr, "queuebench: %s took %.0f s\n", step.what, time.Since(start).Seconds())
	}
	if len(r.failed) == 0 {
		r.printf("Every property held.\n")
	} else {
		r.printf("**Failed:**\n\n")
		for _, f := range r.failed {
			r.printf("- %s\n", f)
		}
	}
	fmt.Print(r.out.String())
	if out != "" {
		if err := os.MkdirAll(out, 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(out, "redis.md"), []byte(r.out.String()), 0o644); err != nil {
			return err
		}
	}
	if len(r.failed) > 0 {
		return fmt.Errorf("%d properties did not hold", len(r.failed))
	}
	return nil
}

// affected sends one statement and returns its count of rows written.
func (s *server) affected(q string, params ...any) (int64, error) {
	b, err := s.post("/query", statement(q, params...), 0)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", q, err)
	}
	var a struct{ Affected *int64 }
	if err := json.Unmarshal(b, &a); err != nil || a.Affected == nil {
		return 0, fmt.Errorf("%s: answered %s, not a count", q, b)
	}
	return *a.Affected, nil
}

// stored returns how many documents the collection stores, lapsed ones
// not yet swept included: fenec_documents of GET /_metrics (GET
// /collections counts live documents alone).
func (s *server) stored(name string) (int64, error) {
	resp, err := s.http.Get(s.url + "/_metrics")
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, err
	}
	prefix := `fenec_documents{collection="` + name + `"} `
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, prefix); ok {
			f, err := strconv.ParseFloat(v, 64)
			return int64(f), err
		}
	}
	return 0, fmt.Errorf("no %s… in /_metrics", prefix)
}

// counter: clients × incs increments of one counter, each the statement
// the SDKs' inc(1) renders, at both durabilities, beside Redis's INCR.
func (r *recipes) counter() error {
	total := int64(r.incClients * r.incs)
	r.printf("## A counter: %d clients × %s increments of one counter\n\n", r.incClients, count(r.incs))
	r.printf("Fenec: `set counters {n: coalesce(n, 0) + $1} where key = $2` (what `inc(1)` renders; `key` is `@unique`), one statement a request. Redis: `INCR hits`. Each client waits for its answer before sending the next.\n\n")
	r.printf("| durability | system | final value | increments/s |\n| --- | --- | --- | --- |\n")
	for _, d := range []struct{ name, sync, fsync string }{
		{"durable (Fenec --sync always · Redis appendfsync always)", "always", "always"},
		{"relaxed (Fenec --sync 250 · Redis appendfsync everysec)", "250", "everysec"},
	} {
		s, err := startServer(r.bin, "--file", tempFile(r.dir, "counter"), "--sync", d.sync)
		if err != nil {
			return err
		}
		s.must("create collection counters (key text @unique, n int)")
		s.must(`put counters {key: "hits"}`) // n null: inc counts from nothing
		took, err := parallel(r.incClients, r.incs, func(int, int) error {
			n, err := s.affected(`set counters {n: coalesce(n, 0) + $1} where key = $2`, 1, "hits")
			if err == nil && n != 1 {
				err = fmt.Errorf("an increment wrote %d rows", n)
			}
			return err
		})
		var final int64
		if err == nil {
			final, err = s.must(`get counters select n where key = "hits"`)[0]["n"].(json.Number).Int64()
		}
		s.stop()
		if err != nil {
			return err
		}
		if final != total {
			r.fail("counter, Fenec %s: %d, not %d", d.sync, final, total)
		}
		r.printf("| %s | Fenec | %s | %s |\n", d.name, count(int(final)), count(int(float64(total)/took.Seconds())))

		red, err := startRedis(r.dir, d.fsync)
		if err != nil {
			return err
		}
		ctx := context.Background()
		red.rdb.Del(ctx, "hits")
		took, err = parallel(r.incClients, r.incs, func(int, int) error { return red.rdb.Incr(ctx, "hits").Err() })
		if err == nil {
			final, err = red.rdb.Get(ctx, "hits").Int64()
		}
		red.stop()
		if err != nil {
			return err
		}
		if final != total {
			r.fail("counter, Redis %s: %d, not %d", d.fsync, final, total)
		}
		r.printf("| | Redis %s | %s | %s |\n", red.version, count(int(final)), count(int(float64(total)/took.Seconds())))
	}
	r.printf("\n")
	return nil
}

// parallel runs fn(client, i) for i below each, in clients goroutines,
// and returns the time they took together, or the first error.
func parallel(clients, each int, fn func(client, i int) error) (time.Duration, error) {
	var wg sync.WaitGroup
	var first atomic.Pointer[error]
	start := time.Now()
	for c := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < each && first.Load() == nil; i++ {
				if err := fn(c, i); err != nil {
					first.CompareAndSwap(nil, &err)
					return
				}
			}
		}()
	}
	wg.Wait()
	if e := first.Load(); e != nil {
		return 0, *e
	}
	return time.Since(start), nil
}

// lock: lockClients race for one lock each round, released by its winner;
// then lapses rounds in which the winner never releases it and every
// client keeps trying, to time how soon after its lapse it is taken again.
func (r *recipes) lock() error {
	s, err := startServer(r.bin, "--file", tempFile(r.dir, "lock"), "--sync", "always")
	if err != nil {
		return err
	}
	defer s.stop()
	const ttl = time.Second
	s.must("create collection locks (name text @unique, owner text, taken timestamp @ttl(1s))")
	take := `put locks {name: "job", owner: $1, taken: now()} if absent`
	var roundTimes []time.Duration
	bad := 0
	for round := range r.lockRounds {
		var wins atomic.Int64
		var winner atomic.Value
		start := time.Now()
		_, err := parallel(r.lockClients, 1, func(c, _ int) error {
			owner := fmt.Sprintf("r%d-c%d", round, c)
			n, err := s.affected(take, owner)
			if n == 1 {
				wins.Add(1)
				winner.Store(owner)
			}
			return err
		})
		if err != nil {
			return err
		}
		roundTimes = append(roundTimes, time.Since(start))
		if wins.Load() != 1 {
			bad++
			r.fail("lock round %d: %d winners", round, wins.Load())
			if wins.Load() == 0 {
				continue
			}
		}
		if n, err := s.affected(`del locks where name = "job" and owner = $1`, winner.Load()); err != nil || n != 1 {
			return fmt.Errorf("the winner's release deleted %d: %v", n, err)
		}
	}
	p50, p99 := percentiles(roundTimes)
	r.printf("## A lock: %d clients race for one lock, %s rounds\n\n", r.lockClients, count(r.lockRounds))
	r.printf("Each round every client sends `put locks {name: \"job\", owner: $1, taken: now()} if absent` at once (`name` `@unique`, `taken` `@ttl(1s)`), and the winner releases it with `del … where name = \"job\" and owner = $1`. Fenec --sync always.\n\n")
	r.printf("- Rounds with exactly one winner: %s of %s.\n", count(r.lockRounds-bad), count(r.lockRounds))
	r.printf("- A round (%d requests): p50 %s, p99 %s.\n", r.lockClients, ms(p50), ms(p99))

	// Lapses: the winner keeps the lock; every client tries again every
	// 10 ms until one takes it.
	var after []time.Duration
	for l := range r.lapses {
		owner := fmt.Sprintf("holder-%d", l)
		if n, err := s.affected(take, owner); err != nil || n != 1 {
			return fmt.Errorf("taking the free lock: %d, %v", n, err)
		}
		rows := s.must(`get locks select taken where name = "job"`)
		taken, err := time.Parse(time.RFC3339Nano, rows[0]["taken"].(string))
		if err != nil {
			return err
		}
		lapse := taken.Add(ttl)
		var wins, early atomic.Int64
		var won atomic.Value
		_, err = parallel(r.lockClients, 1, func(c, _ int) error {
			for deadline := lapse.Add(5 * time.Second); wins.Load() == 0 && time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
				n, err := s.affected(take, fmt.Sprintf("l%d-c%d", l, c))
				if err != nil {
					return err
				}
				if n == 1 {
					at := time.Now()
					if wins.Add(1) == 1 {
						won.Store(at)
					}
					// Answered before the lapse: taken from a holder.
					if at.Before(lapse) {
						early.Add(1)
					}
				}
			}
			return nil
		})
		if err != nil {
			return err
		}
		if wins.Load() != 1 || early.Load() != 0 {
			r.fail("lapse %d: %d winners, %d before the lapse", l, wins.Load(), early.Load())
			continue
		}
		after = append(after, won.Load().(time.Time).Sub(lapse))
		if _, err := s.affected(`del locks where name = "job"`); err != nil {
			return err
		}
	}
	sort.Slice(after, func(i, j int) bool { return after[i] < after[j] })
	if len(after) > 0 && after[len(after)-1] > time.Second {
		r.fail("a lapsed lock was taken again %s after its lapse", after[len(after)-1])
	}
	r.printf("- Left to lapse %d times (held, never released; %d clients trying every 10 ms): taken again each time, by one client, never before its lapse, after it by %s.\n\n",
		r.lapses, r.lockClients, durations(after))
	return nil
}

// rateLimitRun: rateClients ask for as long as rateFor under a limit of
// rateLimit per 1 s window, the recipe of docs/redis.md; every allowed
// request is answered its window (opened) and its number in it, and no
// window may hold more than the limit.
func (r *recipes) rateLimitRun() error {
	s, err := startServer(r.bin, "--file", tempFile(r.dir, "rate"), "--sync", "always")
	if err != nil {
		return err
	}
	defer s.stop()
	s.must("create collection hits (key text @unique, n int, opened timestamp @ttl(1s))")
	var mu sync.Mutex
	windows := map[string][]int64{}
	var asked, allowed atomic.Int64
	end := time.Now().Add(r.rateFor)
	_, err = parallel(r.rateClients, 1, func(int, int) error {
		for time.Now().Before(end) {
			asked.Add(1)
			if _, err := s.affected(`put hits {key: "ada", n: 0, opened: now()} if absent`); err != nil {
				return err
			}
			rows, err := s.query(`set hits {n: n + 1} where key = "ada" and n < $1 returning opened, n`, []any{r.rateLimit}, 0)
			if err != nil {
				return err
			}
			if len(rows) == 1 {
				allowed.Add(1)
				n, _ := rows[0]["n"].(json.Number).Int64()
				mu.Lock()
				opened := rows[0]["opened"].(string)
				windows[opened] = append(windows[opened], n)
				mu.Unlock()
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	most, full := 0, 0
	for w, ns := range windows {
		if len(ns) > most {
			most = len(ns)
		}
		if len(ns) == r.rateLimit {
			full++
		}
		sort.Slice(ns, func(i, j int) bool { return ns[i] < ns[j] })
		for i, n := range ns {
			if n != int64(i+1) {
				r.fail("rate limit, window %s: its counts are %v, not 1…%d", w, ns, len(ns))
				break
			}
		}
	}
	if most > r.rateLimit {
		r.fail("rate limit: a window allowed %d of a limit of %d", most, r.rateLimit)
	}
	r.printf("## A rate limit: %d per 1 s window, %d clients asking for %s\n\n", r.rateLimit, r.rateClients, r.rateFor)
	r.printf("Each request is `put hits {key: \"ada\", n: 0, opened: now()} if absent` then `set hits {n: n + 1} where key = \"ada\" and n < %d returning opened, n` (`opened` `@ttl(1s)`): allowed when the `set` answers a row, which names its window. Fenec --sync always.\n\n", r.rateLimit)
	r.printf("- %s requests, %s allowed, in %d windows; the most allowed in one window: %d (limit %d); %d windows reached the limit; in every window the counts answered were 1, 2, … with none twice.\n\n",
		count(int(asked.Load())), count(int(allowed.Load())), len(windows), most, r.rateLimit, full)
	return nil
}

// expiry: ttlRows documents that lapse at one moment (the manual clock
// moved past their @ttl), swept while one client reads them and another
// claims and acks jobs of another collection.
func (r *recipes) expiry() error {
	s, err := startServer(r.bin, "--file", tempFile(r.dir, "ttl"), "--sync", "always", "--clock", "manual")
	if err != nil {
		return err
	}
	defer s.stop()
	s.must("create collection sessions (key text @unique, user text, seen timestamp @ttl(1h))")
	s.must("create collection jobs (payload json, run_at timestamp @sorted, owner text, attempts int)")
	s.must("create collection keep (n int)")
	loadStart := time.Now()
	const per = 1000
	var docs []string
	for i := range r.ttlRows {
		docs = append(docs, fmt.Sprintf(`{key: "s%d", user: "u%d", seen: now()}`, i, i%1000))
		if len(docs) == per || i == r.ttlRows-1 {
			if _, err := s.affected("put sessions [" + strings.Join(docs, ", ") + "]"); err != nil {
				return err
			}
			docs = docs[:0]
		}
	}
	load := time.Since(loadStart)
	// Enough jobs that the prober never empties the queue: one claim and
	// ack takes about 0.3 ms on an idle machine, 3 s before the lapse and
	// the whole sweep after it.
	for range 200 {
		s.must(`put jobs [` + strings.Repeat(`{payload: {"to": "x"}, run_at: now(), attempts: 0}, `, 499) + `{payload: {"to": "x"}, run_at: now(), attempts: 0}]`)
	}
	s.must(`put keep [` + strings.Repeat(`{n: 1}, `, 999) + `{n: 1}]`)
	if n := s.must("get sessions count")[0]["count"].(json.Number).String(); n != strconv.Itoa(r.ttlRows) {
		r.fail("expiry: %s sessions before the lapse, not %d", n, r.ttlRows)
	}

	// claimAck claims one job and acks it, and answers each one's time.
	claimAck := func() (claim, ack time.Duration, err error) {
		start := time.Now()
		rows, err := s.query(`set jobs {owner: "p", run_at: now() + 30000, attempts: coalesce(attempts, 0) + 1} where run_at <= now() order run_at limit 1 returning id`, nil, 0)
		claim = time.Since(start)
		if err != nil || len(rows) != 1 {
			return 0, 0, fmt.Errorf("a claim: %d rows, %v", len(rows), err)
		}
		start = time.Now()
		_, err = s.affected(`del jobs where id = $1 require 1`, rows[0]["id"])
		return claim, time.Since(start), err
	}
	var baseClaim, baseAck []time.Duration
	for end := time.Now().Add(3 * time.Second); time.Now().Before(end); {
		c, a, err := claimAck()
		if err != nil {
			return err
		}
		baseClaim, baseAck = append(baseClaim, c), append(baseAck, a)
	}

	// The lapse: every session's seen + 1 h is now past.
	if _, err := s.post("/_clock", map[string]int64{"advance_ms": 3600000 + 1}, 0); err != nil {
		return err
	}
	lapse := time.Now()
	var done atomic.Bool
	var wg sync.WaitGroup
	var reads, wrong atomic.Int64
	var readErr, probeErr error
	var sweepClaim, sweepAck []time.Duration
	wg.Add(2)
	go func() { // the reader: nothing lapsed is answered, the rest is
		defer wg.Done()
		// Lookups by the @unique key all the time; the counts that walk
		// every stored session twice a second, so that their scans do not
		// stand for the sweep in the prober's figures.
		var scanned time.Time
		for !done.Load() {
			checks := []struct{ q, want string }{
				{fmt.Sprintf(`get sessions where key = "s%d" count`, rand.IntN(r.ttlRows)), "0"},
				{fmt.Sprintf(`get sessions where key = "s%d" count`, rand.IntN(r.ttlRows)), "0"},
				{"get keep count", "1000"},
			}
			if time.Since(scanned) > 500*time.Millisecond {
				scanned = time.Now()
				checks = append(checks, struct{ q, want string }{"get sessions count", "0"},
					struct{ q, want string }{fmt.Sprintf(`get sessions where user = "u%d" count`, rand.IntN(1000)), "0"})
			}
			for _, c := range checks {
				rows, err := s.query(c.q, nil, 0)
				if err != nil {
					readErr = err
					return
				}
				reads.Add(1)
				if got := rows[0]["count"].(json.Number).String(); got != c.want {
					wrong.Add(1)
					r.fail("expiry: %s answered %s during the sweep, not %s", c.q, got, c.want)
				}
			}
		}
	}()
	go func() { // the prober: claims and acks on another collection
		defer wg.Done()
		for !done.Load() {
			c, a, err := claimAck()
			if err != nil {
				probeErr = err
				return
			}
			sweepClaim, sweepAck = append(sweepClaim, c), append(sweepAck, a)
		}
	}()
	var swept, first time.Duration
	for deadline := lapse.Add(10 * time.Minute); ; time.Sleep(20 * time.Millisecond) {
		n, err := s.stored("sessions")
		if err != nil {
			done.Store(true)
			wg.Wait()
			return err
		}
		if n < int64(r.ttlRows) && first == 0 {
			first = time.Since(lapse)
		}
		if n == 0 {
			swept = time.Since(lapse)
			break
		}
		if time.Now().After(deadline) {
			r.fail("expiry: %d sessions still stored 10 minutes after they lapsed", n)
			break
		}
	}
	done.Store(true)
	wg.Wait()
	if err := errors.Join(readErr, probeErr); err != nil {
		return err
	}
	bc50, bc99 := percentiles(baseClaim)
	ba50, ba99 := percentiles(baseAck)
	sc50, sc99 := percentiles(sweepClaim)
	sa50, sa99 := percentiles(sweepAck)
	r.printf("## Expiry: %s documents lapse at once\n\n", count(r.ttlRows))
	r.printf("`sessions (key text @unique, user text, seen timestamp @ttl(1h))`, %s documents written with `seen: now()` (%s, in puts of %d), under `--clock manual`; then the clock is moved on 1 h, and every one lapses at that moment. The server sweeps them %d at a time, one commit each (engine.SweepBatch), every second, and again after a pause as long as the batch took while a batch comes back full (so other writers get their turns). Fenec --sync always.\n\n",
		count(r.ttlRows), load.Round(100*time.Millisecond), per, engine.SweepBatch)
	r.printf("- The sweep, from the clock's move until `fenec_documents` (`GET /_metrics`) counts no session stored: **%s** (%s documents/s).\n", swept.Round(10*time.Millisecond), count(int(float64(r.ttlRows)/swept.Seconds())))
	batches := (r.ttlRows + engine.SweepBatch - 1) / engine.SweepBatch
	r.printf("- The first batch was seen %s after the move (the sweeper wakes each second); from then on, %s batches of %d, one every %s on average.\n",
		first.Round(10*time.Millisecond), count(batches), engine.SweepBatch, ((swept - first) / time.Duration(batches)).Round(10*time.Microsecond))
	r.printf("- Reads during the sweep, by one client: %s, each right (%d wrong) — a lapsed session by its key, 0; another collection's count, whole; and twice a second `get sessions count` and a lapsed user's count (scans of every stored session), 0.\n", count(int(reads.Load())), wrong.Load())
	r.printf("- One client claiming (`set jobs … order run_at limit 1 returning id`) and acking (`del jobs where id = $1 require 1`) a job of another collection, one after the other, before the lapse and while the sweep runs:\n\n")
	r.printf("| | claims | claim p50 | claim p99 | ack p50 | ack p99 |\n| --- | --- | --- | --- | --- | --- |\n")
	r.printf("| before the lapse (3 s) | %s | %s | %s | %s | %s |\n", count(len(baseClaim)), ms(bc50), ms(bc99), ms(ba50), ms(ba99))
	r.printf("| during the sweep | %s | %s | %s | %s | %s |\n\n", count(len(sweepClaim)), ms(sc50), ms(sc99), ms(sa50), ms(sa99))
	r.printf("The ack is a one-row write: its p99 during the sweep, beside its p99 before, is the sweep's p99 hold on the writer.\n\n")
	return nil
}

// ms writes a duration in milliseconds, as percentiles returns them.
func ms(v float64) string { return strconv.FormatFloat(v, 'f', 2, 64) + " ms" }

// durations writes sorted durations: the least, the median and the most.
func durations(d []time.Duration) string {
	if len(d) == 0 {
		return "none"
	}
	f := func(x time.Duration) string { return x.Round(time.Millisecond).String() }
	return fmt.Sprintf("%s at least, %s median, %s at most", f(d[0]), f(d[len(d)/2]), f(d[len(d)-1]))
}
