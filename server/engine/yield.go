package engine

import (
	"errors"
	"time"
)

// A read runs under the read lock, and Go's RWMutex holds every new reader
// back once a writer waits for the lock: a read that runs for seconds would
// hold up that writer and, behind it, every other request. So a read that
// has held the lock for its slice lets a waiting writer in (yield): it
// lets go of the lock, takes it again once the writer is done, and goes on
// if no collection it has read from was changed meanwhile — its iterators
// and the rows it holds are then still those of one state of the database.
// If one was, the run is thrown away and the read starts again from the
// top, with a slice twice as long: a long read on a collection written
// without pause still finishes, after a few restarts, and a writer waits
// at most one slice (docs/http.md, Statement time limits).
const firstSlice = 10 * time.Millisecond

// errMoved stops a read whose collections a writer changed while it had
// let go of the lock; run starts it again.
var errMoved = errors.New("engine: a read's collections changed while it yielded")

// reader is a running read's hold on the lock: since when it holds it,
// for how long it may before letting a waiting writer in, and the
// collections it has read from with their change counts.
type reader struct {
	db    *DB
	since time.Time
	slice time.Duration
	read  []readColl
}

type readColl struct {
	c   *Collection
	gen uint64
}

// saw notes that the read reads c.
func (r *reader) saw(c *Collection) {
	for _, rc := range r.read {
		if rc.c == c {
			return
		}
	}
	r.read = append(r.read, readColl{c: c, gen: c.gen})
}

// due reports whether a writer waits and the read has held the lock for
// its slice. The writer's count is one atomic load: it is asked for
// every row.
func (r *reader) due() bool {
	return r != nil && r.db.writers.Load() > 0 && time.Since(r.since) >= r.slice
}

// yield lets the waiting writers in and takes the read lock again; it
// returns errMoved if a collection the read has read from changed (or was
// dropped) meanwhile.
func (r *reader) yield() error {
	r.db.mu.RUnlock()
	// The writer waiting holds new readers back, this one too: it runs
	// first.
	r.db.mu.RLock()
	r.since = time.Now()
	for _, rc := range r.read {
		if r.db.colls[rc.c.Name] != rc.c || rc.c.gen != rc.gen {
			return errMoved
		}
	}
	return nil
}

// lock takes the write lock, counted while it waits so that a long read
// lets it in (reader.due).
func (db *DB) lock() {
	db.writers.Add(1)
	db.mu.Lock()
	db.writers.Add(-1)
}

// setBroken sets the store's failure (nil: it works), kept too where
// StoreErr reads it without the lock: GET /_health must not wait on a
// write or a read.
func (db *DB) setBroken(err error) {
	db.broken = err
	if err == nil {
		db.brokenNow.Store(nil)
	} else {
		db.brokenNow.Store(&err)
	}
}
