package engine

import (
	"errors"
	"log/slog"
	"math"
	"slices"
	"sort"
	"sync/atomic"
	"time"

	"github.com/fenecdb/fenec/server/store"
)

// Eviction (docs/architecture.md, "Memory"; docs/operations.md, "Memory").
// Under a memory limit (Options.MemoryLimit) the engine keeps every index
// entry and the id map's slot of every document, but only some documents'
// rows: an evicted row is marked in the id map by evictedDoc and read back
// from the store's docs table when a statement reaches it. Only a row whose
// current version is in the table may be evicted: one written since the
// last fold that covers it stays resident (collEvict.dirty), so a read back
// gives exactly the version the engine would have held. A ":memory:" file
// (nothing to read back) and a cluster node (cmd/fenec gives it no limit)
// evict nothing.

// evictedDoc marks an evicted row in the id map: the row is in the docs
// table, as the engine last wrote it. Never handed out: Collection.get and
// scan read the row back instead.
var evictedDoc = &Doc{ID: math.MinInt64}

// The sweep's policy: when the estimated memory of the indexes and the
// resident rows is past evictStart of the limit, rows are evicted until it
// is under evictTarget. The rest of the limit is the collector's headroom
// and everything the estimate does not count (answers, connections,
// SQLite's cache).
const (
	evictStart  = 0.70
	evictTarget = 0.60
	// evictEvery is how often the background sweep looks at the estimate.
	evictEvery = time.Second
)

// Variables, not constants, so that tests can make them small.
var (
	// evictSlice is how many rows one hold of the write lock examines:
	// about a millisecond, so a waiting write waits little more than one
	// slice (docs/architecture.md, "Reads that yield to writers").
	evictSlice = 4096
	// hotHead is how many jobs at the head of a queue's run_at order (the
	// next a claim takes) stay resident: never evicted, and read back ten
	// times a second when they were (evictLoop), so a claim's jobs are in
	// memory.
	hotHead = 16384
	// evictSweep bounds the rows one sweep (a second's) examines.
	evictSweep = 64 * 4096
)

// rowSource is what eviction needs of the store (store.Store): its
// contracts are in store/read.go.
type rowSource interface {
	FoldedSeq() uint64
	ReadDocs(coll string, ids []int64, fn func(id int64, body []byte)) error
}

// evictor is a database's eviction state; nil without a limit.
type evictor struct {
	limit int64
	src   rowSource
	log   *slog.Logger
	// loading: rows set now come from Load; a row read from the log is
	// marked dirty at math.MaxUint64 until Load's last seq is known.
	loading bool
	// Counters for the metrics; atomics, since reads (under the read
	// lock) read rows back.
	reads, queries, evicted, readErrs atomic.Uint64
	// failedUnder counts the reads back made under a lock (a statement's)
	// that failed: a statement that saw it move is answered an error
	// (DB.readBackFailed), not a row fewer.
	failedUnder atomic.Uint64
}

// collEvict is a collection's eviction state. Its fields are written under
// the write lock only.
type collEvict struct {
	ev *evictor
	db *DB
	// dirty maps each resident row written since the fold that would
	// cover it to the seq its write takes (an upper bound): it may be
	// evicted once the store's FoldedSeq reaches that. A row not in it is
	// as the tables hold it.
	dirty map[int64]uint64
	// written holds dirty's rows with their writes' seqs, in the order
	// written (the seqs never decrease), from writtenAt on: forget drops,
	// from its front, the rows a fold has covered. Without it only a sweep
	// that reaches a row would drop it from dirty, and a server under its
	// limit (no sweep) would keep an entry for every row ever written.
	written   []dirtyRow
	writtenAt int
	resident  int
	evicted   int
	resBytes  int64 // the resident rows' bytes: header and block
	hand      int64 // the id the clock hand is at
	// keptTo is the highest id Load kept resident (evictLoaded), and
	// kept whether it kept any: where it gives rows back from.
	keptTo int64
	kept   bool
	// clean: the row being set is as the tables hold it (Load's, from
	// the docs table), so it is not dirty.
	clean bool
	// evictions counts the sweeps that evicted rows of c: a row evicted
	// when restoreHeads found it and still evicted when it sets the row
	// read back, with no eviction between, is the same eviction of the
	// same version.
	evictions uint64
}

