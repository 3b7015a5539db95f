package engine

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/fenecdb/fenec/server/store"
)

// A cluster node's engine (docs/cluster.md). The leader runs statements as
// a lone server does, but hands each write's changes to a Replicator
// instead of the store, and answers once they are committed by the
// cluster's log; every node, the leader included, writes the store only
// from the committed log (Apply). So the file holds the committed writes
// and memory may be ahead of it on the leader alone — by the writes it
// proposed and the log has not committed yet. A leader that loses its
// term discards them by rebuilding memory from the file (Discard).

// Replicator is the cluster's side of a node's engine.
type Replicator interface {
	// Writable returns nil when this node may write now; else the error
	// the write is refused with (a *NotLeaderError, or one with
	// ErrReplication in its chain).
	Writable() error
	// Propose hands a write's changes, numbered seq, to the log. It is
	// called under the write lock in seq order, so the log's order is the
	// writes'; mark names the memory that made them (see Apply). The
	// answer blocks until they are committed and applied here.
	Propose(seq, mark uint64, changes []store.Change) (wait func() error)
	// StoreFailed is told the store failed: the file no longer follows
	// the log, so the node stops taking part (docs/cluster.md). A restart
	// replays the log from what the file holds.
	StoreFailed(err error)
}

// NotLeaderError refuses a write on a node that is not its cluster's
// leader: docs/cluster.md, a follower refuses every write with forbidden
// and names the leader.
type NotLeaderError struct {
	Leader string // the leader's HTTP URL; "" while none is known
	// Elected: this node leads but takes no writes yet: just elected, it
	// applies the earlier terms' writes before it takes its own (or it
	// hands its leadership on, or has just failed to). Like a node that
	// knows no leader, it refused the write unrun; retried shortly it is
	// taken, here or by the next leader.
	Elected bool
}

func (e *NotLeaderError) Error() string {
	if e.Elected {
		return "this node leads the cluster but takes no writes yet (just elected, it applies the earlier terms' writes first; or it hands its leadership on): retry shortly"
	}
	if e.Leader == "" {
		return "this node is not the cluster's leader and no leader is known now: retry shortly"
	}
	return "this node is not the cluster's leader: send writes to the leader at " + e.Leader
}

// ErrReplication is in the chain of a write the cluster's log could not
// commit: the leader lost its term or was shut down while the write was
// in flight. The write may still be committed by the next leader, or not;
// a client retries it under its Idempotency-Key (docs/cluster.md).
var ErrReplication = errors.New("the write's outcome in the cluster is unknown")

// ReplicationError wraps a cause in an unavailable error with
// ErrReplication in its chain.
func ReplicationError(cause error, what string) error {
	return unavailableError(fmt.Errorf("%w (%w)", ErrReplication, cause), what)
}

func isReplication(err error) bool {
	var nl *NotLeaderError
	return errors.Is(err, ErrReplication) || errors.As(err, &nl)
}

// replication is a DB's cluster state; the zero value is a lone server.
type replication struct {
	r      Replicator
	mark   uint64        // this memory's name; a new one each time memory is rebuilt
	markA  atomic.Uint64 // mark, for Mark without the lock
	stored uint64        // the last seq handed to the store: what the log committed

	applied atomic.Uint64 // seq as readers see it, for WaitSeq
	waiters atomic.Int32
	seqMu   sync.Mutex
	seqCh   chan struct{} // closed when applied moves; nil while nobody waits
}

// SetReplicator makes the DB a cluster node: from now on writes go to r.
// It is called once, before the DB serves.
func (db *DB) SetReplicator(r Replicator) {
	db.lock()
	defer db.mu.Unlock()
	db.repl.r = r
	db.st.Detach() // Apply waits for some of its writes only (cluster's behind)
	db.setMark(newMark())
	db.repl.stored = db.seq
	db.repl.applied.Store(db.seq)
}

func (db *DB) setMark(m uint64) {
	db.repl.mark = m
	db.repl.markA.Store(m)
}

// Mark returns the name of this node's memory now: a write proposed with
// another was made by memory since discarded, and must not be logged.
func (db *DB) Mark() uint64 { return db.repl.markA.Load() }

func newMark() uint64 {
	var b [8]byte
	_, _ = rand.Read(b[:]) // crypto/rand does not fail on Linux
	return binary.LittleEndian.Uint64(b[:])
}

// writable returns why the DB may not write now; nil when it may. Under
// the write lock.
func (db *DB) writable() error {
	if db.repl.r == nil {
		return nil
	}
	return db.repl.r.Writable()
}

