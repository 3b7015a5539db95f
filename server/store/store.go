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
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

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
}

// Options configure Open.
type Options struct {
	Sync SyncMode
	// OnCommit, if set, is called by the committer after each group is
	// written to the log, with the time the write took, the number of
	// changes in the group, and whether an fsync ended with it: one sync
	// may make several groups durable, and only the last of them is told
	// true, so the trues count the syncs. It must be quick: the next group
	// waits for it.
	OnCommit func(d time.Duration, changes int, fsync bool)
	// OnFail, if set, is called (on a goroutine of its own) when a write
	// to the file fails: from then on the store refuses every Commit, and
	// the units written after Durable are lost, until Probe succeeds and
	// Resume is called. The engine undoes those units in memory.
	OnFail func(err error)
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

// The file format. The application id marks a SQLite file as Fenec's; the
// format version (SQLite's user_version) changes when the tables do.
// Version 1 kept the log in the log table; version 2 keeps it in segment
// files beside the SQLite file (logfile.go), so a build that reads only
// version 1 (and would ignore the segments) refuses it. A version 1 file is
// upgraded at open: its log rows are replayed and folded as before, and
// the table stays, empty, in every file.
const (
	applicationID = 0x46454e43 // "FENC"
	formatVersion = 2
	legacyVersion = 1
)

const schemaSQL = `
CREATE TABLE state(key TEXT PRIMARY KEY, value INTEGER NOT NULL) WITHOUT ROWID;
INSERT INTO state(key, value) VALUES ('folded_seq', 0);
CREATE TABLE log(seq INTEGER PRIMARY KEY, body BLOB NOT NULL);
CREATE TABLE collections(name TEXT PRIMARY KEY, seqno INTEGER NOT NULL, schema BLOB, next_id INTEGER NOT NULL);
CREATE TABLE docs(coll TEXT NOT NULL, id INTEGER NOT NULL, body BLOB, PRIMARY KEY(coll, id)) WITHOUT ROWID;
CREATE TABLE meta(key TEXT PRIMARY KEY, body BLOB, expires INTEGER NOT NULL);
`

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
	inbound  *Inbound // under always only: the requests a sync waits a little for
	onCommit func(time.Duration, int, bool)
	onFail   func(error)
	fault    func(string) error
	log      *slog.Logger
	path     string
	tornTail bool // the log ended in a torn write: Load says where it recovered to
	tune     tuning
	db       *sql.DB
	conn     *sql.Conn // the one connection, used under wmu once Load is done
	wal      *os.File  // SQLite's WAL, opened by the store too: dropFolded syncs it
	folded   uint64    // folded_seq at open
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
	loaded    bool   // Load ran: the committer may fold
	closed    bool
	failed    error
	syncErr   error // a sync failed: the files are in doubt until reopened
	stats     Stats

	// The hold before a sync (holdLocked); under mu.
	holdMisses int       // holds in a row that gained no unit
	holdRest   int       // syncs to start without a hold
	lastSync   time.Time // when the last sync ended (under always with inbound)

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

// spareGroups is how many changes slices the store keeps for reuse: about
// the groups on their way at once (queued, written, syncing).
const spareGroups = 4

// spareChanges is the most changes a slice kept for reuse may hold: a big
// batch's is left to the garbage collector. It holds a relaxed server's
// group of an interval at tens of thousands of jobs a second (two changes
// a job: a claim's and its ack's), 2.5 MB: a slice grown anew each
// interval, from a spare of 4 096, cost the server about 3 % of its CPU
// at one worker under --sync 250 in its copies, its fresh pages' faults
// and the collector's work (docs/benchmarks.md, "The relaxed path's
// CPU").
const spareChanges = 1 << 15

// group is the units queued between two commits: one log record; one sync
// of the log makes one group, or several, durable.
type group struct {
	changes []Change
	units   int
	seq     uint64    // the last unit's
	size    int64     // rough bytes held, to bound memory under interval/off
	since   time.Time // when its first unit was queued (under interval)
	done    chan struct{}
	err     error // set before done is closed

	flushed func() error // flush(this group): the wait its units' Commits answer

	// Under Store.mu.
	state groupState
	led   bool          // a flush leads it to the disk; other waiters wait for done
	wrote time.Duration // its write to the log took
	bytes int           // its log record's size
	seg   *segment      // the segment it was written to
}

// groupState is where a group is on its way to the disk.
type groupState uint8

const (
	queued  groupState = iota // Store.cur: units may still join
	writing                   // its log record is being written
	written                   // in Store.unsynced
	syncing                   // in the sync under way
	done                      // durable, or failed: done is closed
)

func newGroup() *group { return &group{done: make(chan struct{})} }

func (g *group) wait() error {
	<-g.done
	return g.err
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
	s := &Store{log: log, path: path, mode: mode, onCommit: opts.OnCommit, onFail: opts.OnFail, fault: opts.Fault, tune: tune, db: db, cur: newGroup(),
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

// openLog reads the log's segments (checking them, and cutting off a torn
// tail) and keeps the records after folded_seq for Load.
func (s *Store) openLog() error {
	if err := s.conn.QueryRowContext(context.Background(), `SELECT value FROM state WHERE key = 'folded_seq'`).Scan(&s.folded); err != nil {
		return fmt.Errorf("store: open %s: %w", s.path, err)
	}
	sc, err := scanLog(s.path, s.log.Warn)
	if err != nil {
		return fmt.Errorf("store: %s: %w", s.path, err)
	}
	s.segs = sc.segs
	s.tornTail = sc.cut > 0
	s.written = sc.synced
	s.syncedTo(sc.synced)
	for _, r := range sc.records {
		if r.seq > s.folded {
			s.replay = append(s.replay, r)
		}
	}
	if n := len(s.segs); n > 0 {
		s.segFull = s.segs[n-1].size >= s.segBytes()
	}
	return nil
}

func (s *Store) segBytes() int64 {
	if s.tune.segBytes > 0 {
		return s.tune.segBytes
	}
	return defaultSegBytes
}

// prepare checks that the file is a Fenec store of a known format (or
// empty, and then creates the tables), switches it to WAL mode and takes
// the exclusive lock.
func (s *Store) prepare(path string) error {
	ctx := context.Background()
	conn, err := s.db.Conn(ctx)
	if err != nil {
		return describeOpenError(path, err)
	}
	s.conn = conn
	var appID, version, objects int64
	err = conn.QueryRowContext(ctx, `SELECT (SELECT application_id FROM pragma_application_id), (SELECT user_version FROM pragma_user_version), (SELECT count(*) FROM sqlite_schema)`).Scan(&appID, &version, &objects)
	if err != nil {
		return describeOpenError(path, err)
	}
	switch {
	case appID == 0 && objects == 0:
		// A new (or empty) file: make it a Fenec store.
		if err := s.exec(ctx, "BEGIN IMMEDIATE", schemaSQL,
			"PRAGMA application_id = "+strconv.Itoa(applicationID),
			"PRAGMA user_version = "+strconv.Itoa(formatVersion),
			"COMMIT"); err != nil {
			return fmt.Errorf("store: create %s: %w", path, err)
		}
	case appID != applicationID:
		return fmt.Errorf("store: %s is a SQLite database but not a Fenec store", path)
	case version != formatVersion && version != legacyVersion:
		return fmt.Errorf("store: %s has Fenec format version %d; this build reads versions %d and %d", path, version, legacyVersion, formatVersion)
	default:
		// A damaged file could load in part, with nothing said: check its
		// structure (every page, every B-tree, the schema) before loading.
		// It reads the whole file once.
		if err := quickCheck(ctx, conn); err != nil {
			return fmt.Errorf("store: %s is damaged and was not opened (%w); restore it from a backup, or recover what can be read with the sqlite3 shell's .recover command", path, err)
		}
	}
	var jm string
	if err := conn.QueryRowContext(ctx, `PRAGMA journal_mode = WAL`).Scan(&jm); err != nil {
		return describeOpenError(path, err)
	}
	if jm != "wal" {
		return fmt.Errorf("store: %s: cannot switch to WAL mode (journal mode is %s)", path, jm)
	}
	// In exclusive locking mode the first write takes the lock and keeps it;
	// take it now, so a second server fails here rather than later. A
	// version 1 file becomes version 2 here, before any segment is made.
	stmts := []string{"BEGIN IMMEDIATE", "COMMIT"}
	if version == legacyVersion {
		stmts = []string{"BEGIN IMMEDIATE", "PRAGMA user_version = " + strconv.Itoa(formatVersion), "COMMIT"}
	}
	if err := s.exec(ctx, stmts...); err != nil {
		return describeOpenError(path, err)
	}
	// The WAL SQLite writes, opened here too so that dropFolded can sync
	// it: a sync applies to the file, whichever descriptor asks. In
	// exclusive locking mode SQLite keeps this one file (it only truncates
	// it) until the connection closes.
	if s.wal, err = os.OpenFile(path+"-wal", os.O_RDWR|os.O_CREATE, 0o644); err != nil {
		return fmt.Errorf("store: %s: opening its WAL: %w", path, err)
	}
	if version == legacyVersion {
		if err := fdatasync(s.wal); err != nil {
			return fmt.Errorf("store: %s: syncing its WAL: %w", path, err)
		}
	}
	return nil
}

// quickCheck runs PRAGMA quick_check and returns its findings as an error.
func quickCheck(ctx context.Context, conn *sql.Conn) error {
	var found []string
	rows, err := conn.QueryContext(ctx, `PRAGMA quick_check(10)`)
	if err != nil {
		return fmt.Errorf("PRAGMA quick_check: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var line string
		if err := rows.Scan(&line); err != nil {
			return fmt.Errorf("PRAGMA quick_check: %w", err)
		}
		if line != "ok" {
			found = append(found, line)
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("PRAGMA quick_check: %w", err)
	}
	if len(found) > 0 {
		return fmt.Errorf("PRAGMA quick_check: %s", strings.Join(found, "; "))
	}
	return nil
}

func describeOpenError(path string, err error) error {
	var se *sqlite.Error
	if errors.As(err, &se) {
		switch se.Code() & 0xff {
		case 26: // SQLITE_NOTADB
			return fmt.Errorf("store: %s is not a Fenec store (not a SQLite database file)", path)
		case 5, 6: // SQLITE_BUSY, SQLITE_LOCKED
			return fmt.Errorf("store: %s is in use by another process", path)
		case 11: // SQLITE_CORRUPT
			return fmt.Errorf("store: %s is damaged and was not opened (%v); restore it from a backup, or recover what can be read with the sqlite3 shell's .recover command", path, err)
		}
	}
	return fmt.Errorf("store: open %s: %w", path, err)
}

func (s *Store) exec(ctx context.Context, stmts ...string) error {
	for _, q := range stmts {
		if _, err := s.conn.ExecContext(ctx, q); err != nil {
			if q != "BEGIN IMMEDIATE" {
				s.conn.ExecContext(ctx, "ROLLBACK") // best effort; the error that matters is err
			}
			return err
		}
	}
	return nil
}

// Load calls fn with the persisted state, in an order that rebuilds it
// exactly: for each live collection in creation order, an OpCreate (ID = its
// next id) then an OpPut per document in ascending id; then an OpMetaPut per
// meta record (by key); then the logged changes not yet folded, in commit
// order, as they were committed. It must be called once, after Open and
// before any Commit, and returns the last committed seq.
func (s *Store) Load(fn func(Change) error) (uint64, error) {
	s.mu.Lock()
	if s.loaded || s.committed || s.closed {
		s.mu.Unlock()
		return 0, errors.New("store: Load must be called once, after Open and before any Commit")
	}
	s.mu.Unlock()
	if s.mem {
		s.mu.Lock()
		s.loaded = true
		s.mu.Unlock()
		return 0, nil
	}
	seq, err := s.load(context.Background(), fn)
	if err != nil {
		return 0, err
	}
	if s.tornTail {
		s.log.Warn("the store recovered to the last complete commit", "seq", seq)
	}
	s.mu.Lock()
	s.loaded = true
	s.lastSeq = seq
	s.durable = seq
	s.fmu.Lock()
	s.stats.LogBytes = s.unfoldedLocked()
	s.fmu.Unlock()
	s.mu.Unlock()
	return seq, nil
}

func (s *Store) load(ctx context.Context, fn func(Change) error) (uint64, error) {
	// Read the (few) collections first: the connection is the only one, so
	// their documents are queried after this result set is closed.
	var colls []Change
	err := query(ctx, s.conn, `SELECT name, schema, next_id FROM collections ORDER BY seqno`, func(r *sql.Rows) error {
		c := Change{Op: OpCreate}
		if err := r.Scan(&c.Coll, &c.Body, &c.ID); err != nil {
			return err
		}
		colls = append(colls, c)
		return nil
	})
	if err != nil {
		return 0, err
	}
	// The ids the docs table holds bound those the fold must delete rows
	// of (collLatest.sealed): below the collection's next_id, or past it
	// when a fold's part wrote documents before a crash.
	latest := latestDocs{}
	for _, c := range colls {
		if err := fn(c); err != nil {
			return 0, err
		}
		held := c.ID
		err := query(ctx, s.conn, `SELECT id, body FROM docs WHERE coll = ? ORDER BY id`, func(r *sql.Rows) error {
			d := Change{Op: OpPut, Coll: c.Coll}
			if err := r.Scan(&d.ID, &d.Body); err != nil {
				return err
			}
			held = max(held, d.ID+1)
			return fn(d)
		}, c.Coll)
		if err != nil {
			return 0, err
		}
		latest.of(c.Coll).sealed = held
	}
	s.fmu.Lock()
	s.latest = latest
	s.fmu.Unlock()
	err = query(ctx, s.conn, `SELECT key, body, expires FROM meta ORDER BY key`, func(r *sql.Rows) error {
		m := Change{Op: OpMetaPut}
		if err := r.Scan(&m.Key, &m.Body, &m.Expires); err != nil {
			return err
		}
		return fn(m)
	})
	if err != nil {
		return 0, err
	}
	// The log not yet folded: replay it, and keep it (coalesced) for the
	// committer's next fold. First the rows of a version 1 file's log
	// table, then the records of the segments.
	seq := s.folded
	err = query(ctx, s.conn, `SELECT seq, body FROM log ORDER BY seq`, func(r *sql.Rows) error {
		var rowSeq int64
		var body []byte
		if err := r.Scan(&rowSeq, &body); err != nil {
			return err
		}
		var changes []Change
		err := decodeChanges(body, func(c Change) error {
			changes = append(changes, c)
			return fn(c)
		})
		if errors.Is(err, errCorrupt) {
			return fmt.Errorf("store: log row %d: %w", rowSeq, err)
		}
		if err != nil {
			return err
		}
		seq = uint64(rowSeq)
		s.fmu.Lock()
		s.addFold(changes, seq, len(body))
		s.fmu.Unlock()
		return nil
	})
	if err != nil {
		return 0, err
	}
	for _, r := range s.replay {
		if r.seq <= seq {
			return 0, fmt.Errorf("store: %s: the log holds seq %d after seq %d", s.path, r.seq, seq)
		}
		var changes []Change
		err := decodeChanges(r.body, func(c Change) error {
			changes = append(changes, c)
			return fn(c)
		})
		if errors.Is(err, errCorrupt) {
			return 0, fmt.Errorf("store: %s: log record of seq %d: %w", s.path, r.seq, err)
		}
		if err != nil {
			return 0, err
		}
		seq = r.seq
		s.fmu.Lock()
		s.addFold(changes, seq, len(r.body)+recordHead)
		s.fmu.Unlock()
	}
	s.replay = nil
	return seq, nil
}

// query runs q and calls each for every row.
func query(ctx context.Context, conn *sql.Conn, q string, each func(*sql.Rows) error, args ...any) error {
	rows, err := conn.QueryContext(ctx, q, args...)
	if err != nil {
		return fmt.Errorf("store: load: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		if err := each(rows); err != nil {
			return err
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("store: load: %w", err)
	}
	return nil
}

func noWait() error { return nil }

// Commit queues one unit (a statement's or a batch's changes; after a crash
// they are all there or none is). It is called under the engine's write
// lock, in seq order, and does no I/O. The answer blocks until the unit is
// durable per the sync mode: under always until it is synced; under
// interval and off it returns at once (unless the queue has outgrown its
// bound: then it waits for the write). Once the store has failed, every
// wait returns the failure.
//
// The caller calls the answer at once: under always that call writes the
// unit's group and syncs the log itself, on the caller's goroutine, unless
// another waiter already does (flush). A caller that may never call it
// uses CommitDetached. Under interval and off the committer writes every
// group.
func (s *Store) Commit(seq uint64, changes []Change) (wait func() error) {
	return s.commit(seq, changes, false)
}

// CommitDetached is Commit for a caller that may never call the answer (a
// cluster node applying its log): the committer goroutine is asked to
// write the unit.
func (s *Store) CommitDetached(seq uint64, changes []Change) (wait func() error) {
	return s.commit(seq, changes, true)
}

func (s *Store) commit(seq uint64, changes []Change, detached bool) (wait func() error) {
	if s.mem {
		return noWait
	}
	var size int64
	for _, c := range changes {
		if c.Op < OpCreate || c.Op > OpMetaDelete {
			panic(fmt.Sprintf("store: Commit of a change with unknown op %d", c.Op))
		}
		size += int64(len(c.Coll)+len(c.Key)+len(c.Body)) + 64
	}
	s.mu.Lock()
	if err := s.failed; err != nil {
		s.mu.Unlock()
		return func() error { return err }
	}
	if s.closed {
		s.mu.Unlock()
		return func() error { return ErrClosed }
	}
	if seq <= s.lastSeq {
		last := s.lastSeq
		s.mu.Unlock()
		panic(fmt.Sprintf("store: Commit of seq %d after seq %d", seq, last))
	}
	s.lastSeq = seq
	s.committed = true
	g := s.cur
	if s.mode.Kind == SyncInterval && g.units == 0 {
		g.since = time.Now()
	}
	if g.changes == nil {
		select {
		case g.changes = <-s.spare:
		default:
		}
	}
	g.changes = append(g.changes, changes...)
	g.units++
	g.seq = seq
	g.size += size
	now := (s.mode.Kind == SyncAlways && detached) || g.size >= s.tune.maxPending
	if g.flushed == nil && s.mode.Kind == SyncAlways {
		g.flushed = func() error { return s.flush(g) }
	}
	s.mu.Unlock()
	if now {
		s.poke()
	}
	// Under interval and off the engine may outrun the disk; once the queue
	// holds twice the early-write bound, its waits block until it is written,
	// so memory stays bounded and requests slow down instead. Under an
	// interval a group still queued an interval after its first unit means
	// the committer is behind: its waits block too, so an acknowledged unit
	// is never more than about an interval (plus the write before it) from
	// the disk — the loss bound docs/reliability.md states.
	if s.mode.Kind == SyncAlways {
		return g.flushed
	}
	if g.size >= 2*s.tune.maxPending || (s.mode.Kind == SyncInterval && g.units > 1 && time.Since(g.since) > s.mode.Interval) {
		return g.wait // for the committer's write
	}
	return s.failed0
}

func (s *Store) poke() {
	select {
	case s.wake <- struct{}{}:
	default: // already signalled; the committer will take this unit too
	}
}

// flush brings g to the disk per the sync mode and returns its error. The
// first caller for a group leads it; later ones wait for the leader.
//
// The leader writes the group as soon as no other group is being written
// and none waits for a sync, then syncs the log segment as soon as no
// other sync is under way. So the groups go down a pipeline of two stages:
// while the sync for group n is under way, group n+1 is written, and its
// sync starts the moment n's returns. A sync takes every group written
// before it started — all of them reached the segment first, so it makes
// all of them durable — and one group is written per sync, as without the
// pipeline. A group that moves the log to a new segment is written only
// once no sync is under way: a sync covers one segment, and a segment
// before the last is then whole (logfile.go).
//
// The pipeline pays while groups are small: a unit then waits for the disk,
// and hiding its write behind the sync before shortens that wait. But a
// group written early holds only the units that came during one sync, not
// during a write and a sync, so under many writers it would take more
// syncs (each costing CPU in the kernel) for the same units. So a group is
// written during a sync only while the sync carries at most pipelineUnits
// units, and while at most twice that many connections wrote lately
// (Inbound.Active): past either it waits for the sync to end and takes
// what came meanwhile. With 16 HTTP workers a sync of one or two units
// is a lull, and the group written early in it then took a second write
// after the hold for the units that came (docs/benchmarks.md,
// "Sixteen durable workers").
//
// And a sync takes every unit queued when it starts: under --sync always
// the leader that starts it first writes the units queued since the group
// written early (once, and not past the segment's end). Without that, a
// unit committed after the early write but before the sync under way
// ended waited for one more sync: with a few writers most syncs carried
// one unit (4 HTTP workers claiming 10 and acking them in a /batch, on 2
// loaded cores: 0.70–0.83 syncs a unit, against 0.53–0.63 so).
//
// Before it starts a sync, the leader may hold it a little for units on
// their way (holdLocked, Options.Inbound): with a few writers, those that
// came just after a sync started otherwise wait for the next one, and the
// syncs alternate between small groups (the rule: docs/architecture.md,
// "The commit path"; what it measured: docs/benchmarks.md, "Group
// commit"). A leader whose group is still the queued one holds before
// writing it, so that the units that
// come meanwhile join the group and one write takes them all; one whose
// group was written early holds after, and gathers what came.
// Folds, probes and backups share the writer with the writes through wmu.
func (s *Store) flush(g *group) error {
	s.mu.Lock()
	if g.led {
		s.mu.Unlock()
		<-g.done
		return g.err
	}
	g.led = true
	gathered, held := false, false
	for g.state != done {
		switch {
		case g.state == syncing:
			s.mu.Unlock()
			<-g.done
			s.mu.Lock()
		case s.stopping:
			s.waitChange()
		case !held && s.inbound != nil && !s.syncing && !s.writing && !s.segFull &&
			((g.state == queued && len(s.unsynced) == 0) || (g.state == written && len(s.unsynced) == 1)):
			// Only this leader can be here: its group is the queued one
			// (s.cur), whose units that come while it holds join it and
			// one write takes them all; or the one written (early), and
			// no group is written while it holds.
			held = true
			s.holdLocked()
		case g.state == queued && !s.writing && len(s.unsynced) == 0 && (!s.syncing || (s.syncUnits <= pipelineUnits && !s.segFull && (s.inbound == nil || s.inbound.Active() <= 2*pipelineUnits))):
			s.writeLocked(g)
		case g.state == written && !s.syncing && !gathered && s.mode.Kind == SyncAlways && s.cur.units > 0 && !s.writing && !s.segFull:
			// The units queued meanwhile join this sync (their leader,
			// if any, finds its group written, then syncing).
			gathered = true
			s.writeLocked(s.cur)
		case g.state == written && !s.syncing:
			s.syncLocked()
		default:
			s.waitChange()
		}
	}
	s.mu.Unlock()
	return g.err
}

// holdLocked waits, before a sync starts, for the units of requests on
// their way to a commit (Options.Inbound), which then join the sync
// (gathered): while any is between its head and its commit, or while the
// sync would carry fewer units than connections wrote lately and the
// last sync ended within Inbound.busy, for Inbound's hold at most. Holds that gain no unit twice running stop the
// holding for holdRest syncs: a connection that wrote lately but will
// not soon does not delay every sync. mu is held, and released meanwhile.
func (s *Store) holdLocked() {
	if s.holdRest > 0 {
		s.holdRest--
		return
	}
	units0 := s.pendingUnitsLocked()
	var end time.Time // zero: not waited
	siblings := -1    // whether to wait for the connections that wrote lately (-1: not asked yet)
	for {
		units, pending := s.pendingUnitsLocked(), s.inbound.Pending()
		if pending <= 0 && units >= s.inbound.Active() {
			break
		}
		now := time.Now()
		if siblings < 0 {
			siblings = 0
			if now.Sub(s.lastSync) < s.inbound.busy {
				siblings = 1
			}
		}
		if pending <= 0 && siblings == 0 {
			break // writing now and then: Inbound.busy
		}
		if end.IsZero() {
			end = now.Add(s.inbound.hold)
		} else if !now.Before(end) {
			break
		}
		s.mu.Unlock()
		s.inbound.wait(end.Sub(now), pending)
		s.mu.Lock()
	}
	switch {
	case end.IsZero():
	case s.pendingUnitsLocked() > units0:
		s.holdMisses = 0
	default:
		s.holdMisses++
		if s.holdMisses == 2 {
			s.holdMisses, s.holdRest = 0, holdRest
		}
	}
}

// holdRest is how many syncs start without a hold after two holds gained
// nothing (holdLocked).
const holdRest = 16

// pendingUnitsLocked returns the units written and queued, not yet
// syncing; mu is held.
func (s *Store) pendingUnitsLocked() int64 {
	units := int64(s.cur.units)
	for _, g := range s.unsynced {
		units += int64(g.units)
	}
	return units
}

// pipelineUnits is the most units a sync under way may carry for the next
// group to be written meanwhile (flush): as many as a few workers keep in
// flight, fewer than many workers put in one group. Past 2*pipelineUnits
// connections writing lately (Inbound.Active) no group is written early.
const pipelineUnits = 2

// waitChange waits, with mu released, until the pipeline's state changes.
func (s *Store) waitChange() {
	s.watched = true
	ch := s.changed
	s.mu.Unlock()
	<-ch
	s.mu.Lock()
}

// changedLocked wakes the leaders waiting for the pipeline; mu is held.
func (s *Store) changedLocked() {
	if s.watched {
		close(s.changed)
		s.changed = make(chan struct{})
		s.watched = false
	}
}

// writeLocked writes g, the queued group, as one log record; mu is held,
// and released while it writes.
func (s *Store) writeLocked(g *group) {
	s.writing = true
	s.cur = newGroup()
	g.state = writing
	s.mu.Unlock()
	s.wmu.Lock()
	s.mu.Lock()
	failed := s.failed // a fold or a sync failed while the group waited for wmu
	s.mu.Unlock()
	var err error
	var n int
	full := s.segFull
	start := time.Now()
	if failed == nil {
		n, err = s.writeGroup(g)
		if err == nil {
			full = g.seg.size >= s.segBytes()
		}
	}
	took := time.Since(start)
	s.wmu.Unlock()
	s.mu.Lock()
	switch {
	case failed != nil:
		s.failLocked(failed, g)
	case err != nil:
		s.failWriteLocked(err, g)
	case s.failed != nil:
		// A sync failed while the record was written: the file is in
		// doubt, and the store stays failed until it is reopened.
		s.failLocked(s.failed, g)
	default:
		s.segFull = full
		g.wrote, g.bytes = took, n
		s.stats.LogBytes += int64(n)
		if s.mode.Kind == SyncOff {
			s.doneLocked([]*group{g}, false)
		} else {
			g.state = written
			s.unsynced = append(s.unsynced, g)
		}
	}
	s.writing = false
	s.changedLocked()
}

// syncLocked syncs the log segment, making durable every group written
// before it starts; mu is held, and released during the sync. The groups
// are all in one segment (flush moves to a new one only with no sync under
// way and none waiting).
func (s *Store) syncLocked() {
	batch := s.unsynced
	s.unsynced = nil
	s.syncing = true
	s.syncUnits = 0
	for _, g := range batch {
		g.state = syncing
		s.syncUnits += g.units
	}
	s.changedLocked() // the next group may be written while this syncs
	s.mu.Unlock()
	start := time.Now()
	err := s.faultAt(FaultSync)
	if err == nil {
		err = fdatasync(batch[0].seg.f)
	}
	took := time.Since(start)
	s.mu.Lock()
	if err != nil {
		// After a failed sync the kernel may have dropped the pages it
		// could not write: what the segment holds is in doubt, and a
		// later sync may answer success without them. Only reopening the
		// file (a restart) reads it afresh, so the store stays failed till
		// then.
		s.syncErr = fmt.Errorf("syncing the log: %w", err)
		s.failLocked(s.syncErr, batch...)
	} else {
		for _, g := range batch {
			g.wrote += took
		}
		if s.inbound != nil {
			s.lastSync = start.Add(took)
		}
		s.stats.Fsyncs++
		s.syncedTo(batch[len(batch)-1].seq)
		s.doneLocked(batch, true)
	}
	// Cleared only now: the next sync's groups go to the folds after these.
	s.syncing = false
	s.changedLocked()
}

// doneLocked returns groups now durable, in seq order, and hands them to
// the folds; mu is held, and released meanwhile (the caller's writing or
// syncing flag keeps the next groups' doneLocked after this one's).
func (s *Store) doneLocked(gs []*group, fsync bool) {
	last := gs[len(gs)-1]
	s.durable = last.seq
	for _, g := range gs {
		s.stats.Commits += uint64(g.units)
		s.stats.Changes += uint64(len(g.changes))
		g.state = done
		close(g.done)
	}
	loaded := s.loaded
	s.mu.Unlock()
	if s.onCommit != nil {
		for i, g := range gs {
			s.onCommit(g.wrote, len(g.changes), fsync && i == len(gs)-1)
		}
	}
	if loaded {
		s.fmu.Lock()
		first := len(s.folds) == 0
		for _, g := range gs {
			s.addFold(g.changes, g.seq, g.bytes)
		}
		due := first || s.unfoldedLocked() >= s.tune.foldBytes
		s.fmu.Unlock()
		if due {
			s.poke() // the committer arms its fold timer, or folds
		}
	}
	s.mu.Lock()
}

// failWriteLocked fails the store after a group's write failed: the syncs
// under way end first, and the groups written before g are synced, so
// Durable is final before anyone learns of the failure; mu is held.
func (s *Store) failWriteLocked(err error, g *group) {
	s.stopping = true
	for s.syncing || len(s.unsynced) > 0 {
		if s.syncing {
			s.waitChange()
		} else {
			s.syncLocked()
		}
	}
	s.stopping = false
	s.failLocked(err, g)
}

// failLocked records err as the store's failure (unless it has failed
// already) and hands it to gs, to the groups written but not synced and
// to the units still queued; Commits answer it at once until Resume. The
// units after Durable are lost: the next Commit may reuse their seqs. mu
// is held.
func (s *Store) failLocked(err error, gs ...*group) {
	first := s.failed == nil
	if first {
		s.failed = fmt.Errorf("store: %w", err)
		s.stats.Failed = s.failed
		s.stats.Failures++
	}
	s.lastSeq = s.durable
	pending := s.cur
	s.cur = newGroup()
	for _, g := range append(append(gs, s.unsynced...), pending) {
		if g != nil && g.state != done {
			g.err = s.failed
			g.state = done
			close(g.done)
		}
	}
	s.unsynced = nil
	s.changedLocked()
	if first && s.onFail != nil {
		go s.onFail(s.failed)
	}
}

// fail fails the store from the committer (a fold's failure), once the
// syncs under way have ended; wmu is held.
func (s *Store) fail(err error) {
	s.mu.Lock()
	s.failWriteLocked(err, nil)
	s.mu.Unlock()
}

// Failed returns the store's failure while it refuses Commits, else nil.
func (s *Store) Failed() error {
	if s.mem {
		return nil
	}
	return s.failure()
}

func (s *Store) failure() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.failed
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

// run is the committer: it writes the groups no waiter writes (under an
// interval, off, or for CommitDetached), and folds the log, until Close.
// After a failure it writes nothing (Commit refuses every unit) but answers
// probes, until Resume.
//
// Folds stay off the commit path: the log is folded in chunks of at most
// foldChunk bytes of log records and about foldRows rows to write (what a
// chunk's time grows with: a few ms here), one chunk per turn of the loop,
// and every turn first writes the units queued (under always and
// interval), so a committed unit waits for at most one short chunk's fold
// before it is written.
// Under an interval that bounds what a crash can lose to the units of the
// last interval plus one chunk's fold (docs/reliability.md).
func (s *Store) run() {
	defer close(s.stopped)
	var tick <-chan time.Time
	if s.mode.Kind == SyncInterval {
		t := time.NewTicker(s.mode.Interval)
		defer t.Stop()
		tick = t.C
	}
	foldTimer := time.NewTimer(time.Hour)
	foldTimer.Stop()
	defer foldTimer.Stop()
	for {
		write, closing := false, false
		select {
		case <-s.wake:
			write = true
		case <-tick:
			write = true
		case <-foldTimer.C:
		case answer := <-s.probe:
			s.wmu.Lock()
			answer <- s.tryWrite()
			s.wmu.Unlock()
			continue
		case <-s.closing:
			write, closing = true, true
		}
		s.mu.Lock()
		loaded, failed := s.loaded, s.failed != nil
		var g *group
		if (write || s.mode.Kind != SyncOff) && s.cur.units > 0 && !failed {
			g = s.cur
		}
		s.mu.Unlock()
		if failed {
			// Commit refuses while the store is failed: nothing is queued.
			if closing {
				return
			}
			continue
		}
		if g != nil {
			if err := s.flush(g); err != nil {
				if closing {
					return
				}
				continue
			}
		}
		if closing {
			// Groups that waiters lead may still be on their way: the
			// log is closed only once they are durable.
			s.mu.Lock()
			for s.writing || s.syncing || len(s.unsynced) > 0 {
				s.waitChange()
			}
			s.mu.Unlock()
		}
		// Fold only once Load has handed over the log's unfolded rows;
		// before that the fold set does not cover the whole log.
		s.fmu.Lock()
		unfolded, age := s.unfoldedLocked(), time.Duration(0)
		if len(s.folds) > 0 {
			age = time.Since(s.folds[0].since)
		}
		s.fmu.Unlock()
		if loaded && unfolded > 0 {
			if closing || unfolded >= s.tune.foldBytes || age >= s.tune.foldAge {
				// A group already taken for writing (its leader waits for
				// the connection) goes before the chunk. Once: under a
				// steady load another is always on its way, and the fold
				// must keep up.
				s.mu.Lock()
				if s.writing {
					s.waitChange()
				}
				s.mu.Unlock()
				s.wmu.Lock()
				for {
					more, err := s.foldLog()
					if err == nil && !closing {
						err = s.dropFolded(false)
					}
					if err != nil {
						s.fail(err)
						break
					}
					if !closing || !more {
						break
					}
				}
				s.wmu.Unlock()
				s.fmu.Lock()
				more := s.unfoldedLocked() > 0
				s.fmu.Unlock()
				if more && !closing {
					foldTimer.Reset(0) // the next chunk, after the queued units
				}
			} else {
				foldTimer.Reset(s.tune.foldAge - age)
			}
		}
		if closing {
			return
		}
	}
}

// unfoldedLocked returns the size of the log records not yet folded; fmu
// is held.
func (s *Store) unfoldedLocked() int64 {
	var n int64
	for _, f := range s.folds {
		n += f.bytes
	}
	return n
}

// addFold adds one log record's changes to the chunks waiting for a fold;
// fmu is held. It takes changes: the chunks keep what they need of them
// (the bodies), and the slice goes to the spares for a later group to
// reuse, so the caller must not use it after.
//
// A chunk is closed once it holds foldChunk bytes or foldRows rows, and
// before a group that would take it past foldRows: a big group (a batch)
// starts a chunk of its own, which the fold can write in parts unless
// the chunk creates or drops a collection (foldSet.partable).
func (s *Store) addFold(changes []Change, seq uint64, size int) {
	if n := len(s.folds); n == 0 || (!s.folds[n-1].empty() && (s.folds[n-1].bytes >= s.tune.foldChunk ||
		(s.tune.foldRows > 0 && s.folds[n-1].rows+len(changes)+1 > s.tune.foldRows))) {
		s.folds = append(s.folds, newFoldSet())
	}
	// A chunk begun by a group of at most foldRows rows closes before it
	// passes foldRows; one begun by a bigger group takes no other. So it
	// holds at most that many documents of a collection, however many the
	// last chunk sealed held (collLatest.hint): under --sync always, after
	// a put of thousands of jobs, each chunk of a few claims' and acks'
	// rows made maps for thousands until the next fold (a quarter of a
	// megabyte a chunk).
	f := s.folds[len(s.folds)-1]
	if f.empty() && s.tune.foldRows > 0 {
		f.room = max(s.tune.foldRows, len(changes)+1)
	}
	// s.latest is Load's, which bounds the ids the tables hold: none is
	// made here, which would take the tables for empty.
	f.add(changes, seq, size, s.latest)
	if cap(changes) <= spareChanges {
		clear(changes) // the bodies, for the garbage collector
		select {
		case s.spare <- changes[:0]:
		default:
		}
	}
}

// writeGroup writes g as one log record, with one pwrite at the end of the
// current segment (a new one once it is full), and returns the record's
// size; wmu is held. A write that fails is cut off again, so that the next
// record follows the last whole one.
func (s *Store) writeGroup(g *group) (int, error) {
	if err := s.faultAt(FaultCommit); err != nil {
		return 0, err
	}
	seg, err := s.segment()
	if err != nil {
		return 0, err
	}
	s.buf = appendRecord(s.buf[:0], g.seq, s.synced.Load(), g.changes)
	if _, err := seg.f.WriteAt(s.buf, seg.size); err != nil {
		if terr := seg.f.Truncate(seg.size); terr != nil {
			// The segment may end in part of a record: only a restart
			// (which cuts it off at open) makes it safe to write again.
			s.mu.Lock()
			s.syncErr = fmt.Errorf("writing the log: %w (and cutting off the part written: %v)", err, terr)
			s.mu.Unlock()
		}
		return 0, writeError(err)
	}
	seg.size += int64(len(s.buf))
	s.written = g.seq
	g.seg = seg
	seg.zeroAhead()
	return len(s.buf), nil
}

// writeError says what a failed write to the log was, and that the disk
// is full when it is.
func writeError(err error) error {
	if errors.Is(err, syscall.ENOSPC) {
		return fmt.Errorf("writing the log: the disk is full: %w", err)
	}
	return fmt.Errorf("writing the log: %w", err)
}

// segment returns the segment the next record goes to: the current one, or
// a new one once it is full (or there is none), named by the next seq;
// wmu is held. Every group in the old one is durable by then (flush), and
// under off it is synced here, so that a segment before the last is whole.
func (s *Store) segment() (*segment, error) {
	if n := len(s.segs); n > 0 && s.segs[n-1].size < s.segBytes() {
		return s.segs[n-1], nil
	}
	if n := len(s.segs); n > 0 {
		if err := fdatasync(s.segs[n-1].f); err != nil {
			s.mu.Lock()
			s.syncErr = fmt.Errorf("syncing the log: %w", err)
			s.mu.Unlock()
			return nil, s.syncErr
		}
		s.syncedTo(s.written)
	}
	s.mu.Lock()
	first := s.durable + 1
	s.mu.Unlock()
	seg, err := createSegment(s.path, first, s.tune.prealloc)
	if err != nil {
		return nil, writeError(fmt.Errorf("creating a log segment: %w", err))
	}
	s.segs = append(s.segs, seg)
	return seg, nil
}

// syncedTo records that a sync of the log made every seq up to seq
// durable.
func (s *Store) syncedTo(seq uint64) {
	for {
		old := s.synced.Load()
		if seq <= old || s.synced.CompareAndSwap(old, seq) {
			return
		}
	}
}

// dropFolded deletes the segments whose records are all folded (all of
// them, at Close), once the folds that cover them are durable: it syncs
// SQLite's WAL first (a fold commits without a sync; a checkpoint would
// have synced it). That order is the invariant of the package comment: a
// crash at any point finds each change in the tables or in the log. wmu
// is held.
func (s *Store) dropFolded(all bool) error {
	s.mu.Lock()
	loaded := s.loaded
	s.mu.Unlock()
	if !loaded {
		return nil // the records are not in the folds yet
	}
	s.fmu.Lock()
	folded := true
	through := uint64(math.MaxUint64) // every seq up to it is folded
	for _, f := range s.folds {
		if !f.empty() {
			folded, through = false, f.first-1
			break
		}
	}
	s.fmu.Unlock()
	n := 0
	if all && folded {
		n = len(s.segs)
	} else {
		for n+1 < len(s.segs) && s.segs[n+1].first-1 <= through {
			n++
		}
	}
	if n == 0 {
		return nil
	}
	err := s.faultAt(FaultSync)
	if err == nil {
		err = fdatasync(s.wal)
	}
	if err != nil {
		s.mu.Lock()
		s.syncErr = fmt.Errorf("syncing the WAL: %w", err)
		s.mu.Unlock()
		return s.syncErr
	}
	if s.tune.onDrop != nil {
		s.tune.onDrop()
	}
	for _, seg := range s.segs[:n] {
		if seg.f != nil {
			seg.f.Close()
			seg.f = nil
		}
		if err := os.Remove(seg.path); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("deleting a folded log segment: %w", err)
		}
	}
	s.segs = s.segs[n:]
	if len(s.segs) == 0 {
		s.segs = nil
	}
	return nil
}

func (s *Store) faultAt(at string) error {
	if s.fault == nil {
		return nil
	}
	return s.fault(at)
}

// foldLog folds the oldest chunk of unfolded log records into the tables
// in one transaction, and returns whether more is left to fold. A failure
// rolls it back whole: the chunk stays queued for the next try (and its
// records stay in the log in any case: dropFolded). wmu is held.
func (s *Store) foldLog() (more bool, err error) {
	s.fmu.Lock()
	if len(s.folds) == 0 {
		s.fmu.Unlock()
		return false, nil
	}
	f := s.folds[0]
	if f.empty() {
		// A chunk sealed with nothing in it (more is left only after it).
		s.folds = s.folds[1:]
		more = len(s.folds) > 0
		s.fmu.Unlock()
		return more, nil
	}
	if len(s.folds) == 1 {
		// Seal the chunk: groups made durable meanwhile go to the next.
		s.folds = append(s.folds, newFoldSet())
	}
	f.seal()
	s.fmu.Unlock()
	start := time.Now()
	if s.foldTx == nil {
		s.foldTx = newFoldTx(s.conn)
	}
	tx := s.foldTx
	// A chunk of a few big groups holds more documents than foldRows: it
	// is written in parts of foldRows, one a call, so that no commit waits
	// for more than one part.
	part := f.partable(s.tune.foldRows)
	write := func() error { return f.write(tx, func() error { return s.faultAt(FaultFold) }) }
	if part {
		write = func() error {
			if err := f.writePart(tx, s.tune.foldRows); err != nil {
				return err
			}
			return s.faultAt(FaultFold)
		}
	}
	if err := tx.run(write); err != nil {
		return true, err
	}
	if s.tune.onFold != nil {
		s.tune.onFold(time.Since(start))
	}
	if part {
		f.written += s.tune.foldRows
		return true, nil
	}
	s.mu.Lock()
	s.stats.Folds++
	s.stats.LogBytes -= f.bytes
	s.mu.Unlock()
	s.fmu.Lock()
	f.forget()
	s.folds = s.folds[1:]
	if len(s.folds) == 1 && s.folds[0].empty() {
		s.folds = nil
	}
	more = len(s.folds) > 0
	s.fmu.Unlock()
	return more, nil
}

// probeRows is the size of the probe's write: enough that a disk with no
// room left fails it, as it failed the write that stopped the store.
const probeRows = 64 << 10

// tryWrite is a probe, run by the committer under wmu: it folds what is
// left to fold, writes (and deletes) a row in one SQLite transaction, and
// writes zeros past the log's end (where the next record goes), synced as
// groups are. After a failed sync it returns that failure: only reopening
// the file ends it.
func (s *Store) tryWrite() error {
	s.mu.Lock()
	syncErr := s.syncErr
	s.mu.Unlock()
	if syncErr != nil {
		return fmt.Errorf("store: %w (restart the server to read the file afresh)", syncErr)
	}
	if err := s.faultAt(FaultCommit); err != nil {
		return fmt.Errorf("store: %w", err)
	}
	for {
		more, err := s.foldLog()
		if err != nil {
			return fmt.Errorf("store: %w", err)
		}
		if !more {
			break
		}
	}
	if err := s.exec(context.Background(), "BEGIN IMMEDIATE",
		"INSERT INTO log(seq, body) VALUES (0, zeroblob("+strconv.Itoa(probeRows)+"))",
		"DELETE FROM log WHERE seq = 0", "COMMIT"); err != nil {
		return fmt.Errorf("store: %w", err)
	}
	// Zeros after the last record read as the log's end at open.
	if n := len(s.segs); n > 0 {
		seg := s.segs[n-1]
		if _, err := seg.f.WriteAt(make([]byte, probeRows), seg.size); err != nil {
			return fmt.Errorf("store: %w", writeError(err))
		}
		if s.mode.Kind != SyncOff {
			if err := fdatasync(seg.f); err != nil {
				return fmt.Errorf("store: syncing the log: %w", err)
			}
		}
	}
	return nil
}

// Probe tries a write to the file (and any fold left to do) and returns
// its error: nil when the store works again. It writes nothing the engine
// sees; Resume then lets Commits in.
func (s *Store) Probe() error {
	if s.mem {
		return nil
	}
	answer := make(chan error, 1)
	select {
	case s.probe <- answer:
		return <-answer
	case <-s.stopped:
		return ErrClosed
	}
}

// Resume ends a failure: Commits are taken again, from seq Durable()+1.
// The engine calls it once it has undone the lost units and a Probe
// succeeded.
func (s *Store) Resume() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.failed = nil
	s.stats.Failed = nil
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