// dirtyRow is a row written, and the seq its write takes at most.
type dirtyRow struct {
	id  int64
	seq uint64
}

// forgetSlice bounds the rows forget drops in one hold of the write lock.
const forgetSlice = 16384

// forget drops from dirty, up to forgetSlice of them, the rows whose last
// write folded covers: they are as the tables hold them. It reports
// whether any such row is left for another call. The write lock is held.
func (e *collEvict) forget(folded uint64) (more bool) {
	i, n := e.writtenAt, 0
	for ; i < len(e.written) && e.written[i].seq <= folded; i, n = i+1, n+1 {
		if n == forgetSlice {
			more = true
			break
		}
		w := e.written[i]
		if s, ok := e.dirty[w.id]; ok && s == w.seq {
			delete(e.dirty, w.id) // not written again since
		}
	}
	e.writtenAt = i
	switch {
	case i == len(e.written):
		e.written, e.writtenAt = e.written[:0], 0
	case i > 4096 && i > len(e.written)/2:
		k := copy(e.written, e.written[i:])
		e.written, e.writtenAt = e.written[:k], 0
	}
	return more
}

// forgetFolded drops, in every collection, the dirty rows the store's
// folds have covered, a slice at a time under the write lock.
func (db *DB) forgetFolded() {
	folded := db.ev.src.FoldedSeq()
	for more := true; more; {
		more = false
		db.lock()
		for _, c := range db.colls {
			more = c.ev.forget(folded) || more
		}
		db.mu.Unlock()
	}
}

func (db *DB) newCollEvict() *collEvict {
	if db.ev == nil {
		return nil
	}
	return &collEvict{ev: db.ev, db: db, dirty: map[int64]uint64{}}
}

// attach gives c the database's eviction state (nil without a limit).
func (db *DB) attach(c *Collection) {
	if c.ev == nil {
		c.ev = db.newCollEvict()
		c.docs.track = c.ev != nil
	}
}

func rowBytes(d *Doc) int64 { return int64(docHeader + len(d.row())) }

// writeSeq is the seq the running write (or the undo of one) takes at
// most: a row it sets stays resident until a fold covers it.
func (e *collEvict) writeSeq() uint64 {
	if e.ev.loading {
		return math.MaxUint64
	}
	return e.db.seq + 1
}

// wrote notes that d replaced old (nil: none) in memory, written.
func (e *collEvict) wrote(old, d *Doc, wasEvicted bool) {
	switch {
	case wasEvicted:
		e.evicted--
	case old != nil:
		e.resident--
		e.resBytes -= rowBytes(old)
	}
	e.resident++
	e.resBytes += rowBytes(d)
	if e.clean {
		delete(e.dirty, d.ID)
		return
	}
	s := e.writeSeq()
	e.dirty[d.ID] = s
	if s != math.MaxUint64 { // Load's: noted in written once its seq is known
		e.written = append(e.written, dirtyRow{d.ID, s})
	}
}

// removed notes that old left memory (a delete).
func (e *collEvict) removed(old *Doc, wasEvicted bool) {
	if wasEvicted {
		e.evicted--
	} else {
		e.resident--
		e.resBytes -= rowBytes(old)
	}
	delete(e.dirty, old.ID)
}

// readBack reads the evicted rows of ids from the store, decoded, in the
// order of ids (nil where the table has none, or the read failed: logged
// and counted, and the statement reading is then answered an error by
// readBackFailed — a read back that failed must not pass for a row that
// is not there, nor a write go on without the row it replaces).
// A lock is held, which keeps the evictor's source (the store) from
// changing (reopenLocked); readBackFrom is for a caller that holds none.
func (c *Collection) readBack(ids []int64) []*Doc {
	out, ok := c.readBackFrom(c.ev.ev.src, ids)
	if !ok {
		c.ev.ev.failedUnder.Add(1)
	}
	return out
}

// readBackFailures is the count readBackFailed compares: take it before a
// statement runs.
func (db *DB) readBackFailures() uint64 {
	if db.ev == nil {
		return 0
	}
	return db.ev.failedUnder.Load()
}

