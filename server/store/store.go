// Package store is Fenec's durable store. The engine keeps every document in
// memory; the store persists the engine's changes to a log of its own and a
// SQLite file (WAL mode) and, when the server opens the file again, hands
// them back so the engine can rebuild its state. Documents, collection
// schemas and meta records are opaque bytes here: the store knows nothing
// of FenecQL. The layout is in docs/architecture.md, the guarantees in
// docs/reliability.md.
//
// Writes go through group commit. Commit only queues a unit (one statement's
// or one batch's changes) in memory; everything queued is written as one
// record appended to the current log segment (logfile.go) with one pwrite,
// and the group's waiters are released after one fdatasync of the segment.
// The commit is pipelined: the next group is written while the sync for the
// one before is under way, and each sync covers every group written before
// it started (see flush). In the background a committer goroutine folds
// logged changes into SQLite's collections, docs and meta tables,
// coalescing them, and records the last seq folded (folded_seq) in the
// same transaction; at open the tables give the state as of folded_seq and
// the records after it are replayed.
//
// The invariant that keeps a change from being lost between a fold and a
// crash: a log segment is deleted only once every record in it is folded
// AND the folds that cover it are durable in SQLite — the store syncs
// SQLite's WAL after those folds committed and before it deletes the
// segment (dropFolded). Until then a crash (or a power loss that undoes the
// unsynced fold) finds the records still in the segment, and replays them.
//
// Each log record carries synced, the last seq a sync of the log had made
// durable when it was written. At open a record that is not intact but
// followed by intact ones is damage (refused) only when one of them says a
// sync covering it had returned; otherwise it is a power loss's torn tail,
// never acknowledged, and cut off (scanLog, docs/reliability.md).
package store

import (
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net/url"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fenecdb/fenec/server/internal/fanout"
	"modernc.org/sqlite"
)

// SyncKind says when a committed unit reaches the disk.
type SyncKind uint8

const (
	// SyncAlways answers a unit's wait once it is fsync'd. The zero value,
	// so an unset mode is the safe one.
	SyncAlways SyncKind = iota
	// SyncInterval writes pending units every Interval and does not wait.
	SyncInterval
	// SyncOff writes pending units only at Close (or when they grow large).
	SyncOff
)

// SyncMode is the value of the server's --sync flag.
type SyncMode struct {
	Kind     SyncKind
	Interval time.Duration // SyncInterval only
}

// ParseSync reads a --sync value: "always", "off", or a positive whole
// number of milliseconds.
func ParseSync(s string) (SyncMode, error) {
	switch s {
	case "always":
		return SyncMode{Kind: SyncAlways}, nil
	case "off":
		return SyncMode{Kind: SyncOff}, nil
	}
	ms, err := strconv.ParseInt(s, 10, 64)
	if err != nil || ms <= 0 || ms > int64(time.Hour/time.Millisecond) {
		return SyncMode{}, fmt.Errorf("bad sync mode %q: want always, off, or a number of milliseconds from 1 to 3600000", s)
	}
	return SyncMode{Kind: SyncInterval, Interval: time.Duration(ms) * time.Millisecond}, nil
}

// String gives the mode back in the form ParseSync reads.
func (m SyncMode) String() string {
	switch m.Kind {
	case SyncAlways:
		return "always"
	case SyncOff:
		return "off"
	}
	return strconv.FormatInt(m.Interval.Milliseconds(), 10)
}

// Op is the kind of a Change.
type Op uint8

const (
	OpCreate     Op = iota + 1 // Coll, Body = collection schema (opaque), ID = the collection's next document id
	OpDrop                     // Coll: the collection and all its documents
	OpPut                      // Coll, ID, Body = the document (insert or replace)
	OpDelete                   // Coll, ID
	OpMetaPut                  // Key, Body, Expires (unix ms; 0 = never): small side records such as idempotency keys
	OpMetaDelete               // Key
)