// proposeLocked numbers a cluster node's write and hands its changes to
// the log. Under the write lock.
func (db *DB) proposeLocked(changes []store.Change) (wait func() error) {
	db.seq++
	db.moved(db.seq)
	return db.repl.r.Propose(db.seq, db.repl.mark, changes)
}

// Apply applies one committed write of the cluster's log, numbered seq and
// made by the memory named mark: to memory, unless this memory made it
// (the leader that proposed it), and to the store. A write the store
// already holds (the log replayed after a restart) is skipped. A foreign
// write while memory holds writes of its own not yet committed means
// those will never be: memory is rebuilt from the file first. Apply is
// called by the log, one write at a time, in the log's order; the answer
// waits for the store.
func (db *DB) Apply(seq, mark uint64, changes []store.Change) (wait func() error, err error) {
	db.lock()
	if seq <= db.repl.stored {
		db.mu.Unlock()
		return func() error { return nil }, nil
	}
	if mark == db.repl.mark && seq <= db.seq {
		db.repl.stored = seq
		wait = db.st.Commit(seq, changes)
		db.mu.Unlock()
		return wait, nil
	}
	if db.seq > db.repl.stored {
		if err := db.discardLocked(); err != nil {
			db.mu.Unlock()
			return nil, err
		}
	}
	if seq != db.seq+1 {
		db.mu.Unlock()
		return nil, fmt.Errorf("engine: the log's write %d follows write %d", seq, db.seq)
	}
	var touched []string
	for _, ch := range changes {
		if err := db.replay(ch); err != nil {
			db.mu.Unlock()
			return nil, fmt.Errorf("engine: applying the log's write %d: %w", seq, err)
		}
		if ch.Coll != "" {
			touched = appendOnce(touched, ch.Coll)
		}
	}
	db.seq, db.repl.stored = seq, seq
	wait = db.st.Commit(seq, changes)
	db.moved(seq)
	db.mu.Unlock()
	db.onWritten.Tell(Write{Topic: Written, Seq: seq, Colls: touched, Changes: changes})
	return wait, nil
}

func appendOnce(list []string, s string) []string {
	for _, x := range list {
		if x == s {
			return list
		}
	}
	return append(list, s)
}

// Discard drops from memory every write the log has not committed — a
// leader that lost its term — by rebuilding memory from the file, and
// tells the subscribers every collection changed.
func (db *DB) Discard() error { return db.discardIf(true, 0) }

// discardIf discards as Discard does: always, or only if memory is still
// named mark.
func (db *DB) discardIf(always bool, mark uint64) error {
	db.lock()
	if !always && mark != db.repl.mark {
		db.mu.Unlock()
		return nil
	}
	before := db.seq
	err := db.discardLocked()
	var colls []string
	if before != db.seq {
		colls = db.collNamesLocked()
	}
	db.mu.Unlock()
	// Told even with no collection: the Seq jumped, and a subscriber that
	// counts Seqs (the change stream) must hear of it.
	db.tell(0, colls)
	return err
}

// Refused is told the log refused a write made by the memory named mark
// (a cluster's node skips an entry of an earlier term: docs/cluster.md, A
// leader that loses its term). If that memory is this one, it holds a
// write the log will never have, and every write it makes from now on
// would rest on it: it is rebuilt from the file, as Discard does.
func (db *DB) Refused(mark uint64) error { return db.discardIf(false, mark) }

// discardLocked rebuilds memory from the file when memory is ahead of it.
// Memory gets a new mark either way, so a write proposed before is
// applied as a foreign one if the log commits it after all.
func (db *DB) discardLocked() error {
	db.setMark(newMark())
	if db.seq == db.repl.stored {
		return nil
	}
	if err := db.st.Close(); err != nil {
		db.setBroken(err)
		return err
	}
	return db.reopenLocked()
}

// reopenLocked opens the closed store's file again and rebuilds memory
// from it.
func (db *DB) reopenLocked() error {
	st, err := store.Open(db.opts.File, db.storeOptions())
	if err != nil {
		db.setBroken(err)
		return err
	}
	db.useStore(st)
	db.st.Detach() // a cluster node's store, as SetReplicator made it
	db.colls, db.created, db.made, db.meta, db.metaB, db.metaKinds, db.pending = map[string]*Collection{}, map[string]uint64{}, 0, map[string]Meta{}, 0, map[string]metaUse{}, nil
	if db.ev != nil {
		// Not given a limit by cmd/fenec, but kept right for an engine
		// that is: rows evicted from now on are read from the new file.
		db.ev.src, db.ev.loading = st, true
	}
	seq, err := db.load(st)
	if err != nil {
		db.setBroken(err)
		return err
	}
	db.loadedForEviction(seq)
	db.seq, db.repl.stored = seq, seq
	db.moved(seq)
	return nil
}