// readBackFailed returns the error of a statement during which a read back
// failed (since readBackFailures gave before), else nil. Reads that run
// side by side share the count, so a read beside the failed one is
// answered the error too: the file could not give back a row, and an
// answer that may miss rows is no answer.
func (db *DB) readBackFailed(before uint64) error {
	if db.ev == nil || db.ev.failedUnder.Load() == before {
		return nil
	}
	return unavailableError(errReadBack, "a row evicted to the file could not be read back")
}

// errReadBack is the cause of readBackFailed's error (the log has the
// store's own).
var errReadBack = errors.New("the file did not give the row back (see the server's log)")

func (c *Collection) readBackFrom(src rowSource, ids []int64) (docs []*Doc, ok bool) {
	e := c.ev.ev
	out := make([]*Doc, len(ids))
	sorted := append([]int64(nil), ids...)
	sortIDs(sorted)
	sorted = slices.Compact(sorted)
	got := make(map[int64]*Doc, len(sorted))
	e.queries.Add(1)
	err := src.ReadDocs(c.Name, sorted, func(id int64, body []byte) {
		d, err := c.decodeDoc(body)
		if err != nil {
			e.log.Error("an evicted row read back does not decode", "collection", c.Name, "id", id, "err", err)
			return
		}
		got[id] = d
	})
	for i, id := range ids {
		out[i] = got[id]
	}
	e.reads.Add(uint64(len(ids)))
	if errors.Is(err, store.ErrClosed) {
		return out, false // a sweep or a read that outlived Close
	}
	if err != nil {
		e.readErrs.Add(1)
		e.log.Error("evicted rows could not be read back", "collection", c.Name, "rows", len(ids), "err", err)
		return out, false
	}
	ok = true
	for i, d := range out {
		if d == nil {
			ok = false
			e.readErrs.Add(1)
			e.log.Error("an evicted row is not in the file", "collection", c.Name, "id", ids[i])
		}
	}
	return out, ok
}

// readOne reads back the evicted row of id.
func (c *Collection) readOne(id int64) *Doc { return c.readBack([]int64{id})[0] }

// scan calls fn with each document in id order until it returns false,
// reading back a page's evicted rows with one query.
func (c *Collection) scan(fn func(d *Doc) bool) {
	if c.ev == nil {
		c.docs.Scan(func(_ int64, d *Doc) bool { return fn(d) })
		return
	}
	var ids []int64
	for _, p := range c.docs.pages {
		ids = ids[:0]
		for i := range p.len() {
			if p.doc(i) == evictedDoc {
				ids = append(ids, p.key(i))
			}
		}
		var back []*Doc
		if len(ids) > 0 {
			back = c.readBack(ids)
		}
		k := 0
		for i := 0; i < p.len(); i++ {
			d := p.doc(i)
			if d == evictedDoc {
				// A read that yielded to a writer (yield.go) may find a
				// row the sweep evicted meanwhile (a sweep does not
				// move c.gen: the row is the same): read alone.
				id := p.key(i)
				for k < len(ids) && ids[k] < id {
					k++
				}
				if k < len(ids) && ids[k] == id {
					d = back[k]
					k++
				} else {
					d = c.readOne(id)
				}
				if d == nil {
					continue
				}
			}
			if !fn(d) {
				return
			}
		}
	}
}

// getMany returns the documents of ids (nil for one not there), reading
// the evicted among them back with one query.
func (c *Collection) getMany(ids []int64) []*Doc {
	out := make([]*Doc, len(ids))
	var miss []int64
	var missAt []int
	for i, id := range ids {
		d, _ := c.docs.Get(id)
		if d == evictedDoc {
			miss = append(miss, id)
			missAt = append(missAt, i)
			continue
		}
		out[i] = d
	}
	if len(miss) > 0 {
		for k, d := range c.readBack(miss) {
			out[missAt[k]] = d
		}
	}
	return out
}

// EvictStats is eviction's state for the metrics.
type EvictStats struct {
	Limit int64 // 0: no limit, nothing is evicted
	// Reads is the rows read back from the file; Queries the queries that
	// read them; Evicted the rows evicted since Open; ReadErrors the reads
	// back that failed (logged).
	Reads, Queries, Evicted, ReadErrors uint64
}

