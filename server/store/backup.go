package store

import (
	"context"
	"errors"
	"fmt"
)

// Backup writes a consistent copy of the file, holding every unit
// committed before the call, to path (SQLite's VACUUM INTO: the pages as
// one transaction sees them, compacted). A cluster node's snapshot is this
// copy (docs/cluster.md). The caller commits nothing meanwhile.
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
	s.wmu.Lock()
	defer s.wmu.Unlock()
	if _, err := s.conn.ExecContext(ctx, `VACUUM INTO ?`, path); err != nil {
		return fmt.Errorf("store: backup to %s: %w", path, err)
	}
	return nil
}
