package engine

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/fenecdb/fenec/server/clock"
	"github.com/fenecdb/fenec/server/internal/testwait"
	"github.com/fenecdb/fenec/server/store"
)

// smallEviction makes the sweep's slice and a queue's resident head small,
// so that a few hundred rows see every path: slices, wraps, heads read
// back.
func smallEviction(t *testing.T) {
	slice, head, sweep := evictSlice, hotHead, evictSweep
	evictSlice, hotHead, evictSweep = 7, 3, 1000
	t.Cleanup(func() { evictSlice, hotHead, evictSweep = slice, head, sweep })
}

// openEvicting opens a database on a file of its own under limit (1: every
// row that may go does, at each sweep), with smallEviction's sizes, closed
// when the test ends.
func openEvicting(t *testing.T, limit int64, log *slog.Logger) (*DB, *clock.Manual) {
	t.Helper()
	smallEviction(t)
	clk := clock.NewManual()
	db, err := Open(Options{File: filepath.Join(t.TempDir(), "f.db"), Clock: clk, MemoryLimit: limit, Log: log})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db, clk
}

// evictPair is the same database twice: every row in memory (all), and
// under a memory limit of one byte (tiny), so that every row that may go
// to the file does, after every fold.
type evictPair struct {
	t          *testing.T
	clk        *clock.Manual
	allF, tiny string
	all, lim   *DB
}

func (p *evictPair) open() {
	p.t.Helper()
	var err error
	if p.all, err = Open(Options{File: p.allF, Clock: p.clk}); err != nil {
		p.t.Fatal(err)
	}
	if p.lim, err = Open(Options{File: p.tiny, Clock: p.clk, MemoryLimit: 1}); err != nil {
		p.t.Fatal(err)
	}
}

func (p *evictPair) close() {
	p.t.Helper()
	if err := p.all.Close(); err != nil {
		p.t.Fatal(err)
	}
	if err := p.lim.Close(); err != nil {
		p.t.Fatal(err)
	}
}

func outcome(rs []*Result, err error) string {
	if err != nil {
		return "error: " + err.Error()
	}
	var b strings.Builder
	for _, r := range rs {
		b.Write(r.AppendJSON(nil))
		b.WriteByte('\n')
	}
	return b.String()
}

// same runs stmts as one batch on both and fails unless they answer alike.
func (p *evictPair) same(step int, stmts ...string) {
	p.t.Helper()
	ss := make([]Statement, len(stmts))
	for i, q := range stmts {
		ss[i] = Statement{Query: q}
	}
	want := outcome(p.all.Batch(context.Background(), ss))
	got := outcome(p.lim.Batch(context.Background(), ss))
	if got != want {
		p.t.Fatalf("step %d: %q\n evicting %s\n all      %s", step, stmts, got, want)
	}
	checkCounts(p.t, p.lim)
}

// checkCounts fails unless every collection's rows resident and evicted
// are its rows.
func checkCounts(t *testing.T, db *DB) {
	t.Helper()
	db.mu.RLock()
	defer db.mu.RUnlock()
	for name, c := range db.colls {
		if c.ev == nil {
			continue
		}
		res, ev := 0, 0
		c.docs.Scan(func(_ int64, d *Doc) bool {
			if d == evictedDoc {
				ev++
			} else {
				res++
			}
			return true
		})
		if c.ev.resident != res || c.ev.evicted != ev || res+ev != c.Len() {
			t.Fatalf("%s: counted %d resident, %d evicted; holds %d and %d of %d", name, c.ev.resident, c.ev.evicted, res, ev, c.Len())
		}
	}
}

// evict folds the limited database's log and sweeps it.
func (p *evictPair) evict() {
	p.t.Helper()
	if err := p.lim.st.Fold(); err != nil {
		p.t.Fatal(err)
	}
	p.lim.Evict()
}