// EvictStats returns eviction's counters (zero without a limit).
func (db *DB) EvictStats() EvictStats {
	e := db.ev
	if e == nil {
		return EvictStats{}
	}
	return EvictStats{Limit: e.limit, Reads: e.reads.Load(), Queries: e.queries.Load(), Evicted: e.evicted.Load(), ReadErrors: e.readErrs.Load()}
}

// estimateLocked returns the estimated bytes of every collection's indexes
// and resident rows; a lock is held.
func (db *DB) estimateLocked() int64 {
	var n int64
	for _, c := range db.colls {
		n += c.indexBytes() + c.ev.resBytes
	}
	return n
}

// Evict first reads back each queue's evicted head (restoreHeads), then,
// when the estimate is past evictStart of the limit, evicts rows until it
// is under evictTarget or no more can go, a slice at a time under the
// write lock. It returns the rows evicted. Without a limit it
// does nothing.
func (db *DB) Evict() int {
	if db.ev == nil {
		return 0
	}
	db.restoreHeads()
	db.forgetFolded()
	db.lock()
	est := db.estimateLocked()
	if float64(est) <= evictStart*float64(db.ev.limit) {
		db.mu.Unlock()
		return 0
	}
	db.mu.Unlock()
	total := 0
	// fruitless counts the rows examined in each collection since its
	// last eviction: past two turns of its clock it has nothing to give
	// (every row dirty, at a queue's head, or read lately) in this sweep.
	fruitless := map[*Collection]int{}
	// A sweep examines at most evictSweep rows: when the limit cannot be
	// kept (every row dirty, at a head, or the indexes alone past it) it
	// costs a bounded share of a core, not a walk of every row a second.
	for examinedAll := 0; examinedAll < evictSweep; {
		db.lock()
		target := int64(evictTarget * float64(db.ev.limit))
		est := db.estimateLocked()
		if est <= target {
			db.mu.Unlock()
			return total
		}
		// The collection holding the most resident bytes gives first.
		var c *Collection
		for _, x := range db.colls {
			if x.ev.resident == 0 || fruitless[x] > 2*x.Len()+2*evictSlice {
				continue
			}
			if c == nil || x.ev.resBytes > c.ev.resBytes || x.ev.resBytes == c.ev.resBytes && x.Name < c.Name {
				c = x
			}
		}
		if c == nil {
			db.mu.Unlock()
			return total
		}
		n, examined := c.sweepLocked(est - target)
		db.mu.Unlock()
		examinedAll += max(examined, 1)
		total += n
		db.ev.evicted.Add(uint64(n))
		if n > 0 {
			fruitless[c] = 0
		} else {
			fruitless[c] += examined
		}
	}
	return total
}

// sweepLocked moves c's clock hand over up to evictSlice rows, evicting
// those it may until need bytes are freed, and returns how many it
// evicted and examined. A page read since the hand last passed it (a
// point read marks it) gets a second chance: the hand clears its mark and
// goes on. A row stays when it is dirty (its version is not folded), or at
// the head of a queue.
func (c *Collection) sweepLocked(need int64) (evicted, examined int) {
	e := c.ev
	folded := e.ev.src.FoldedSeq()
	head, hasHead := c.queueHead()
	pages := c.docs.pages
	if len(pages) == 0 {
		return 0, 0
	}
	pi := c.docs.page(e.hand)
	var freed int64
	for examined < evictSlice && freed < need {
		if pi >= len(pages) {
			pi = 0
			e.hand = math.MinInt64
		}
		p := pages[pi]
		if p.ref.Load() || p.docs == nil {
			// Read lately: a second chance. Without slots: every row
			// evicted already, and passed over in one step, counted as
			// one row examined — under a limit most pages are so, and a
			// sweep that counted their rows would spend its slices
			// walking them rather than reaching the rows it may evict.
			if p.docs == nil {
				examined++
			} else {
				examined += p.len()
			}
			p.ref.Store(false)
			pi++
			if pi < len(pages) {
				e.hand = pages[pi].base
			} else {
				e.hand = math.MinInt64 // the next slice starts over
			}
			continue
		}
		for i, d := range p.docs {
			id := p.key(i)
			if id < e.hand {
				continue
			}
			if examined >= evictSlice || freed >= need {
				// The hand stops here, mid-page.
				e.hand = id
				return evicted, examined
			}
			examined++
			if d == evictedDoc {
				continue
			}
			if s, ok := e.dirty[id]; ok {
				if s > folded {
					continue
				}
				delete(e.dirty, id)
			}
			if hasHead && c.inHead(d, head) {
				continue
			}
			if evicted == 0 {
				e.evictions++
			}
			p.docs[i] = evictedDoc
			freed += e.countEvicted(d)
			evicted++
		}
		// The hand has passed every row of the page: if none is resident
		// now, the page drops its slots (docPage.dropSlots).
		p.dropSlots()
		pi++
		if pi < len(pages) {
			e.hand = pages[pi].base
		} else {
			e.hand = math.MinInt64
		}
	}
	return evicted, examined
}

