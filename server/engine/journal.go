package engine

import "github.com/fenecdb/fenec/server/store"

// Journal is asked, under the write lock, once every statement of a write
// has succeeded, with the position the write takes and its changes; the
// side records it returns to put and the keys it returns to delete are
// committed in the same unit as the write, so they exist exactly when the
// write does — on disk, after a restart, and on every node of a cluster.
// The change stream keeps the changes its consumers still need this way
// (docs/changes.md, Across a restart). It must be quick and must not
// touch the database: every write waits for it.
type Journal func(seq uint64, changes []store.Change) (put map[string]Meta, del []string)

// SetJournal makes j the database's journal (nil: none).
func (db *DB) SetJournal(j Journal) {
	if j == nil {
		db.journal.Store(nil)
		return
	}
	db.journal.Store(&j)
}

// journalLocked adds the journal's records to the write in t.
func (db *DB) journalLocked(t *tx) {
	j := db.journal.Load()
	if j == nil || len(t.changes) == 0 {
		return
	}
	put, del := (*j)(db.seq+1, t.changes)
	for _, k := range del {
		t.deleteMeta(k)
	}
	if len(put) > 0 {
		t.putMeta(put)
	}
}
