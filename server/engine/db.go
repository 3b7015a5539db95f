// Package engine is Fenec's database: collections of documents held in
// memory with their indexes, one writer at a time under a write lock and
// readers side by side under a read lock, every committed write handed to
// the store before it is answered. It plans and runs parsed FenecQL.
package engine

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fenecdb/fenec/server/clock"
	"github.com/fenecdb/fenec/server/fenecql"
	"github.com/fenecdb/fenec/server/internal/fanout"
	"github.com/fenecdb/fenec/server/store"
)

// Options configure Open.
type Options struct {
	File  string // a SQLite file, or ":memory:" to keep nothing
	Sync  store.SyncMode
	Clock clock.Clock // default: the system clock
	// Log receives a line at each change of the store's state (failed,
	// working again). Default: discarded.
	Log *slog.Logger
	// StoreFault is the store's fault hook (store.Options.Fault): tests
	// make the store's writes fail with it.
	StoreFault func(at string) error
	// Inbound is handed to the store (store.Options.Inbound): the requests
	// on their way to a commit, counted by the server that reads them.
	Inbound *store.Inbound
	// MemoryLimit, when positive, is the bytes the indexes and the
	// resident rows may take before cold rows are evicted to the file
	// (evict.go; docs/architecture.md, "Memory"). 0: every row stays in
	// memory. Ignored for ":memory:" (nothing to read back); a cluster
	// node is given none (cmd/fenec).
	MemoryLimit int64
}

// A failed store is probed again after storeRetryMin, then at doubling
// intervals up to storeRetryMax, until a probe succeeds.
const (
	storeRetryMin = 50 * time.Millisecond
	storeRetryMax = 5 * time.Second
)

// DB is an open database.
type DB struct {
	mu      sync.RWMutex
	clock   clock.Clock
	st      *store.Store
	keep    bool // a file, not :memory:: documents are encoded for the store
	colls   map[string]*Collection
	created map[string]uint64 // creation order, for listings
	made    uint64
	seq     uint64
	meta    map[string]Meta
	metaB   int64 // bytes of meta keys and bodies held
	// metaKinds counts the side records held by kind (MetaUse).
	metaKinds map[string]metaUse
	broken    error // the store failed: writes are refused until it works again
	// brokenNow is broken, read without the lock (setBroken).
	brokenNow atomic.Pointer[error]
	journal   atomic.Pointer[Journal] // SetJournal
	// writers counts the writers waiting for the write lock (lock): a
	// long read lets them in (yield.go).
	writers atomic.Int32
	// pending is the undo of each unit committed to the store but not yet
	// written to the file, oldest first: when the store fails, the units
	// it lost are undone, so memory never holds a write the file does not.
	pending []pendingUnit
	// The subscribers (subscribe.go): to writes in memory, and to groups
	// the store made durable; and the engine's own subscription to st.
	onWritten, onStored fanout.List[Write]
	stUnsubscribe       func()
	opts                Options     // as opened: a cluster node reopens the file to discard (replica.go)
	repl                replication // a cluster node's state (replica.go); zero when alone
	log                 *slog.Logger
	closed              chan struct{}
	// The running write's transaction and the room its steps, changes
	// and bodies are cut from (commit): used only under the write lock.
	wtx  tx
	slab writeSlab
	// ev is eviction's state; nil without a memory limit (evict.go).
	ev *evictor
}

type pendingUnit struct {
	seq     uint64
	undo    []undoStep
	touched []string
}

// Open opens (or creates) the database file and rebuilds memory from it.
func Open(opts Options) (*DB, error) {
	if opts.File == "" {
		opts.File = ":memory:"
	}
	if opts.Clock == nil {
		opts.Clock = clock.System{}
	}
	if opts.Log == nil {
		opts.Log = slog.New(slog.DiscardHandler)
	}
	db := &DB{clock: opts.Clock, colls: map[string]*Collection{}, created: map[string]uint64{}, meta: map[string]Meta{}, metaKinds: map[string]metaUse{},
		keep: opts.File != ":memory:", log: opts.Log, closed: make(chan struct{}), opts: opts}
	st, err := store.Open(opts.File, db.storeOptions())
	if err != nil {
		return nil, err
	}
	db.useStore(st)
	if opts.MemoryLimit > 0 && db.keep {
		db.ev = &evictor{limit: opts.MemoryLimit, src: st, log: opts.Log, loading: true}
	}
	seq, err := db.load(st)
	if err != nil {
		st.Close()
		return nil, fmt.Errorf("open %s: %w", opts.File, err)
	}
	db.seq = seq
	if db.ev != nil {
		db.loadedForEviction(seq)
		go db.evictLoop()
	}
	return db, nil
}

