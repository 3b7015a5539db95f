package engine

import (
	"github.com/fenecdb/fenec/server/store"
)

// The engine owns "a write happened, and may wake someone": every write
// that changes memory (a statement's, a batch's, a cluster log's entry,
// an undo) and every group the store makes durable is told here, and only
// here, to whoever subscribed — the held claims (wait), the metrics, a
// change stream. None of them is called otherwise: the engine knows none
// of them (docs/architecture.md, "The wait path"). The one told under the
// write lock instead is the journal (Journal, below), whose side records
// commit with the write.

// Topic is what a Write event tells of: a subscriber names the topics it
// wants.
type Topic uint8

const (
	// Written: a write changed memory (readers now see it), before its
	// wait for the store; or memory was undone or rebuilt.
	Written Topic = 1 << iota
	// Stored: the store made a group of writes durable (store.Event).
	Stored
)

// Write is what a subscriber is told: a write in memory (Written), or a
// group of writes made durable (Stored).
type Write struct {
	Topic Topic
	// Seq is the write's position: Written, the write's seq (0 when memory
	// was undone or rebuilt); Stored, the seq of the group's last write.
	// Stored events come in Seq order; a database in memory (":memory:")
	// makes none.
	Seq   uint64
	Colls []string // the collections it changed
	// Local: told on the goroutine of a write a caller made on a database
	// alone, before it is answered, with no lock of the database held: the
	// subscriber may read and write the database before it returns, and
	// the write's answer waits for it. Never on a cluster node (a write
	// there waits for the cluster's log, which may be the very goroutine
	// telling: replica.go), nor for an undo. Written only.
	Local bool
	// Joins: Local, under --sync always, before the write waits for the
	// store: a write the subscriber makes now goes into the same group of
	// the store as this one (unless another write has started writing
	// that group meanwhile), so one sync makes both durable.
	Joins bool
	// Stored is the store's event: the group's changes (read during the
	// call only), how long its write took, whether a sync ended with it.
	// Stored only.
	Stored store.Event
	// Changes is what a Written write wrote, as the store has it (nil for
	// an undo or a rebuild of memory, which may have changed any row of
	// Colls). Every numbered write is told once, one that changed only
	// side records too (with no Colls), though two writers may tell theirs
	// out of order. Changes (and their bodies) are the writer's: a
	// subscriber copies what it keeps before it returns. Written only.
	Changes []store.Change
}

// Subscribe has fn told of the events of the given topics (none given:
// Written) from now on, once the write lock is released, until the
// unsubscribe it returns is called. Any number may subscribe. fn runs on
// the goroutine that made the event (the writer's, or the store's that
// made a group durable), so unless a Written event is Local it returns
// quickly and takes no lock of the database.
func (db *DB) Subscribe(fn func(Write), topics ...Topic) (unsubscribe func()) {
	want := Written
	if len(topics) > 0 {
		want = 0
		for _, k := range topics {
			want |= k
		}
	}
	var stops []func()
	if want&Written != 0 {
		stops = append(stops, db.onWritten.Add(fn))
	}
	if want&Stored != 0 {
		stops = append(stops, db.onStored.Add(fn))
	}
	return func() {
		for _, stop := range stops {
			stop()
		}
	}
}

// tell tells the Written subscribers of a write to colls made elsewhere
// (a cluster node's log, an undo): not Local.
func (db *DB) tell(seq uint64, colls []string) {
	db.onWritten.Tell(Write{Topic: Written, Seq: seq, Colls: colls})
}

// storeEvent is the engine's subscription to its store (useStore): a
// commit goes on to the Stored subscribers, a failure to storeFailed.
func (db *DB) storeEvent(e store.Event) {
	if e.Failed != nil {
		db.storeFailed(e.Failed)
		return
	}
	if db.onStored.Any() {
		db.onStored.Tell(Write{Topic: Stored, Seq: e.Seq, Colls: e.Colls(), Stored: e})
	}
}

// useStore makes st the database's store, subscribed to (storeEvent) in
// place of the one before, if any: at Open, and when a cluster node
// reopens its file (replica.go).
func (db *DB) useStore(st *store.Store) {
	if db.stUnsubscribe != nil {
		db.stUnsubscribe()
	}
	db.st = st
	db.stUnsubscribe = st.Subscribe(db.storeEvent)
}

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