// moved publishes seq to WaitSeq's waiters.
func (db *DB) moved(seq uint64) {
	db.repl.applied.Store(seq)
	if db.repl.waiters.Load() == 0 {
		return
	}
	db.repl.seqMu.Lock()
	if db.repl.seqCh != nil {
		close(db.repl.seqCh)
		db.repl.seqCh = nil
	}
	db.repl.seqMu.Unlock()
}

// WaitSeq waits until this node's memory holds write seq (a Fenec-Seq a
// client was answered, possibly by another node), or ctx ends.
func (db *DB) WaitSeq(ctx context.Context, seq uint64) error {
	if db.repl.r == nil {
		if db.Seq() >= seq {
			return nil
		}
		<-ctx.Done() // a lone server never reaches a seq it has not made
		return ctx.Err()
	}
	db.repl.waiters.Add(1)
	defer db.repl.waiters.Add(-1)
	for {
		db.repl.seqMu.Lock()
		if db.repl.applied.Load() >= seq {
			db.repl.seqMu.Unlock()
			return nil
		}
		if db.repl.seqCh == nil {
			db.repl.seqCh = make(chan struct{})
		}
		ch := db.repl.seqCh
		db.repl.seqMu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// MetaRecord is a side record with its key.
type MetaRecord struct {
	Key string
	Meta
}

// MetaWithPrefix returns the side records whose keys start with prefix.
func (db *DB) MetaWithPrefix(prefix string) []MetaRecord {
	db.mu.RLock()
	defer db.mu.RUnlock()
	var out []MetaRecord
	for k, m := range db.meta {
		if strings.HasPrefix(k, prefix) {
			out = append(out, MetaRecord{Key: k, Meta: m})
		}
	}
	return out
}

// Backup writes a copy of the file as the log has committed it to path:
// a cluster node's snapshot. It is called between two Applies, so the
// store is handed nothing meanwhile.
func (db *DB) Backup(ctx context.Context, path string) (seq uint64, err error) {
	db.mu.RLock()
	seq = db.repl.stored
	db.mu.RUnlock()
	return seq, db.st.Backup(ctx, path)
}

// Restore replaces the file with the copy at path (a snapshot another
// node made) and rebuilds memory from it.
func (db *DB) Restore(path string) error {
	db.lock()
	err := db.restoreLocked(path)
	colls := db.collNamesLocked()
	db.mu.Unlock()
	// Told even with no collection: the Seq jumped, and a subscriber that
	// counts Seqs (the change stream) must hear of it.
	db.tell(0, colls)
	return err
}

// collNamesLocked returns the names of every collection in memory: those
// a rebuild of memory may have changed. Under the write lock.
func (db *DB) collNamesLocked() []string {
	var colls []string
	for name := range db.colls {
		colls = append(colls, name)
	}
	return colls
}

func (db *DB) restoreLocked(path string) error {
	db.setMark(newMark())
	if err := db.st.Close(); err != nil {
		db.setBroken(err)
		return err
	}
	for _, suffix := range []string{"-wal", "-shm"} {
		if err := os.Remove(db.opts.File + suffix); err != nil && !errors.Is(err, os.ErrNotExist) {
			db.setBroken(err)
			return err
		}
	}
	if err := os.Rename(path, db.opts.File); err != nil {
		db.setBroken(err)
		return err
	}
	db.repl.stored = 0
	db.seq = 0
	return db.reopenLocked()
}

// ErrNoFile is Copy's answer on a database that keeps nothing (":memory:").
var ErrNoFile = errors.New("this server keeps no file (--file :memory:): there is nothing to back up")

// Copy writes a consistent copy of the file to a new temporary file beside
// it while writes go on (store.Store.Copy), and returns its path and the
// seq it holds: every write answered before the call. The caller removes
// the file. On a cluster node it is the state this node has applied.
func (db *DB) Copy(ctx context.Context, progress func(done, total int)) (path string, seq uint64, err error) {
	if !db.keep {
		return "", 0, ErrNoFile
	}
	tmp, err := os.CreateTemp(filepath.Dir(db.opts.File), filepath.Base(db.opts.File)+".backup-*")
	if err != nil {
		return "", 0, err
	}
	path = tmp.Name()
	tmp.Close()
	db.mu.RLock()
	st := db.st
	db.mu.RUnlock()
	if seq, err = st.Copy(ctx, path, progress); err != nil {
		os.Remove(path)
		return "", 0, err
	}
	return path, seq, nil
}
