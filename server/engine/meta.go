package engine

import (
	"context"
	"errors"
	"strings"

	"github.com/fenecdb/fenec/server/store"
)

// Meta is a small side record kept beside the documents and committed with
// the write it belongs to: the HTTP layer keeps idempotency keys as these.
type Meta struct {
	Body    []byte
	Expires int64 // unix ms; 0: never
}

// GetMeta returns a side record.
func (db *DB) GetMeta(key string) (Meta, bool) {
	db.mu.RLock()
	defer db.mu.RUnlock()
	m, ok := db.meta[key]
	return m, ok
}

// GetMetaCommitted returns a side record as GetMeta does, with the last
// write of memory, at that same moment, that is committed: on a cluster's
// leader memory may hold writes it proposed, and the records they made,
// that the log has not committed yet — and, if the leader loses its term
// before it discards them, never will (docs/cluster.md, A leader that
// loses its term). A record made by a later write than committed must not
// be taken as done. On a lone server it is the last write memory holds.
func (db *DB) GetMetaCommitted(key string) (m Meta, ok bool, committed uint64) {
	db.mu.RLock()
	defer db.mu.RUnlock()
	m, ok = db.meta[key]
	if db.repl.r == nil {
		return m, ok, db.seq
	}
	return m, ok, db.repl.stored
}

// MetaLen returns how many side records are held.
func (db *DB) MetaLen() int {
	db.mu.RLock()
	defer db.mu.RUnlock()
	return len(db.meta)
}

// MetaBytes returns the bytes of the side records held (keys and bodies).
func (db *DB) MetaBytes() int64 {
	db.mu.RLock()
	defer db.mu.RUnlock()
	return db.metaB
}

// MetaUse returns how many side records of a kind are held, and their
// bytes (keys and bodies). A record's kind is its key up to the first ':'
// ("idem" for an Idempotency-Key's, "changelog" for the change stream's):
// each owner bounds its own records, and counts only them.
func (db *DB) MetaUse(kind string) (n int, bytes int64) {
	db.mu.RLock()
	defer db.mu.RUnlock()
	u := db.metaKinds[kind]
	return u.n, u.bytes
}

// metaUse is the count and bytes of one kind of side record.
type metaUse struct {
	n     int
	bytes int64
}

func metaKind(k string) string {
	kind, _, _ := strings.Cut(k, ":")
	return kind
}

func (db *DB) countMeta(k string, body []byte, sign int) {
	size := int64(len(k) + len(body))
	db.metaB += int64(sign) * size
	kind := metaKind(k)
	u := db.metaKinds[kind]
	u.n += sign
	u.bytes += int64(sign) * size
	if u.n == 0 {
		delete(db.metaKinds, kind)
		return
	}
	db.metaKinds[kind] = u
}

// SweepMeta deletes every side record expired at now, and returns how
// many. It is a write like any other (commit): refused while the store is
// failed, undone if the store loses it.
func (db *DB) SweepMeta(ctx context.Context, now int64) (int, error) {
	n := 0
	_, err := db.commit(ctx, func(t *tx) ([]*Result, error) {
		for k, m := range db.meta {
			if m.Expires != 0 && m.Expires <= now {
				t.deleteMeta(k)
				n++
			}
		}
		return nil, nil
	})
	var nl *NotLeaderError
	if errors.As(err, &nl) {
		// A cluster's followers drop expired records when the leader's
		// sweep reaches them through the log (docs/cluster.md).
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	return n, nil
}

func (db *DB) setMeta(k string, m Meta) {
	db.deleteMeta(k)
	db.meta[k] = m
	db.countMeta(k, m.Body, +1)
}

func (db *DB) deleteMeta(k string) {
	if old, ok := db.meta[k]; ok {
		db.countMeta(k, old.Body, -1)
		delete(db.meta, k)
	}
}

func (t *tx) putMeta(recs map[string]Meta) {
	for k, m := range recs {
		old, had := t.db.meta[k]
		t.db.setMeta(k, m)
		t.undo = append(t.undo, undoStep{rare: &rareStep{metaKey: k, oldMeta: old, hadMeta: had}})
		t.changes = append(t.changes, store.Change{Op: store.OpMetaPut, Key: k, Body: m.Body, Expires: m.Expires})
	}
}

func (t *tx) deleteMeta(k string) {
	old, had := t.db.meta[k]
	if !had {
		return
	}
	t.db.deleteMeta(k)
	t.undo = append(t.undo, undoStep{rare: &rareStep{metaKey: k, oldMeta: old, hadMeta: true}})
	t.changes = append(t.changes, store.Change{Op: store.OpMetaDelete, Key: k})
}
