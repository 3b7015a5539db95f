// Reading documents back from the tables: what an engine that evicted a
// row from memory (docs/architecture.md, "Memory") reads it back with.

package store

import (
	"context"
	"errors"
	"strings"
)

// readBatch is the most ids one ReadDocs query asks for: SQLite binds at
// most 32766 parameters, and a page of the engine's id map is 256 rows.
const readBatch = 256

// FoldedSeq returns the last seq every change up to which is in the
// tables: a document whose last change has a seq at most this is, in the
// docs table, exactly as that change left it, and stays so until a later
// change to it is folded. 0 for a ":memory:" store (which keeps nothing).
// It takes no lock.
func (s *Store) FoldedSeq() uint64 {
	if s.mem {
		return 0
	}
	return s.foldedTo.Load()
}

// ErrNoTables is ReadDocs' error on a ":memory:" store.
var ErrNoTables = errors.New("store: a :memory: store keeps no documents to read back")

// ReadDocs reads the documents of coll with the given ids from the docs
// table, as the folds left it, and calls fn with each one found (in id
// order within each query of up to readBatch ids; an id not in the table
// is left out). body is valid only during the call.
//
// The contract: ReadDocs answers the tables, not the log, so it gives a
// document's current version only when every change to it is folded
// (FoldedSeq at or past its last change's seq); the caller keeps any
// document written since in memory. It runs on the store's one
// connection under the writer's lock (wmu), taken a query of readBatch
// ids at a time, so it waits for a group write, one fold chunk or one
// backup step, never for a sync, and a write waits for one query; it may be
// called from any goroutine once Load has returned, and from Load's fn
// while Load replays the log (the tables' queries are closed by then).
func (s *Store) ReadDocs(coll string, ids []int64, fn func(id int64, body []byte)) error {
	if s.mem {
		return ErrNoTables
	}
	ctx := context.Background()
	args := make([]any, 0, 1+min(len(ids), readBatch))
	var q strings.Builder
	for len(ids) > 0 {
		n := min(len(ids), readBatch)
		args = append(args[:0], coll)
		q.Reset()
		q.WriteString(`SELECT id, body FROM docs WHERE coll = ? AND id IN (?`)
		args = append(args, ids[0])
		for _, id := range ids[1:n] {
			q.WriteString(",?")
			args = append(args, id)
		}
		q.WriteString(`) ORDER BY id`)
		var id int64
		var body []byte
		// The writer's lock is taken a query at a time, so a group write
		// waits for at most one query of readBatch rows, not a whole read.
		s.wmu.Lock()
		s.mu.Lock()
		closed := s.closed
		s.mu.Unlock()
		err := ErrClosed
		if !closed {
			err = queryRead(ctx, s, q.String(), args, func() error {
				fn(id, body)
				return nil
			}, &id, &body)
		}
		s.wmu.Unlock()
		if err != nil {
			return err
		}
		ids = ids[n:]
	}
	return nil
}

// queryRead runs q on the store's connection and calls each after
// scanning every row into dst.
func queryRead(ctx context.Context, s *Store, q string, args []any, each func() error, dst ...any) error {
	rows, err := s.conn.QueryContext(ctx, q, args...)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		if err := rows.Scan(dst...); err != nil {
			return err
		}
		if err := each(); err != nil {
			return err
		}
	}
	return rows.Err()
}

// Fold folds every change made durable so far into the tables, whole,
// now rather than at the committer's next turn: tests use it to make rows
// evictable (FoldedSeq) without waiting for the fold's age. A failed
// store folds nothing (its error is returned).
func (s *Store) Fold() error {
	if s.mem {
		return nil
	}
	s.wmu.Lock()
	defer s.wmu.Unlock()
	s.mu.Lock()
	loaded, closed, failed := s.loaded, s.closed, s.failed
	s.mu.Unlock()
	switch {
	case closed:
		return ErrClosed
	case failed != nil:
		return failed
	case !loaded:
		return nil
	}
	return s.foldPending()
}