// TestEvictionAnswersAsMemory: the same random statements (puts, sets,
// deletes, claims, acks, reads by id, hash, range, scans with sorts,
// filters and counts, batches refused midway and so undone, the clock
// moving, restarts) against a database holding every row and one whose
// limit of one byte evicts every row it may after every fold, the
// answers compared after every step. Rows are read back from the file.
func TestEvictionAnswersAsMemory(t *testing.T) {
	smallEviction(t)
	dir := t.TempDir()
	p := &evictPair{t: t, clk: clock.NewManual(), allF: filepath.Join(dir, "all.db"), tiny: filepath.Join(dir, "tiny.db")}
	p.open()
	defer func() { p.close() }()
	p.same(0, `create collection jobs (payload json, run_at timestamp @sorted, owner text, attempts int, error text, key text @unique, tag text @hash)`,
		`create collection plain (a int @sorted, b text, c json)`,
		`create collection bare (run_at timestamp, owner text, n int)`)
	rng := rand.New(rand.NewPCG(7, 11))
	tags := []string{"a", "b", "c", "d"}
	job := func() string {
		at := "null"
		if rng.IntN(6) > 0 {
			at = fmt.Sprintf("now() + %d", rng.IntN(90000)-30000)
		}
		return fmt.Sprintf(`{payload: {"n": %d, "s": "%s"}, run_at: %s, attempts: %d, key: "k%d", tag: "%s"}`,
			rng.IntN(1000), strings.Repeat("x", rng.IntN(40)), at, rng.IntN(3), rng.IntN(400), tags[rng.IntN(4)])
	}
	reads := []string{
		`get jobs`, `get jobs count`, `get jobs where tag = "b"`, `get jobs select id, owner where tag in ["a", "c"] order id desc limit 4`,
		`get jobs where run_at <= now() order run_at limit 5`, `get jobs select id where run_at > now() order run_at desc limit 3 offset 1`,
		`get jobs where key = "k17"`, `get jobs where payload.n > 500 order payload.n, id`, `get jobs where attempts >= 2 count`,
		`get jobs where run_at is null`, `get plain`, `get plain where a >= 10 and a < 40 order a desc`, `get plain where b = "y3" order id`,
		`get plain select id, c where c.k > 3 limit 5`, `get bare`, `get bare where run_at <= now() order run_at limit 2`,
	}
	const steps = 500
	for step := 1; step <= steps; step++ {
		id := rng.IntN(120) + 1
		switch r := rng.IntN(100); {
		case r < 18:
			n := rng.IntN(4) + 1
			docs := make([]string, n)
			for i := range docs {
				docs[i] = job()
			}
			p.same(step, `put jobs [`+strings.Join(docs, ", ")+`]`)
		case r < 26:
			p.same(step, fmt.Sprintf(`put plain {a: %d, b: "y%d", c: {"k": %d}}`, rng.IntN(50), rng.IntN(5), rng.IntN(8)),
				fmt.Sprintf(`put bare {run_at: now() + %d, n: %d}`, rng.IntN(20000)-10000, rng.IntN(9)))
		case r < 36:
			p.same(step, `set jobs {owner: "w", run_at: now() + 30000, attempts: attempts + 1} where run_at <= now() order run_at limit 3 returning *`)
		case r < 40:
			p.same(step, `set bare {owner: "w", run_at: now() + 30000} where run_at <= now() order run_at limit 2 returning *`)
		case r < 46:
			p.same(step, fmt.Sprintf(`del jobs where id = %d returning id, key`, id))
		case r < 50:
			p.same(step, fmt.Sprintf(`set jobs {error: "e", run_at: null} where id = %d returning *`, id))
		case r < 54:
			p.same(step, fmt.Sprintf(`set plain {a: a + 1, c: {"k": %d}} where b = "y%d" returning id, a`, rng.IntN(8), rng.IntN(5)))
		case r < 57:
			p.same(step, fmt.Sprintf(`del plain where a < %d returning id`, rng.IntN(8)))
		case r < 62:
			// Refused at its last statement: every write before it is
			// undone, rows read back from the file among them.
			p.same(step, fmt.Sprintf(`set jobs {attempts: attempts + 10} where tag = "%s"`, tags[rng.IntN(4)]),
				fmt.Sprintf(`del jobs where id < %d`, id),
				`put plain {a: 1}`,
				`get nowhere`)
		case r < 65:
			p.same(step, fmt.Sprintf(`insert jobs {key: "k%d"}`, rng.IntN(400)))
		case r < 72:
			p.clk.Advance(int64(rng.IntN(20000)))
		case r < 74:
			p.close()
			p.open()
		case r < 90:
			p.same(step, reads[rng.IntN(len(reads))])
		default:
			p.same(step, fmt.Sprintf(`get jobs where id in [%d, %d, %d, %d]`, id, id+1, id+7, rng.IntN(120)+1),
				fmt.Sprintf(`get plain where id in [%d, %d]`, id/2, id/3+1))
		}
		if rng.IntN(3) == 0 {
			p.evict()
		}
		if step%25 == 0 {
			for _, q := range reads {
				p.same(step, q)
			}
		}
	}
	p.evict()
	for _, q := range reads {
		p.same(steps, q)
	}
	st := p.lim.EvictStats()
	if st.Reads == 0 || st.Evicted == 0 || st.ReadErrors != 0 {
		t.Fatalf("eviction's counters %+v: want rows evicted and read back, no read failing", st)
	}
	if all := p.all.EvictStats(); all != (EvictStats{}) {
		t.Errorf("the unlimited database counts %+v", all)
	}
	var evicted int
	for _, f := range p.lim.Footprints() {
		evicted += f.Evicted
	}
	if evicted == 0 {
		t.Errorf("no row evicted at the end: %+v", p.lim.Footprints())
	}
	t.Logf("%+v", st)
}

