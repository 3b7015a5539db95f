package store

import (
	"context"
	"errors"
	"fmt"
)

// Backup writes a consistent copy of the file, holding every unit
// committed before the call, to path (SQLite's VACUUM INTO: the pages as
// one transaction sees them, compacted). A cluster node's snapshot is this
// copy (docs/cluster.md). The copy is the SQLite file alone: the log is
// folded into the tables first, so the copy needs no segments. The caller
// commits nothing meanwhile.
func (s *Store) Backup(ctx context.Context, path string) error {
	if s.mem {
		return errors.New("store: a :memory: store has no file to copy")
	}
	s.mu.Lock()
	if s.failed != nil {
		err := s.failed
		s.mu.Unlock()
		return err
	}
	g, units := s.cur, s.cur.units
	s.mu.Unlock()
	if units > 0 {
		if err := s.flush(g); err != nil {
			return err
		}
	}
	// Groups made durable by other leaders are handed to the folds before
	// their pipeline stage ends (doneLocked).
	s.mu.Lock()
	for s.writing || s.syncing || len(s.unsynced) > 0 {
		s.waitChange()
	}
	s.mu.Unlock()
	s.wmu.Lock()
	defer s.wmu.Unlock()
	for {
		more, err := s.foldLog()
		if err != nil {
			return fmt.Errorf("store: backup to %s: folding the log: %w", path, err)
		}
		if !more {
			break
		}
	}
	if _, err := s.conn.ExecContext(ctx, `VACUUM INTO ?`, path); err != nil {
		return fmt.Errorf("store: backup to %s: %w", path, err)
	}
	return nil
}