// storeOptions are the store's options, at Open and when a cluster node
// reopens its file (replica.go).
func (db *DB) storeOptions() store.Options {
	o := db.opts
	return store.Options{Sync: o.Sync, Fault: o.StoreFault, Log: o.Log, Inbound: o.Inbound}
}

// replay applies one persisted change while the file is opened.
func (db *DB) replay(ch store.Change) error {
	switch ch.Op {
	case store.OpCreate:
		fields, err := decodeSchema(ch.Body)
		if err != nil {
			return err
		}
		c := newCollection(ch.Coll, fields)
		db.attach(c)
		if ch.ID > c.nextID {
			c.nextID = ch.ID
		}
		db.made++
		db.colls[ch.Coll], db.created[ch.Coll] = c, db.made
	case store.OpDrop:
		delete(db.colls, ch.Coll)
		delete(db.created, ch.Coll)
	case store.OpMetaPut:
		db.setMeta(ch.Key, Meta{Body: ch.Body, Expires: ch.Expires})
	case store.OpMetaDelete:
		db.deleteMeta(ch.Key)
	case store.OpPut, store.OpDelete:
		c := db.colls[ch.Coll]
		if c == nil {
			return fmt.Errorf("a document of %s, a collection that does not exist", ch.Coll)
		}
		if ch.Op == store.OpDelete {
			c.delete(ch.ID)
			return nil
		}
		d, err := c.decodeDoc(ch.Body)
		if err != nil {
			return err
		}
		c.set(d)
	}
	return nil
}

// Close flushes and closes the store.
func (db *DB) Close() error {
	db.lock()
	defer db.mu.Unlock()
	select {
	case <-db.closed:
	default:
		close(db.closed)
	}
	return db.st.Close()
}

// Clock returns the database's clock.
func (db *DB) Clock() clock.Clock { return db.clock }

// Seq returns the database's change number: the count of committed writes.
func (db *DB) Seq() uint64 {
	db.mu.RLock()
	defer db.mu.RUnlock()
	return db.seq
}

// Statement is one statement of a request: FenecQL text and its parameters.
type Statement struct {
	Query  string
	Params []fenecql.Value
}

// BatchError is a refused batch: the error, and the 0-based statement.
type BatchError struct {
	At  int
	Err error
}

func (e *BatchError) Error() string { return fmt.Sprintf("statement %d: %v", e.At, e.Err) }
func (e *BatchError) Unwrap() error { return e.Err }

// Exec runs one statement.
func (db *DB) Exec(ctx context.Context, query string, params []fenecql.Value) (*Result, error) {
	rs, err := db.Batch(ctx, []Statement{{Query: query, Params: params}})
	if err != nil {
		var be *BatchError
		if errors.As(err, &be) {
			return nil, be.Err
		}
		return nil, err
	}
	return rs[0], nil
}

// Parsed is a statement parsed ahead of running.
type Parsed struct {
	Stmt   fenecql.Stmt
	Params []fenecql.Value
	Scope  *Scope // the token's access; nil: full access
}

// Parse parses a request's statements; an error is a *BatchError.
func Parse(stmts []Statement) ([]Parsed, error) {
	out := make([]Parsed, len(stmts))
	for i, s := range stmts {
		st, err := shared.parse(s.Query)
		if err != nil {
			return nil, &BatchError{At: i, Err: err}
		}
		out[i] = Parsed{Stmt: st, Params: s.Params}
	}
	return out, nil
}

// Batch runs statements all or nothing: under one write lock if any
// writes, else under the read lock. A refused statement undoes the ones
// before it; the error is a *BatchError naming it.
func (db *DB) Batch(ctx context.Context, stmts []Statement) ([]*Result, error) {
	ps, err := Parse(stmts)
	if err != nil {
		return nil, err
	}
	return db.Run(ctx, ps, RunOptions{})
}