// TestEvictionKeepsDirtyRows: a row written since the last fold stays in
// memory whatever the limit, and goes once a fold covers it; no limit, or
// a ":memory:" file, evicts nothing.
func TestEvictionKeepsDirtyRows(t *testing.T) {
	db, clk := openEvicting(t, 1, nil)
	mustExec(t, db, `create collection c (a int, b text)`)
	for i := 0; i < 50; i++ {
		mustExec(t, db, `put c {a: $1, b: "x"}`, i)
	}
	db.Evict()
	if f := db.Footprints()[0]; f.Evicted != 0 || f.Rows != 50 {
		t.Fatalf("before a fold: %+v, want every row resident", f)
	}
	if err := db.st.Fold(); err != nil {
		t.Fatal(err)
	}
	db.Evict()
	if f := db.Footprints()[0]; f.Evicted != 50 || f.Rows != 0 {
		t.Fatalf("after a fold: %+v, want every row evicted", f)
	}
	mustExec(t, db, `set c {b: "y"} where a < 10`)
	db.Evict()
	if f := db.Footprints()[0]; f.Evicted != 40 || f.Rows != 10 {
		t.Fatalf("after a write: %+v, want its 10 rows resident", f)
	}
	if got := answer(mustExec(t, db, `get c where a = 3 or a = 30 select a, b`)); got != `[{"a":3,"b":"y"},{"a":30,"b":"x"}]` {
		t.Fatalf("read back: %s", got)
	}
	mem, err := Open(Options{File: ":memory:", Clock: clk, MemoryLimit: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer mem.Close()
	if mem.ev != nil {
		t.Fatal("a :memory: database evicts")
	}
}

// TestEvictionRestart: a restart under a limit loads only what fits of the
// rows in the tables (every index entry, and rows up to the limit's
// share); the answers are the unlimited restart's.
func TestEvictionRestart(t *testing.T) {
	smallEviction(t)
	file := filepath.Join(t.TempDir(), "f.db")
	clk := clock.NewManual()
	db, err := Open(Options{File: file, Clock: clk, Sync: store.SyncMode{Kind: store.SyncAlways}})
	if err != nil {
		t.Fatal(err)
	}
	mustExec(t, db, `create collection jobs (payload json, run_at timestamp @sorted, owner text, n int @hash)`)
	for i := 0; i < 40; i++ {
		var docs []string
		for k := 0; k < 50; k++ {
			docs = append(docs, fmt.Sprintf(`{payload: {"i": %d}, run_at: now() + %d, n: %d}`, i*50+k, (i*50+k)*37%5000, k%7))
		}
		mustExec(t, db, `put jobs [`+strings.Join(docs, ",")+`]`)
	}
	want := []string{answer(mustExec(t, db, `get jobs where n = 3 order run_at desc limit 20`)), answer(mustExec(t, db, `get jobs count`)),
		answer(mustExec(t, db, `get jobs where run_at <= now() + 100 order run_at`))}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	// The limit: the indexes of 2000 jobs (about 43 bytes each, evicted)
	// and a few hundred rows.
	db, err = Open(Options{File: file, Clock: clk, MemoryLimit: 2000 * 90})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	checkCounts(t, db)
	f := db.Footprints()[0]
	if f.Evicted == 0 || f.Rows == 0 || f.Rows+f.Evicted != 2000 {
		t.Fatalf("after a restart: %+v, want some rows resident and the rest evicted", f)
	}
	// The rows kept early are given back as the later rows' index
	// entries come (giveBack): the load ends under evictTarget.
	if f.Bytes > int64(evictTarget*2000*90)+200 {
		t.Errorf("after a restart: %d bytes estimated, past the limit's share (%d)", f.Bytes, int64(evictTarget*2000*90))
	}
	got := []string{answer(mustExec(t, db, `get jobs where n = 3 order run_at desc limit 20`)), answer(mustExec(t, db, `get jobs count`)),
		answer(mustExec(t, db, `get jobs where run_at <= now() + 100 order run_at`))}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("answer %d after a restart:\n got %s\nwant %s", i, got[i], want[i])
		}
	}
}