// queueHead returns the (run_at, id) of the hotHead-th job of c's run_at
// order: the jobs up to it are the head, kept resident. ok is false for a
// collection that is no queue.
func (c *Collection) queueHead() (numItem, bool) {
	q := c.queue
	if q == nil {
		return numItem{}, false
	}
	if x := q.sorted; x != nil && x.nums != nil {
		n := x.nums.Len()
		if n == 0 {
			return numItem{}, false
		}
		it, _ := x.nums.GetAt(min(hotHead, n) - 1)
		return it, true
	}
	if q.sorted != nil {
		return numItem{}, false
	}
	n := q.timed.Len()
	if n == 0 {
		return numItem{}, false
	}
	it, _ := q.timed.GetAt(min(hotHead, n) - 1)
	return it, true
}

// inHead reports whether d is a job at or before head in run_at order.
func (c *Collection) inHead(d *Doc, head numItem) bool {
	at := d.val(c.queue.runAt)
	if at.IsNull() {
		return false
	}
	return !lessNum(head, numItem{at.Int(), d.ID})
}

// eachHead calls fn with the ids of the first n jobs of c's run_at order,
// until it returns false.
func (c *Collection) eachHead(n int, fn func(id int64) bool) {
	q := c.queue
	k := 0
	switch {
	case q == nil:
	case q.sorted != nil && q.sorted.nums != nil:
		q.sorted.nums.Scan(func(it numItem) bool {
			k++
			return fn(it.id) && k < n
		})
	case q.sorted == nil:
		q.timed.Scan(func(it numItem) bool {
			k++
			return fn(it.id) && k < n
		})
	}
}

// restoreHeads reads back the evicted rows among each queue's head
// (hotHead jobs), all of them, and makes them resident again
// as the tables hold them (not dirty): so a claim finds its jobs in
// memory. The ids are found under the read lock and read with no lock
// held; the rows are set under the write lock only if no sweep evicted
// rows of the collection meanwhile. A row evicted then and still evicted
// is the same eviction: a write since would have made it resident, and
// only an eviction makes it evicted again; so the table holds the version
// it was evicted with, the one read.
func (db *DB) restoreHeads() {
	type want struct {
		c         *Collection
		ids       []int64
		evictions uint64
	}
	var wants []want
	budget := hotHead
	db.mu.RLock()
	src := db.ev.src
	names := make([]string, 0, len(db.colls))
	for name := range db.colls {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		c := db.colls[name]
		if c.queue == nil || c.ev.evicted == 0 || budget <= 0 {
			continue
		}
		var miss []int64
		c.eachHead(hotHead, func(id int64) bool {
			if d, _ := c.docs.peek(id); d == evictedDoc {
				miss = append(miss, id)
			}
			return len(miss) < budget
		})
		if len(miss) > 0 {
			budget -= len(miss)
			wants = append(wants, want{c, miss, c.ev.evictions})
		}
	}
	db.mu.RUnlock()
	for _, w := range wants {
		back, _ := w.c.readBackFrom(src, w.ids) // a row not read stays evicted
		db.lock()
		if db.colls[w.c.Name] == w.c && db.ev.src == src && w.c.ev.evictions == w.evictions {
			e := w.c.ev
			for k, d := range back {
				if cur, _ := w.c.docs.peek(w.ids[k]); d == nil || cur != evictedDoc {
					continue
				}
				w.c.docs.Set(w.ids[k], d)
				e.evicted--
				e.resident++
				e.resBytes += rowBytes(d)
			}
		}
		db.mu.Unlock()
	}
}