// Run runs parsed statements all or nothing, as Batch does: under one
// write lock if any writes (or opts.Meta is set), else under the read
// lock. It is the one way statements run; opts say how (RunOptions), and
// whether the caller waits for the store itself (RunOptions.Unwaited).
func (db *DB) Run(ctx context.Context, ps []Parsed, opts RunOptions) ([]*Result, error) {
	rs, wait, err := db.run(ctx, ps, opts)
	if err != nil {
		return nil, err
	}
	if opts.Unwaited != nil {
		*opts.Unwaited = Durable{db: db, wait: wait}
		return rs, nil
	}
	if err := db.stored(wait); err != nil {
		return nil, err
	}
	return rs, nil
}

// RunOptions say how Run runs a request's statements.
type RunOptions struct {
	// Meta is called under the write lock once every statement has
	// succeeded; the records it answers are committed in the same unit as
	// the write, so they exist exactly when the write does.
	Meta func(rs []*Result) map[string]Meta
	// OnlyIfTakes undoes a request whose set and del statements take no
	// row — even one refused only by its require — and answers
	// ErrNothingTaken: a held claim stays held.
	OnlyIfTakes bool
	// Timeout, when positive, bounds the run: past it the statements stop
	// and answer ErrStatementTimeout, writing nothing.
	Timeout time.Duration
	// Unwaited, when set, has Run return as soon as memory has the write,
	// before the store has it: *Unwaited is set to the write's wait, and
	// the answer must not be given before its Wait returns nil. The caller
	// does what it must in between (the HTTP server counts the request as
	// arrived, so a sync stops holding for it). A subscriber told of a
	// Write that Joins runs its own write in that gap, on the writer's
	// goroutine, and the two writes share one sync (Subscribe).
	Unwaited *Durable
}

// Durable is a write's wait for the store, handed out by a Run with
// RunOptions.Unwaited.
type Durable struct {
	db   *DB
	wait func() error // commitUnwaited's; nil: nothing went to the store
}

// Wait waits until the store has the write (per the sync mode) and returns
// nil, or the store's failure as a waited Run would have returned it (the
// write undone). The zero Durable, and a read's, return nil at once.
func (d Durable) Wait() error {
	if d.db == nil {
		return nil
	}
	return d.db.stored(d.wait)
}

// run runs parsed statements up to the store's wait (commitUnwaited); a
// read returns a nil wait.
func (db *DB) run(ctx context.Context, ps []Parsed, opts RunOptions) (rs []*Result, wait func() error, err error) {
	if opts.Timeout > 0 {
		ctx = &timeLimit{Context: ctx, at: time.Now().Add(opts.Timeout)}
	}
	if err := stopped(ctx); err != nil {
		return nil, nil, err
	}
	write := opts.Meta != nil
	now := db.clock.NowMS()
	for _, p := range ps {
		write = write || IsWrite(p.Stmt)
		if err := p.Scope.ended(now); err != nil {
			return nil, nil, err
		}
	}
	if !write {
		db.mu.RLock()
		defer db.mu.RUnlock()
		r := &reader{db: db, since: time.Now(), slice: firstSlice}
		for {
			t := &tx{db: db, ctx: ctx, rd: r}
			rs, err := t.runAll(ps)
			if !errors.Is(err, errMoved) {
				return rs, nil, err
			}
			// A writer changed what the read had read: again, from the top,
			// with a longer slice (yield.go).
			r.read, r.slice = r.read[:0], 2*r.slice
		}
	}
	return db.commitUnwaited(ctx, func(t *tx) ([]*Result, error) {
		rs, err := t.runAll(ps)
		if err == nil {
			// The last look before the commit: past it, the write is answered.
			err = stopped(ctx)
		}
		if opts.OnlyIfTakes && t.taken == 0 && (err == nil || fenecql.CodeOf(err) == fenecql.CodeUnmet) {
			err = ErrNothingTaken
		}
		if err != nil {
			return nil, err
		}
		if opts.Meta != nil {
			// The records commit with the write as change number seq+1;
			// Meta sees it on the results, since a record often keeps the
			// answer and its Fenec-Seq.
			for _, r := range rs {
				r.Seq = db.seq + 1
			}
			t.putMeta(opts.Meta(rs))
		}
		return rs, nil
	})
}