// TestEvictionFailureUndo: a write to evicted rows that the store fails to
// write is undone from the rows read back, and the rows answer as before,
// while the store is failed and once it works again.
func TestEvictionFailureUndo(t *testing.T) {
	smallEviction(t)
	f := &faults{}
	mode, _ := store.ParseSync("always")
	db, err := Open(Options{File: filepath.Join(t.TempDir(), "f.db"), Sync: mode, Clock: clock.NewManual(), StoreFault: f.hook, MemoryLimit: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	mustExec(t, db, `create collection c (n int @unique, s text @hash)`)
	for i := 0; i < 30; i++ {
		mustExec(t, db, `put c {n: $1, s: "old"}`, i)
	}
	if err := db.st.Fold(); err != nil {
		t.Fatal(err)
	}
	db.Evict()
	if fp := db.Footprints()[0]; fp.Evicted != 30 {
		t.Fatalf("%+v: want every row evicted", fp)
	}
	want := answer(mustExec(t, db, `get c order n`))
	f.commit.Store(true)
	if _, err := db.Exec(context.Background(), `set c {s: "new", n: n + 100} where n < 10`, nil); err == nil {
		t.Fatal("a write the store failed was answered")
	}
	for _, q := range []string{`get c order n`, `get c where s = "old" order n`} {
		if got := answer(mustExec(t, db, q)); got != want {
			t.Fatalf("%s after the undo:\n got %s\nwant %s", q, got, want)
		}
	}
	if got := answer(mustExec(t, db, `get c where s = "new" count`)); got != `[{"count":0}]` {
		t.Fatalf("the undone write left index entries: %s", got)
	}
	f.commit.Store(false)
	testwait.Until(t, "the store to work again", func() bool { return db.StoreErr() == nil })
	if err := db.st.Fold(); err != nil {
		t.Fatal(err)
	}
	db.Evict()
	if got := answer(mustExec(t, db, `get c order n`)); got != want {
		t.Fatalf("after the store came back:\n got %s\nwant %s", got, want)
	}
	mustExec(t, db, `set c {s: "new"} where n = 3`)
	if got := answer(mustExec(t, db, `get c where s = "new" select n`)); got != `[{"n":3}]` {
		t.Fatalf("a write after: %s", got)
	}
}

// TestEvictionClaimsFromMemory: a queue's head (the next jobs a claim
// takes) stays in memory, and is read back by the sweep once claims
// reach evicted jobs; a claim finding no job ready reads nothing from the
// file, whatever its index holds.
func TestEvictionClaimsFromMemory(t *testing.T) {
	db, clk := openEvicting(t, 1, nil)
	mustExec(t, db, `create collection jobs (payload json, run_at timestamp @sorted, owner text)`)
	for i := 0; i < 50; i++ {
		mustExec(t, db, `put jobs {payload: {"i": $1}, run_at: now() + $2}`, i, int64(i)*1000)
	}
	if err := db.st.Fold(); err != nil {
		t.Fatal(err)
	}
	db.Evict()
	if f := db.Footprints()[0]; f.Rows != hotHead || f.Evicted != 50-hotHead {
		t.Fatalf("%+v: want the head of %d jobs resident, the rest evicted", f, hotHead)
	}
	claim := `set jobs {owner: "w", run_at: now() + 900000} where run_at <= now() order run_at limit 1 returning id`
	reads := db.EvictStats().Reads
	if got := answer(mustExec(t, db, claim)); got != `[{"id":1}]` {
		t.Fatalf("claim: %s", got)
	}
	clk.Advance(2500)
	if got := answer(mustExec(t, db, claim)); got != `[{"id":2}]` {
		t.Fatalf("claim: %s", got)
	}
	if got := answer(mustExec(t, db, claim)); got != `[{"id":3}]` {
		t.Fatalf("claim: %s", got)
	}
	if got := answer(mustExec(t, db, claim)); got != `[]` {
		t.Fatalf("claim with nothing ready: %s", got)
	}
	if got := db.EvictStats().Reads; got != reads {
		t.Fatalf("claims of the head read %d rows from the file", got-reads)
	}
	// The sweep reads the new head back: the next claims read nothing.
	db.Evict()
	reads = db.EvictStats().Reads
	if reads == 0 {
		t.Fatal("the sweep read no head back")
	}
	clk.Advance(2000)
	for _, want := range []string{`[{"id":4}]`, `[{"id":5}]`} {
		if got := answer(mustExec(t, db, claim)); got != want {
			t.Fatalf("claim: %s, want %s", got, want)
		}
	}
	if got := db.EvictStats().Reads; got != reads {
		t.Fatalf("claims of the head read back by the sweep read %d rows from the file", got-reads)
	}
	checkCounts(t, db)
}

// TestEvictionConcurrent: workers claim and ack every job while readers
// scan and a sweeper folds and evicts as fast as it can, under a limit of
// one byte: every job is acked exactly once, no read back fails, and rows
// were evicted and read back meanwhile (run with -race too).
func TestEvictionConcurrent(t *testing.T) {
	db, _ := openEvicting(t, 1, nil)
	mustExec(t, db, `create collection jobs (payload json, run_at timestamp @sorted, owner text, tag text @hash)`)
	const jobs = 1200
	for i := 0; i < jobs; i += 100 {
		var docs []string
		for k := i; k < i+100; k++ {
			docs = append(docs, fmt.Sprintf(`{payload: {"n": %d}, run_at: now() - %d, tag: "t%d"}`, k, jobs-k, k%5))
		}
		mustExec(t, db, `put jobs [`+strings.Join(docs, ",")+`]`)
	}
	// A first sweep before the workers start: rows are evicted whatever
	// the scheduling (under -race the workers could otherwise take every
	// job before the sweeper's first turn), and claims read them back.
	if err := db.st.Fold(); err != nil {
		t.Fatal(err)
	}
	if db.Evict() == 0 {
		t.Fatal("the first sweep evicted nothing")
	}
	ctx := context.Background()
	stop := make(chan struct{})
	var wg, workers sync.WaitGroup
	errs := make(chan error, 16)
	acked := make([]int, 4)
	for w := range acked {
		workers.Add(1)
		go func() {
			defer workers.Done()
			me := fmt.Sprintf("w%d", w)
			for {
				r, err := db.Exec(ctx, `set jobs {owner: $1, run_at: now() + 30000} where run_at <= now() order run_at limit 5 returning id`, vals(me))
				if err != nil {
					errs <- err
					return
				}
				if len(r.Rows) == 0 {
					return
				}
				ids := make([]any, len(r.Rows))
				for i, row := range r.Rows {
					ids[i] = row[0].Int()
				}
				d, err := db.Exec(ctx, `del jobs where id in $1 and owner = $2`, vals(ids, me))
				if err != nil || d.Affected != int64(len(ids)) {
					errs <- fmt.Errorf("ack of %v: %v, %v", ids, d, err)
					return
				}
				acked[w] += len(ids)
			}
		}()
	}
	// untilStop runs step again and again until stop, or until it fails.
	untilStop := func(step func() error) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				if err := step(); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	for _, q := range []string{`get jobs where payload.n >= 0 count`, `get jobs where tag = "t2" order id limit 20`, `get jobs where owner is null order run_at desc limit 7`} {
		untilStop(func() error { _, err := db.Exec(ctx, q, nil); return err })
	}
	untilStop(func() error {
		err := db.st.Fold()
		db.Evict()
		return err
	})
	workers.Wait()
	close(stop)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	total := 0
	for _, n := range acked {
		total += n
	}
	if total != jobs {
		t.Errorf("%d jobs acked, want %d", total, jobs)
	}
	checkCounts(t, db)
	if got := answer(mustExec(t, db, `get jobs count`)); got != `[{"count":0}]` {
		t.Errorf("left: %s", got)
	}
	if st := db.EvictStats(); st.Evicted == 0 || st.Reads == 0 || st.ReadErrors != 0 {
		t.Errorf("eviction's counters %+v", st)
	}
}

// TestEvictionForgetsFoldedWrites: a server under its limit (no sweep
// evicts) keeps no note of rows written before the last fold — the notes
// of rows written since, and only those.
func TestEvictionForgetsFoldedWrites(t *testing.T) {
	db, _ := openEvicting(t, 1<<40, nil)
	mustExec(t, db, `create collection c (a int)`)
	for i := 0; i < 3*forgetSlice/1000+1; i++ {
		mustExec(t, db, `put c [`+strings.Repeat(`{a: 1},`, 999)+`{a: 1}]`)
	}
	mustExec(t, db, `set c {a: 2} where id <= 10`)
	c := db.colls["c"]
	wrote := len(c.ev.dirty)
	if wrote < 3*forgetSlice {
		t.Fatalf("%d rows noted as written, want every row put", wrote)
	}
	db.Evict()
	if len(c.ev.dirty) != wrote {
		t.Fatalf("before a fold: %d rows noted, want %d", len(c.ev.dirty), wrote)
	}
	if err := db.st.Fold(); err != nil {
		t.Fatal(err)
	}
	mustExec(t, db, `set c {a: 3} where id <= 5`) // after the fold: noted
	db.Evict()
	if f := db.Footprints()[0]; f.Evicted != 0 {
		t.Fatalf("%+v: a limit of a TiB evicted rows", f)
	}
	if left := len(c.ev.written) - c.ev.writtenAt; len(c.ev.dirty) != 5 || left != 5 {
		t.Fatalf("after a fold: %d rows noted (%d in order), want the 5 written since", len(c.ev.dirty), left)
	}
	for id := int64(1); id <= 5; id++ {
		if _, ok := c.ev.dirty[id]; !ok {
			t.Errorf("row %d, written after the fold, is not noted", id)
		}
	}
}

// failingSource is a store that cannot give rows back.
type failingSource struct{ rowSource }

func (failingSource) ReadDocs(string, []int64, func(int64, []byte)) error {
	return errors.New("disk read error")
}

// TestEvictionReadBackFailure: a statement that needs a row the file does
// not give back is answered unavailable, naming it — not an answer a row
// short — and a write that needed one is undone: once the file reads
// again, every row is as it was.
func TestEvictionReadBackFailure(t *testing.T) {
	db, _ := openEvicting(t, 1, slog.New(slog.DiscardHandler))
	mustExec(t, db, `create collection c (a int @hash, b text)`)
	for i := 0; i < 20; i++ {
		mustExec(t, db, `put c {a: $1, b: "x"}`, i)
	}
	if err := db.st.Fold(); err != nil {
		t.Fatal(err)
	}
	if db.Evict() != 20 {
		t.Fatalf("%+v: want every row evicted", db.Footprints()[0])
	}
	src := db.ev.src
	db.lock()
	db.ev.src = failingSource{src}
	db.mu.Unlock()
	for _, q := range []string{`get c where a = 3`, `get c order b`, `set c {b: "y"} where a < 10`, `del c where a = 4`} {
		_, err := db.Exec(context.Background(), q, nil)
		if !errors.Is(err, ErrUnavailable) || !strings.Contains(fmt.Sprint(err), "could not be read back") {
			t.Errorf("%s with the file failing: %v; want unavailable", q, err)
		}
	}
	db.lock()
	db.ev.src = src
	db.mu.Unlock()
	if got := answer(mustExec(t, db, `get c where b = "x" count`)); got != `[{"count":20}]` {
		t.Errorf("after the failed writes: %s; want every row as it was", got)
	}
	if got := answer(mustExec(t, db, `get c where a = 4 select a`)); got != `[{"a":4}]` {
		t.Errorf("the row a failed delete needed: %s", got)
	}
	checkCounts(t, db)
}

// TestEvictionDropsSlots: a swept collection's pages whose rows are all
// evicted keep no slots; reads, writes, deletes and claims into them
// answer as before, and the rows written are resident in pages given
// their slots back.
func TestEvictionDropsSlots(t *testing.T) {
	db, clk := openEvicting(t, 1, nil)
	mustExec(t, db, `create collection jobs (payload json, run_at timestamp @sorted, owner text)`)
	const n = 5 * pageMax
	fill(t, db, "jobs", n, func(i int) string {
		return fmt.Sprintf(`{payload: {"i": %d}, run_at: %d}`, i, 1000+int64(i))
	})
	if err := db.st.Fold(); err != nil {
		t.Fatal(err)
	}
	for range 10 { // the sweep's slices are small (smallEviction)
		db.Evict()
	}
	slotless := func() (n int) {
		db.mu.RLock()
		defer db.mu.RUnlock()
		for _, p := range db.colls["jobs"].docs.pages {
			if p.docs == nil {
				n++
			}
		}
		return n
	}
	// The head (hotHead jobs, in the first page) stays resident.
	if got := slotless(); got != 4 {
		t.Fatalf("%d of 5 pages without slots, want 4", got)
	}
	checkCounts(t, db)
	if got := answer(mustExec(t, db, `get jobs where id = 700 or id = 1000 select id, payload`)); got != `[{"id":700,"payload":{"i":699}},{"id":1000,"payload":{"i":999}}]` {
		t.Fatalf("read: %s", got)
	}
	mustExec(t, db, `set jobs {owner: "x"} where id = 600`)
	mustExec(t, db, `del jobs where id = 900`)
	if got := slotless(); got != 2 {
		t.Fatalf("%d pages without slots after a write and a delete into two, want 2", got)
	}
	if got := answer(mustExec(t, db, `get jobs where id >= 599 and id <= 601 or id = 900 select id, owner`)); got != `[{"id":599,"owner":null},{"id":600,"owner":"x"},{"id":601,"owner":null}]` {
		t.Fatalf("after: %s", got)
	}
	if got := answer(mustExec(t, db, `get jobs count`)); got != `[{"count":1279}]` {
		t.Fatalf("count: %s", got)
	}
	// Claims past the head take jobs from pages without slots.
	clk.Set(1000 + n)
	claim := `set jobs {owner: "w", run_at: 9000000} where run_at <= now() and id > 1100 order run_at limit 3 returning id`
	if got := answer(mustExec(t, db, claim)); got != `[{"id":1101},{"id":1102},{"id":1103}]` {
		t.Fatalf("claim: %s", got)
	}
	checkCounts(t, db)
	if err := db.st.Fold(); err != nil {
		t.Fatal(err)
	}
	for range 10 {
		db.Evict()
	}
	if got := slotless(); got != 4 {
		db.mu.RLock()
		for k, p := range db.colls["jobs"].docs.pages {
			res := 0
			for i := range p.len() {
				if p.doc(i) != evictedDoc {
					res++
					t.Logf("page %d: %d resident", k, p.key(i))
				}
			}
		}
		db.mu.RUnlock()
		t.Fatalf("%d pages without slots after the next sweeps, want 4", got)
	}
	checkCounts(t, db)
}