// loadedForEviction ends Load for eviction: the rows the log set are dirty until a
// fold covers seq, Load's last.
func (db *DB) loadedForEviction(seq uint64) {
	if db.ev == nil {
		return
	}
	db.ev.loading = false
	for _, c := range db.colls {
		for _, p := range c.docs.pages {
			p.dropSlots() // those evictLoaded did not reach
		}
		for id, s := range c.ev.dirty {
			if s == math.MaxUint64 {
				c.ev.dirty[id] = seq
				c.ev.written = append(c.ev.written, dirtyRow{id, seq})
			}
		}
	}
}

// evictLoop sweeps every evictEvery until Close, and reads the queues'
// heads back ten times as often: claims that outrun a second's head would
// read their jobs from the file one at a time.
func (db *DB) evictLoop() {
	t := time.NewTicker(evictEvery / 10)
	defer t.Stop()
	for tick := 1; ; tick++ {
		select {
		case <-db.closed:
			return
		case <-t.C:
			if tick%10 == 0 {
				db.Evict()
			} else {
				db.restoreHeads()
			}
		}
	}
}

// evictLoaded evicts d, a row Load just set from the tables, unless the
// estimate est (of the rows loaded so far) is under evictTarget of the
// limit with it. Rows past it are evicted as they load, so a restart holds about what fits
// (the next sweep reads each queue's head back).
func (c *Collection) evictLoaded(d *Doc, est *int64) {
	e := c.ev
	*est += c.indexEntryBytes()
	target := int64(evictTarget * float64(e.ev.limit))
	if *est+rowBytes(d) <= target {
		*est += rowBytes(d)
		if !e.kept || d.ID > e.keptTo {
			e.keptTo, e.kept = d.ID, true
		}
		return
	}
	if cur, _ := c.docs.peek(d.ID); cur != d {
		return
	}
	defer c.giveBack(est, target)
	c.docs.Set(d.ID, evictedDoc)
	*est -= idMapEntry - idMapEvicted // its id map entry goes with its slot
	e.countEvicted(d)
	delete(e.dirty, d.ID)
	e.ev.evicted.Add(1)
	// Rows load in id order: a full page whose last row this is drops
	// its slots if every row of it is evicted, so the load's peak holds
	// no slot of the rows it evicted (the pages it did not fill drop
	// theirs in loadedForEviction).
	c.docs.dropSlotsAt(d.ID)
}

// countEvicted counts the resident row d evicted in e (its slot already
// evictedDoc: the sweep and the load each set it their way), and returns
// its bytes, which the resident rows no longer hold.
func (e *collEvict) countEvicted(d *Doc) int64 {
	b := rowBytes(d)
	e.resident--
	e.evicted++
	e.resBytes -= b
	return b
}

// giveBack evicts rows Load kept, the last kept first, until the estimate
// est is under target. The rows were kept while the estimate counted only
// what was loaded then; each row loaded since adds its index entries
// (evicted, ~11 bytes a job of the queue page), and at 50 million jobs
// those came to ~500 MB the kept rows had not left room for: the load's
// peak went past the limit (bench/results/memory-limit.md). The first
// rows, a queue's head in id order, are given back last. A dirty row
// (the log's, not the tables') would stay: none is there yet, since
// store.Load hands the log's changes after every table row, but a
// change of that order must not evict a row the tables do not hold.
func (c *Collection) giveBack(est *int64, target int64) {
	e := c.ev
	if !e.kept || *est <= target || len(c.docs.pages) == 0 {
		return
	}
	for pi := c.docs.page(e.keptTo); pi >= 0 && *est > target; pi-- {
		p := c.docs.pages[pi]
		if p.docs == nil {
			continue
		}
		for i := len(p.docs) - 1; i >= 0 && *est > target; i-- {
			id, d := p.key(i), p.docs[i]
			if id > e.keptTo || d == evictedDoc {
				continue
			}
			e.keptTo = id
			if _, dirty := e.dirty[id]; dirty {
				continue
			}
			p.docs[i] = evictedDoc
			*est -= e.countEvicted(d) + idMapEntry - idMapEvicted
			e.ev.evicted.Add(1)
		}
		p.dropSlots() // when passed whole
	}
	if *est > target {
		e.kept = false // nothing left to give back
	}
}