// commit is the one path every write takes: under the write lock, body
// changes memory through t (each change noted for undo and for the store);
// a refusal undoes it; otherwise its changes go to the store as one unit,
// and the answer waits until the store has them (per the sync mode). A
// unit the store fails to write is undone in memory (storeFailed) and
// answered unavailable, never as a success.
func (db *DB) commit(ctx context.Context, body func(t *tx) ([]*Result, error)) ([]*Result, error) {
	rs, wait, err := db.commitUnwaited(ctx, body)
	if err != nil {
		return nil, err
	}
	if err := db.stored(wait); err != nil {
		return nil, err
	}
	return rs, nil
}

// commitUnwaited is commit up to the store's wait, which it returns (nil
// when nothing went to the store) for stored. The subscribers are told
// before it returns, on this goroutine.
func (db *DB) commitUnwaited(ctx context.Context, body func(t *tx) ([]*Result, error)) (rs []*Result, wait func() error, err error) {
	db.lock()
	if broken := db.broken; broken != nil {
		// Read under the lock: the store's recovery clears it under the lock.
		db.mu.Unlock()
		return nil, nil, unavailableError(broken, "the store failed, writes are refused until it works again")
	}
	if err := db.writable(); err != nil {
		db.mu.Unlock()
		return nil, nil, err
	}
	// One write runs at a time, so the transaction is the database's own,
	// made anew for each write and emptied before the lock is let go:
	// nothing of it is used after (its steps, changes and answers are
	// slices of their own).
	t := &db.wtx
	*t = tx{db: db, write: true, ctx: ctx}
	failures := db.readBackFailures()
	rs, err = body(t)
	if err == nil {
		// A row of the file not read back (runAll says at which
		// statement; this catches the other bodies): the write saw a
		// collection without it, and is undone rather than committed so.
		err = db.readBackFailed(failures)
	}
	if err != nil {
		t.rollback()
		*t = tx{}
		db.mu.Unlock()
		return nil, nil, err
	}
	db.journalLocked(t)
	db.slab.used(t)
	// Capped, so that no one appends into the slab's room after them.
	undo, changes, touched := t.undo[:len(t.undo):len(t.undo)], t.changes[:len(t.changes):len(t.changes)], t.touched
	*t = tx{}
	local := db.repl.r == nil
	if len(changes) > 0 {
		if !local {
			wait = db.proposeLocked(changes)
		} else {
			db.seq++
			if db.keep {
				durable := db.st.Durable()
				i := 0
				for i < len(db.pending) && db.pending[i].seq <= durable {
					i++
				}
				db.pending = append(db.pending[:0], db.pending[i:]...)
				db.pending = append(db.pending, pendingUnit{seq: db.seq, undo: undo, touched: touched})
			}
			wait = db.st.Commit(db.seq, changes)
		}
	}
	seq := db.seq
	db.mu.Unlock()
	for _, r := range rs {
		r.Seq = seq
	}
	if len(touched) > 0 || len(changes) > 0 {
		// Every numbered write is told (a side record's alone too, with no
		// Colls), so that a subscriber sees every Seq once.
		// Before the wait: a write the subscribers make now, such as a
		// held claim the write wakes, joins this one's group under
		// --sync always and is made durable by the same sync.
		joins := local && wait != nil && db.keep && db.opts.Sync.Kind == store.SyncAlways
		db.onWritten.Tell(Write{Topic: Written, Seq: seq, Colls: touched, Local: local, Joins: joins, Changes: changes})
	}
	return rs, wait, nil
}

// stored waits on a write's store wait (commitUnwaited's; nil: none) and
// returns the write's error: a unit the store failed to write is undone
// (storeFailed) and answered unavailable.
func (db *DB) stored(wait func() error) error {
	if wait == nil {
		return nil
	}
	if err := wait(); err != nil {
		if isReplication(err) {
			return err
		}
		db.storeFailed(err)
		return unavailableError(err, "the write was not stored")
	}
	return nil
}

// notify tells the subscribers which collections an undo (or a rebuild of
// memory) changed, after the write lock is released.
func (db *DB) notify(touched []string) {
	if len(touched) > 0 {
		db.tell(0, touched)
	}
}

