// Loading: reading the log's segments at open, and Load, which hands the
// persisted state and the unfolded log back to the engine.

package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
)

// openLog reads the log's segments (checking them, and cutting off a torn
// tail) and keeps the records after folded_seq for Load.
func (s *Store) openLog() error {
	if err := s.conn.QueryRowContext(context.Background(), `SELECT value FROM state WHERE key = 'folded_seq'`).Scan(&s.folded); err != nil {
		return fmt.Errorf("store: open %s: %w", s.path, err)
	}
	s.foldedTo.Store(s.folded)
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

// Load calls fn with the persisted state, in an order that rebuilds it
// exactly: for each live collection in creation order, an OpCreate (ID = its
// next id) then an OpPut per document in ascending id; then an OpMetaPut per
// meta record (by key); then the logged changes not yet folded, in commit
// order, as they were committed. It must be called once, after Open and
// before any Commit, and returns the last committed seq. fn may keep a
// change's Body past its return (the engine decodes them on other
// goroutines): the store never writes over one.
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
		// Scanned into variables of the whole query, not into each row's
		// Change: Scan's pointers would move every Change to the heap.
		var id int64
		var raw sql.RawBytes
		var slab []byte
		err := query(ctx, s.conn, `SELECT id, body FROM docs WHERE coll = ? ORDER BY id`, func(r *sql.Rows) error {
			if err := r.Scan(&id, &raw); err != nil {
				return err
			}
			d := Change{Op: OpPut, Coll: c.Coll, ID: id, InTables: true}
			if raw != nil {
				d.Body, slab = cutBody(slab, raw)
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
	var rows []logRecord
	err = query(ctx, s.conn, `SELECT seq, body FROM log ORDER BY seq`, func(r *sql.Rows) error {
		var rowSeq int64
		var body []byte
		if err := r.Scan(&rowSeq, &body); err != nil {
			return err
		}
		rows = append(rows, logRecord{seq: uint64(rowSeq), body: body})
		return nil
	})
	if err != nil {
		return 0, err
	}
	seq := s.folded
	for i, r := range append(rows, s.replay...) {
		row := i < len(rows) // a version 1 row: no record head, and the table orders it
		size := len(r.body) + recordHead
		if row {
			size = len(r.body)
		} else if r.seq <= seq {
			return 0, fmt.Errorf("store: %s: the log holds seq %d after seq %d", s.path, r.seq, seq)
		}
		var changes []Change
		err := decodeChanges(r.body, func(c Change) error {
			changes = append(changes, c)
			return fn(c)
		})
		if errors.Is(err, errCorrupt) && row {
			return 0, fmt.Errorf("store: log row %d: %w", r.seq, err)
		}
		if errors.Is(err, errCorrupt) {
			return 0, fmt.Errorf("store: %s: log record of seq %d: %w", s.path, r.seq, err)
		}
		if err != nil {
			return 0, err
		}
		seq = r.seq
		s.fmu.Lock()
		s.addFold(changes, seq, size)
		s.fmu.Unlock()
	}
	s.replay = nil
	return seq, nil
}

// loadSlab is the size of the blocks documents' bodies are copied into as
// they are read: one allocation for a few hundred rows rather than one
// each, on the path a restart waits on. A block is never reused; it is
// garbage once the engine has decoded its rows.
const loadSlab = 64 << 10

// cutBody copies b into slab (a new block when it has no room) and returns
// the copy, capped so that appending to it cannot reach the next body,
// and the slab. database/sql would copy b into an allocation of its own;
// read as RawBytes, the driver's buffer is copied once, here.
func cutBody(slab, b []byte) (body, rest []byte) {
	if len(b) > cap(slab)-len(slab) {
		slab = make([]byte, 0, max(loadSlab, len(b)))
	}
	n := len(slab)
	slab = append(slab, b...)
	return slab[n:len(slab):len(slab)], slab
}
