// Package engine is Fenec's database: collections of documents held in
// memory with their indexes, one writer at a time under a write lock and
// readers side by side under a read lock, every committed write handed to
// the store before it is answered. It plans and runs parsed FenecQL.
package engine

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/fenecdb/fenec/server/clock"
	"github.com/fenecdb/fenec/server/fenecql"
	"github.com/fenecdb/fenec/server/store"
)

// Options configure Open.
type Options struct {
	File     string // a SQLite file, or ":memory:" to keep nothing
	Sync     store.SyncMode
	Clock    clock.Clock // default: the system clock
	OnCommit func(d time.Duration, changes int, fsync bool)
}

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
	opts    Options // as opened: a cluster node reopens the file to discard (replica.go)
	broken  error // the store failed: writes are refused from then on
	written subscribers
	repl    replication // a cluster node's state (replica.go); zero when alone
}

// Open opens (or creates) the database file and rebuilds memory from it.
func Open(opts Options) (*DB, error) {
	if opts.File == "" {
		opts.File = ":memory:"
	}
	if opts.Clock == nil {
		opts.Clock = clock.System{}
	}
	st, err := store.Open(opts.File, store.Options{Sync: opts.Sync, OnCommit: opts.OnCommit})
	if err != nil {
		return nil, err
	}
	db := &DB{clock: opts.Clock, st: st, colls: map[string]*Collection{}, created: map[string]uint64{}, meta: map[string]Meta{}, keep: opts.File != ":memory:", opts: opts}
	seq, err := st.Load(db.replay)
	if err != nil {
		st.Close()
		return nil, fmt.Errorf("open %s: %w", opts.File, err)
	}
	db.seq = seq
	return db, nil
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
		if ch.ID > c.nextID {
			c.nextID = ch.ID
		}
		db.made++
		db.colls[ch.Coll], db.created[ch.Coll] = c, db.made
	case store.OpDrop:
		delete(db.colls, ch.Coll)
		delete(db.created, ch.Coll)
	case store.OpMetaPut:
		db.meta[ch.Key] = Meta{Body: ch.Body, Expires: ch.Expires}
	case store.OpMetaDelete:
		delete(db.meta, ch.Key)
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
	db.mu.Lock()
	defer db.mu.Unlock()
	return db.st.Close()
}

// Clock answers the database's clock.
func (db *DB) Clock() clock.Clock { return db.clock }

// Seq answers the database's change number: the count of committed writes.
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
	return db.Run(ctx, ps)
}

// Run runs parsed statements as Batch does.
func (db *DB) Run(ctx context.Context, ps []Parsed) ([]*Result, error) {
	return db.RunWith(ctx, ps, RunOptions{})
}

// RunWith runs parsed statements as Batch does, with options.
func (db *DB) RunWith(ctx context.Context, ps []Parsed, opts RunOptions) ([]*Result, error) {
	if err := ctx.Err(); err != nil {
		return nil, unavailableError(err, "request given up")
	}
	write := opts.Meta != nil
	now := db.clock.NowMS()
	for _, p := range ps {
		write = write || IsWrite(p.Stmt)
		if err := p.Scope.ended(now); err != nil {
			return nil, err
		}
	}
	if !write {
		db.mu.RLock()
		defer db.mu.RUnlock()
		t := &tx{db: db}
		return t.runAll(ps)
	}
	db.mu.Lock()
	if db.broken != nil {
		db.mu.Unlock()
		return nil, unavailableError(db.broken, "the store failed, writes are refused")
	}
	if err := db.writable(); err != nil {
		db.mu.Unlock()
		return nil, err
	}
	t := &tx{db: db, write: true}
	rs, err := t.runAll(ps)
	if opts.OnlyIfTakes && t.taken == 0 && (err == nil || fenecql.CodeOf(err) == fenecql.CodeUnmet) {
		err = ErrNothingTaken
	}
	if err != nil {
		t.rollback()
		db.mu.Unlock()
		return nil, err
	}
	if opts.Meta != nil {
		// The records commit with the write as change number seq+1; Meta
		// sees it on the results, since a record often keeps the answer
		// and its change number.
		for _, r := range rs {
			r.Seq = db.seq + 1
		}
		t.putMeta(opts.Meta(rs))
	}
	var wait func() error
	if len(t.changes) > 0 {
		wait = db.commitLocked(t.changes)
	}
	seq := db.seq
	db.mu.Unlock()
	for _, r := range rs {
		r.Seq = seq
	}
	if len(t.touched) > 0 {
		db.written.tell(t.touched)
	}
	if wait != nil {
		if err := wait(); err != nil {
			if isReplication(err) {
				return nil, err
			}
			db.mu.Lock()
			if db.broken == nil {
				db.broken = err
			}
			db.mu.Unlock()
			return nil, unavailableError(err, "the write was not stored")
		}
	}
	return rs, nil
}

// CollectionInfo describes one collection for listings.
type CollectionInfo struct {
	Name   string
	Fields []Field
	Docs   int
}

// Collections answers every collection, in creation order.
func (db *DB) Collections() []CollectionInfo {
	db.mu.RLock()
	defer db.mu.RUnlock()
	out := make([]CollectionInfo, 0, len(db.colls))
	for name, c := range db.colls {
		out = append(out, CollectionInfo{Name: name, Fields: c.Fields(), Docs: c.Len()})
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
	if _, cl := ClausesOf(s); cl != nil && (cl.Limit != nil || len(cl.Order) > 0) {
		return "claim"
	}
	return "write"
}