// storeFailed undoes, newest first, every unit the store lost (those after
// its Durable seq), refuses writes from then on, and starts the probes that
// end the failure. The store's failure event calls it (storeEvent), and so
// does each write whose wait failed; a call for a failure already handled
// (or over) does nothing.
func (db *DB) storeFailed(err error) {
	db.lock()
	if db.broken != nil || db.st.Failed() == nil {
		db.mu.Unlock()
		return
	}
	if r := db.repl.r; r != nil {
		db.setBroken(err)
		db.mu.Unlock()
		db.log.Error("the store failed: this cluster node leaves the cluster until restarted, and replays the log then", "err", err)
		r.StoreFailed(err)
		return
	}
	durable := db.st.Durable()
	var touched []string
	undone := 0
	for i := len(db.pending) - 1; i >= 0 && db.pending[i].seq > durable; i-- {
		undoSteps(db, db.pending[i].undo)
		touched = append(touched, db.pending[i].touched...)
		undone++
	}
	db.pending = nil
	lost := db.seq - durable
	db.seq = durable
	db.setBroken(err)
	db.mu.Unlock()
	db.log.Error("the store failed: writes are refused until it works again", "err", err,
		"units_undone", undone, "seqs_lost", lost, "seq", durable)
	db.notify(touched)
	go db.recoverStore()
}

// recoverStore probes the failed store at growing intervals (bounded by
// storeRetryMax) until a probe succeeds, then takes writes again.
func (db *DB) recoverStore() {
	delay := storeRetryMin
	for tries := 1; ; tries++ {
		select {
		case <-db.closed:
			return
		case <-time.After(delay):
		}
		err := db.st.Probe()
		if errors.Is(err, store.ErrClosed) {
			return
		}
		if err == nil {
			db.lock()
			db.st.Resume()
			db.setBroken(nil)
			// Said before a write can see the store working: an operator
			// (or a test) that saw a write taken finds the line already.
			db.log.Info("the store works again: writes are taken", "probes", tries)
			db.mu.Unlock()
			return
		}
		delay = min(2*delay, storeRetryMax)
	}
}

// StoreErr returns the store's failure while writes are refused, else nil.
// It takes no lock: GET /_health never waits on the engine.
func (db *DB) StoreErr() error {
	if p := db.brokenNow.Load(); p != nil {
		return *p
	}
	return nil
}

// StoreFailures returns how many times the store has failed since Open.
func (db *DB) StoreFailures() uint64 { return db.st.Stats().Failures }

// StoreUnfolded returns the bytes of the store's log not yet folded into
// its tables: the work the store still has to do in the background for
// the writes already answered (docs/architecture.md, The commit path).
func (db *DB) StoreUnfolded() int64 { return db.st.Stats().LogBytes }

// CollectionInfo describes one collection for listings.
// Docs counts the live documents; Stored counts lapsed @ttl documents the
// sweeper has not deleted yet too.
type CollectionInfo struct {
	Name   string
	Fields []Field
	Docs   int
	Stored int
}

// Collections returns every collection, in creation order.
func (db *DB) Collections() []CollectionInfo {
	db.mu.RLock()
	defer db.mu.RUnlock()
	out := make([]CollectionInfo, 0, len(db.colls))
	now := db.clock.NowMS()
	for name, c := range db.colls {
		out = append(out, CollectionInfo{Name: name, Fields: c.Fields(), Docs: c.liveLen(now), Stored: c.Len()})
	}
	sort.Slice(out, func(i, j int) bool { return db.created[out[i].Name] < db.created[out[j].Name] })
	return out
}

// IsWrite reports whether a statement writes (and so takes the write lock).
func IsWrite(s fenecql.Stmt) bool {
	switch s.(type) {
	case *fenecql.Get, *fenecql.Explain:
		return false
	}
	return true
}

// Kind names a statement's kind for metrics: "read", "write", or "claim"
// (a set or del that picks its rows with order or limit).
func Kind(s fenecql.Stmt) string {
	if !IsWrite(s) {
		return "read"
	}
	if _, cl := ClausesOf(s); cl != nil && (cl.Limit != nil || len(cl.Order) > 0 || cl.Near != nil) {
		return "claim"
	}
	return "write"
}
