package engine

import (
	"runtime"
	"sync"
	"sync/atomic"

	"github.com/fenecdb/fenec/server/store"
)

// Loading a file (Open, and a cluster node's reopen) is three kinds of
// work per document: SQLite reading the row, decoding its JSON into a Doc,
// and setting the Doc in its collection and indexes. Decoding is the
// largest share (about half the load's CPU at a million jobs), and each
// row's decoding depends only on the row and its collection's schema. So
// the store reads rows on the goroutine that opened the file, decoders
// decode them in batches on as many goroutines as there are CPUs, and one
// applier sets them, in the order the store read them: the file rebuilds
// exactly as it would one row at a time (store.Load's order), in a
// fraction of the time on more than one core.
//
// Deletes and side records (the log's, after a crash) go through the
// applier too, in their place among the puts; a collection made or
// dropped waits for every change before it to be applied, then runs on
// the store's goroutine, as replay runs it.

// loadBatchRows is how many changes a batch carries: enough that handing a
// batch from goroutine to goroutine costs little per row, few enough that
// the batches in flight hold little memory.
const loadBatchRows = 256

// loadInFlight bounds the batches read but not yet set, per decoder.
const loadInFlight = 4

// loadBatch is a run of changes, as read and then decoded: docs[i] is
// changes[i]'s document, nil for a change that is not a put. barrier, when
// set, is closed by the applier once every batch before it is applied.
type loadBatch struct {
	colls   []*Collection
	changes []store.Change
	docs    []*Doc
	err     error // the first row that did not decode; the changes before it are applied
	decoded chan struct{}
	barrier chan struct{}
}

// loader runs one load's pipeline.
type loader struct {
	db      *DB
	cur     *loadBatch
	todo    chan *loadBatch // to the decoders
	order   chan *loadBatch // to the applier, in the order read
	free    chan *loadBatch // set batches, for reuse
	workers sync.WaitGroup
	applied chan struct{} // closed when the applier returns
	failed  atomic.Pointer[error]
	// est is the estimated bytes loaded so far, under a memory limit
	// (Collection.evictLoaded); the applier's.
	est int64
}

// load rebuilds memory from st (store.Load) through a loader.
func (db *DB) load(st *store.Store) (uint64, error) {
	l := db.newLoader()
	seq, err := st.Load(l.replay)
	if lerr := l.close(); err == nil {
		err = lerr
	}
	if err == nil {
		for _, c := range db.colls {
			c.compact()
		}
	}
	return seq, err
}

func (db *DB) newLoader() *loader {
	n := runtime.GOMAXPROCS(0)
	l := &loader{
		db:      db,
		todo:    make(chan *loadBatch, n*loadInFlight),
		order:   make(chan *loadBatch, n*loadInFlight),
		free:    make(chan *loadBatch, n*loadInFlight+2),
		applied: make(chan struct{}),
	}
	l.workers.Add(n)
	for range n {
		go l.decode()
	}
	go l.apply()
	return l
}

// replay is store.Load's fn. A put, a delete and a side record join the
// current batch, applied in order by the applier; a collection made or
// dropped (which changes the collections this goroutine looks rows' up
// in) waits for every change before it and runs here, as DB.replay runs
// it.
func (l *loader) replay(ch store.Change) error {
	if p := l.failed.Load(); p != nil {
		return *p
	}
	var c *Collection
	switch ch.Op {
	case store.OpPut, store.OpDelete:
		if c = l.db.colls[ch.Coll]; c == nil {
			// As DB.replay refuses it, once the changes before it are
			// applied.
			if err := l.flush(); err != nil {
				return err
			}
			return l.db.replay(ch)
		}
	case store.OpMetaPut, store.OpMetaDelete:
	default:
		if err := l.flush(); err != nil {
			return err
		}
		return l.db.replay(ch)
	}
	if l.cur == nil {
		l.cur = l.batch()
	}
	b := l.cur
	b.colls = append(b.colls, c)
	b.changes = append(b.changes, ch)
	if len(b.changes) == loadBatchRows {
		l.send(b)
		l.cur = nil
	}
	return nil
}

// batch returns an empty batch, a set one when there is one.
func (l *loader) batch() *loadBatch {
	select {
	case b := <-l.free:
		return b
	default:
		return &loadBatch{changes: make([]store.Change, 0, loadBatchRows), colls: make([]*Collection, 0, loadBatchRows), docs: make([]*Doc, 0, loadBatchRows)}
	}
}

// send hands b to the applier, then to the decoders: the applier takes
// batches in the order sent, each once decoded. The order channel is sent
// first, so that a full pipeline blocks the store's goroutine here, never
// a decoder or the applier.
func (l *loader) send(b *loadBatch) {
	b.decoded = make(chan struct{})
	l.order <- b
	l.todo <- b
}

// flush sends the current batch and waits until every change read so far
// is applied; it returns the load's first error.
func (l *loader) flush() error {
	if l.cur != nil {
		l.send(l.cur)
		l.cur = nil
	}
	b := &loadBatch{barrier: make(chan struct{})}
	l.send(b)
	<-b.barrier
	if p := l.failed.Load(); p != nil {
		return *p
	}
	return nil
}

// close sets what is left, stops the goroutines and returns the load's
// first error.
func (l *loader) close() error {
	if l.cur != nil {
		l.send(l.cur)
		l.cur = nil
	}
	close(l.todo)
	close(l.order)
	l.workers.Wait()
	<-l.applied
	if p := l.failed.Load(); p != nil {
		return *p
	}
	return nil
}

// decode is a decoder: it decodes each batch's rows. Decoding reads only
// the collection's schema (Collection.decodeDoc), which no put changes,
// so decoders run beside each other and beside the applier.
func (l *loader) decode() {
	defer l.workers.Done()
	for b := range l.todo {
		b.docs = b.docs[:0]
		if l.failed.Load() == nil {
			for i, ch := range b.changes {
				var d *Doc // nil: not a put
				if ch.Op == store.OpPut {
					var err error
					if d, err = b.colls[i].decodeDoc(ch.Body); err != nil {
						b.err = err
						break
					}
				}
				b.docs = append(b.docs, d)
			}
		}
		close(b.decoded)
	}
}

// apply is the applier: it applies each batch's changes in order, then
// hands the batch back for reuse.
func (l *loader) apply() {
	defer close(l.applied)
	for b := range l.order {
		<-b.decoded
		if b.barrier != nil {
			close(b.barrier)
			continue
		}
		if l.failed.Load() == nil {
			err := b.err
			for i, d := range b.docs {
				switch ch := b.changes[i]; {
				case d != nil && ch.InTables && b.colls[i].ev != nil:
					// A row as the tables hold it: not dirty, and
					// evicted at once once the limit's share is loaded.
					c := b.colls[i]
					c.ev.clean = true
					c.set(d)
					c.ev.clean = false
					c.evictLoaded(d, &l.est)
				case d != nil:
					b.colls[i].set(d)
				case ch.Op == store.OpDelete:
					b.colls[i].delete(ch.ID)
				default: // a side record
					if rerr := l.db.replay(ch); rerr != nil {
						err = rerr
					}
				}
				if err != nil && err != b.err {
					break
				}
			}
			if err != nil {
				l.failed.Store(&err)
			}
		}
		clear(b.changes)
		clear(b.colls)
		clear(b.docs)
		b.changes, b.colls, b.docs, b.err = b.changes[:0], b.colls[:0], b.docs[:0], nil
		select {
		case l.free <- b:
		default:
		}
	}
}
