package engine

import (
	"context"

	"github.com/fenecdb/fenec/server/store"
)

// Meta is a small side record kept beside the documents and committed with
// the write it belongs to: the HTTP layer keeps idempotency keys as these.
type Meta struct {
	Body    []byte
	Expires int64 // unix ms; 0: never
}

// RunOptions add to a request's run.
type RunOptions struct {
	// Meta is called under the write lock once every statement has
	// succeeded; the records it answers are committed in the same unit as
	// the write, so they exist exactly when the write does.
	Meta func(rs []*Result) map[string]Meta
	// OnlyIfTakes undoes a request whose set and del statements take no
	// row — even one refused only by its require — and answers
	// ErrNothingTaken: a held claim stays held.
	OnlyIfTakes bool
}

// GetMeta answers a side record.
func (db *DB) GetMeta(key string) (Meta, bool) {
	db.mu.RLock()
	defer db.mu.RUnlock()
	m, ok := db.meta[key]
	return m, ok
}

// MetaLen answers how many side records are held.
func (db *DB) MetaLen() int {
	db.mu.RLock()
	defer db.mu.RUnlock()
	return len(db.meta)
}

// SweepMeta deletes every side record expired at now, and answers how many.
func (db *DB) SweepMeta(ctx context.Context, now int64) (int, error) {
	db.mu.Lock()
	if db.writable() != nil {
		// A cluster's followers drop expired records when the leader's
		// sweep reaches them through the log.
		db.mu.Unlock()
		return 0, nil
	}
	var changes []store.Change
	for k, m := range db.meta {
		if m.Expires != 0 && m.Expires <= now {
			delete(db.meta, k)
			changes = append(changes, store.Change{Op: store.OpMetaDelete, Key: k})
		}
	}
	if len(changes) == 0 {
		db.mu.Unlock()
		return 0, nil
	}
	wait := db.commitLocked(changes)
	db.mu.Unlock()
	return len(changes), wait()
}

func (t *tx) putMeta(recs map[string]Meta) {
	for k, m := range recs {
		old, had := t.db.meta[k]
		t.db.meta[k] = m
		t.undo = append(t.undo, undoStep{metaKey: k, oldMeta: old, hadMeta: had})
		t.changes = append(t.changes, store.Change{Op: store.OpMetaPut, Key: k, Body: m.Body, Expires: m.Expires})
	}
}