// Change is one change the engine made. The store keeps the Body slices it
// is given until they are written and folded, so the engine must not modify
// them after Commit.
type Change struct {
	Op      Op
	Coll    string
	ID      int64
	Key     string
	Body    []byte
	Expires int64
	// InTables is set by Load on a put read from the docs table (not from
	// the log): the file's tables hold this very version of the document,
	// so ReadDocs gives it back until a later change to it is folded.
	InTables bool
}

// Options configure Open.
type Options struct {
	Sync SyncMode
	// Fault, if set, is asked before each write to the files with what the
	// write is (FaultCommit: a group or a probe; FaultFold: a fold, asked
	// midway through it; FaultSync: a sync of the log, or of SQLite's WAL
	// before folded segments are deleted); an error it answers fails that
	// write as if the file system (or SQLite) had answered it. Tests inject
	// failures at the store's boundary with it.
	Fault func(at string) error
	// Log receives what opening the file found (a torn log tail dropped).
	// Default: discarded.
	Log *slog.Logger
	// Inbound, if set, counts the requests on their way to a commit: under
	// --sync always a sync waits a little for them (flush).
	Inbound *Inbound
}

// The points at which Options.Fault is asked.
const (
	FaultCommit = "commit"
	FaultFold   = "fold"
	FaultSync   = "sync"
)

// Stats are the store's counters since Open.
type Stats struct {
	Commits  uint64 // units written to the log (and synced, but under off)
	Fsyncs   uint64 // syncs of the log that made groups durable: one per group or fewer
	Changes  uint64 // changes written to the log
	Folds    uint64 // folds of the log into the tables
	LogBytes int64  // size of the log records not yet folded
	Failed   error  // the error that stopped the store, while it is stopped
	Failures uint64 // times the store stopped on an error
}

// ErrClosed answers the waits of units committed after Close.
var ErrClosed = errors.New("store: closed")

// tuning holds the committer's thresholds; tests shrink them.
type tuning struct {
	foldBytes  int64         // fold once the unfolded log holds this much
	foldAge    time.Duration // or once its oldest row is this old
	foldChunk  int64         // fold at most this much of the log in one transaction
	foldRows   int           // and at most about this many rows (0: no bound)
	maxPending int64         // under interval/off, write early once this much is queued
	// busyTimeout is how long Open waits for another process to let go of
	// the file (a server restarting while the old one still closes).
	busyTimeout time.Duration
	// onFold, if set, is called after each fold transaction's commit (a
	// chunk's or a part's) with the time it held the connection: tests
	// time the folds with it.
	onFold func(took time.Duration)
	// segBytes: the writer moves to a new log segment once the current one
	// holds this much (0: the default).
	segBytes int64
	// prealloc: a new segment is given this many bytes on the disk first
	// (0: none).
	prealloc int64
	// onDrop, if set, is called before folded segments are deleted, after
	// the sync of SQLite's WAL that makes their folds durable: tests kill
	// the process there.
	onDrop func()
	// copyPages is how many pages one step of Copy copies while it holds
	// the writer (wmu): 2 MB of 4 KB pages, a few ms, about a fold
	// chunk's time, which a group written meanwhile may wait for.
	copyPages int
}

const defaultSegBytes = 64 << 20

// Segments are preallocated (fallocate): a record's fdatasync then
// writes into blocks the file already has, the cheapest way measured in
// CPU and in time, against a file grown by each record or zeros written
// first. Zeros written a chunk ahead of the records (segment.zeroAhead)
// spare most syncs the conversion of the preallocated block they write
// into. A segment written over whole before (as a recycled one would be)
// costs most, the page cache holding it in large folios that each small
// record's sync walks. The figures: docs/benchmarks.md, "Log segments'
// layout" (BenchmarkSegmentAppend measures them again).
var defaultTuning = tuning{foldBytes: 32 << 20, foldAge: 10 * time.Second, foldChunk: 64 << 10, foldRows: 256, maxPending: 64 << 20, busyTimeout: 5 * time.Second, prealloc: defaultSegBytes, copyPages: 64}

// Store persists the engine's changes. Its methods are safe for concurrent
// use, but Commit must be called in seq order (the engine's write lock).
type Store struct {
	mem      bool // ":memory:": keep nothing
	mode     SyncMode
	inbound  *Inbound           // under always only: the requests a sync waits a little for
	subs     fanout.List[Event] // Subscribe's
	fault    func(string) error
	log      *slog.Logger
	path     string
	tornTail bool // the log ended in a torn write: Load says where it recovered to
	tune     tuning
	db       *sql.DB
	conn     *sql.Conn // the one connection, used under wmu once Load is done
	wal      *os.File  // SQLite's WAL, opened by the store too: dropFolded syncs it
	folded   uint64    // folded_seq at open
	// foldedTo is the last seq every change up to which is in the tables
	// (FoldedSeq): folded_seq at open, then each whole chunk's last seq
	// once its fold committed (foldLog).
	foldedTo atomic.Uint64
	replay   []logRecord

	// wmu is the writer's: one group write, fold, probe or backup at a
	// time. It is taken before mu, never while holding it.
	wmu     sync.Mutex
	buf     []byte     // the log record being written; under wmu
	segs    []*segment // the log's segments, oldest first; the last takes the writes; under wmu
	written uint64     // the seq of the last record written; under wmu
	// synced is the last seq a sync of the log made durable (the sync
	// returned), written into each record (logfile.go).
	synced atomic.Uint64

	mu        sync.Mutex
	cur       *group        // units queued for the next group
	writing   bool          // a group is being written
	unsynced  []*group      // groups written, waiting for the next sync of the log
	syncing   bool          // a sync of the log is under way
	segFull   bool          // the current segment is full: the next write moves to a new one, once nothing waits for a sync
	syncUnits int           // the units it makes durable
	stopping  bool          // a failure waits for the syncs under way: no new writes
	changed   chan struct{} // closed (and replaced) when the above change, if watched
	watched   bool          // a leader waits on changed
	lastSeq   uint64
	durable   uint64 // the last seq written to the file (and synced, but under off)
	committed bool   // Commit was called: too late for Load
	detached  bool   // Detach was called: the committer writes every unit
	loaded    bool   // Load ran: the committer may fold
	closed    bool
	failed    error
	syncErr   error // a sync failed: the files are in doubt until reopened
	stats     Stats

	// The hold before a sync (holdLocked); under mu.
	holdMisses int       // holds in a row that gained no unit
	holdRest   int       // syncs to start without a hold
	lastSync   time.Time // when the last sync ended (under always with inbound)
	// recentUnits is the units each of the last syncs carried, a ring
	// (recentAt the next slot): the most of them bounds how many units a
	// hold waits for from the connections that wrote lately.
	recentUnits [recentSyncs]int
	recentAt    int

	wake      chan struct{} // "write the queued units now", or "fold"; capacity 1
	probe     chan chan error
	closing   chan struct{}
	stopped   chan struct{} // the committer has returned
	closeOnce sync.Once
	closeErr  error

	// The unfolded log records, in chunks, oldest first: added to by whoever
	// makes groups durable, folded by the committer (by Load before it
	// hands over).
	fmu    sync.Mutex
	folds  []*foldSet
	latest latestDocs // each document's last chunk in folds (under fmu)

	foldTx *foldTx // the folds' statements; under wmu

	// spare holds groups' changes slices the folds are done with (addFold),
	// emptied, for the next groups to append into: a group's slice then
	// grows from the size of one before it, not from empty.
	spare chan []Change
	// failed0 is s.failure, made once: the wait Commit answers under
	// interval and off, a func value not made anew per unit.
	failed0 func() error
}

// Open opens (or creates) the store at path. The path ":memory:" keeps
// nothing: Load finds nothing and every wait returns nil at once.
func Open(path string, opts Options) (*Store, error) {
	if path == ":memory:" {
		return &Store{mem: true}, nil
	}
	return open(path, opts, defaultTuning)
}

func open(path string, opts Options, tune tuning) (*Store, error) {
	// SQLite's syncs (around checkpoints) use fdatasync, as its own Linux
	// builds do, and so do the store's of the log: it skips the timestamp
	// update fsync pushes through the file system's journal, which is much
	// of what a commit waits for, and is just as durable. Where the
	// platform has no fdatasync the call changes nothing.
	_, _ = sqlite.Fdatasync(true)
	mode := opts.Sync
	if mode.Kind > SyncOff || (mode.Kind == SyncInterval && mode.Interval <= 0) {
		return nil, fmt.Errorf("store: bad sync mode %+v", mode)
	}
	// SQLite runs with synchronous=NORMAL under every mode: a commit (a
	// fold) does not sync, but the WAL is synced before each checkpoint
	// copies it into the database, the database is synced before the WAL
	// starts over, and a WAL that starts over has its new header synced —
	// so a crash never leaves the file inconsistent. A fold needs no sync
	// of its own: its records stay in the log until the store syncs the WAL
	// (dropFolded). Under always and an interval the store makes each group
	// durable itself, with an fdatasync of the log segment (flush), which
	// lets the next group be written while the sync is under way; off
	// leaves the log to the kernel's writeback.
	synchronous := "NORMAL"
	// locking_mode=EXCLUSIVE keeps a second process (a second server on the
	// same file, whose memory would disagree with ours) out, and lets WAL
	// mode work without the shared-memory index.
	q := url.Values{"_pragma": {
		"busy_timeout(" + strconv.FormatInt(tune.busyTimeout.Milliseconds(), 10) + ")",
		"locking_mode(EXCLUSIVE)",
		"synchronous(" + synchronous + ")",
		"journal_size_limit(67108864)",
	}}
	log := opts.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	dsn := "file:" + (&url.URL{Path: path}).EscapedPath() + "?" + q.Encode()
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		return nil, fmt.Errorf("store: open %s: %w", path, err)
	}
	db.SetMaxOpenConns(1)
	s := &Store{log: log, path: path, mode: mode, fault: opts.Fault, tune: tune, db: db, cur: newGroup(),
		changed: make(chan struct{}), wake: make(chan struct{}, 1), probe: make(chan chan error), closing: make(chan struct{}), stopped: make(chan struct{}),
		spare: make(chan []Change, spareGroups)}
	s.failed0 = s.failure
	if mode.Kind == SyncAlways {
		s.inbound = opts.Inbound
	}
	err = s.prepare(path)
	if err == nil {
		err = s.openLog()
	}
	if err != nil {
		if s.conn != nil {
			s.conn.Close()
		}
		if s.wal != nil {
			s.wal.Close()
		}
		db.Close()
		return nil, err
	}
	go s.run()
	return s, nil
}

// Stats returns the counters.
func (s *Store) Stats() Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.stats
}

// Close writes every queued unit (under every sync mode), folds the log,
// and closes the file cleanly. It returns the store's failure, if any.
// Later calls answer the same.
func (s *Store) Close() error {
	if s.mem {
		return nil
	}
	s.closeOnce.Do(func() {
		s.mu.Lock()
		s.closed = true
		s.mu.Unlock()
		close(s.closing)
		<-s.stopped
		s.wmu.Lock() // a write that a failure cut short ends first
		defer s.wmu.Unlock()
		// Once everything is folded (and the fold made durable), the log
		// is deleted whole: a clean file is the SQLite file alone.
		var dropErr error
		if s.failure() == nil {
			dropErr = s.dropFolded(true)
		}
		var stmtErr error
		if s.foldTx != nil {
			stmtErr = s.foldTx.close()
		}
		err := errors.Join(dropErr, closeSegments(s.segs), stmtErr, s.conn.Close(), s.db.Close(), s.wal.Close())
		if f := s.failure(); f != nil {
			err = f
		}
		s.closeErr = err
	})
	return s.closeErr
}

// Durable returns the seq of the last unit written to the file (under
// always and interval: synced). Units after it are lost if the store fails.
func (s *Store) Durable() uint64 {
	if s.mem {
		return math.MaxUint64 // nothing is kept, and nothing can fail
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.durable
}
