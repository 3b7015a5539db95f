package store

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"time"

	"modernc.org/sqlite"
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
	if err := s.foldPending(); err != nil {
		return fmt.Errorf("store: backup to %s: folding the log: %w", path, err)
	}
	if _, err := s.conn.ExecContext(ctx, `VACUUM INTO ?`, path); err != nil {
		return fmt.Errorf("store: backup to %s: %w", path, err)
	}
	return nil
}

// Copy writes a consistent copy of the file to path while commits go on,
// and returns the seq it holds: every unit committed before the call, and
// maybe some after, never part of a unit. Unlike Backup it does not hold
// the writer for the whole copy: it waits for the units committed before
// the call to be durable and folds the log up to them, then copies the
// file with SQLite's online backup a few pages at a time, releasing the
// writer between steps. The folds made meanwhile go through the same
// connection, which SQLite then writes into the copy too, so the copy ends
// as the file is at the last step (a unit folded or not, whole). It holds
// the writer at most about half of its time, so commits go on at some
// speed. The copy is not synced. progress, if set, is told the pages
// copied and the pages in all after each step.
func (s *Store) Copy(ctx context.Context, path string, progress func(done, total int)) (uint64, error) {
	if s.mem {
		return 0, errors.New("store: a :memory: store has no file to copy")
	}
	s.mu.Lock()
	if s.failed != nil {
		err := s.failed
		s.mu.Unlock()
		return 0, err
	}
	target := s.lastSeq
	g, units := s.cur, s.cur.units
	s.mu.Unlock()
	if units > 0 {
		if err := s.flush(g); err != nil {
			return 0, err
		}
	}
	s.mu.Lock()
	for s.durable < target && s.failed == nil {
		s.waitChange()
	}
	err := s.failed
	s.mu.Unlock()
	if err != nil {
		return 0, err
	}
	// Fold up to target, a chunk per hold of the writer. A group made
	// durable is handed to the folds just after durable moves (doneLocked):
	// when nothing is left to fold short of target, it is on its way.
	for {
		if err := ctx.Err(); err != nil {
			return 0, err
		}
		s.wmu.Lock()
		held := time.Now()
		folded, err := s.foldedSeq(ctx)
		more := false
		if err == nil && folded < target {
			more, err = s.foldLog()
		}
		s.wmu.Unlock()
		pause := time.Since(held)
		if err != nil {
			return 0, fmt.Errorf("store: copy to %s: folding the log: %w", path, err)
		}
		if folded >= target {
			break
		}
		if !more {
			if err := s.Failed(); err != nil {
				return 0, err
			}
			pause = max(pause, 50*time.Microsecond)
		}
		time.Sleep(pause) // as between the copy's steps, below
	}
	var bk *sqlite.Backup
	s.wmu.Lock()
	err = s.conn.Raw(func(dc any) error {
		c, ok := dc.(interface {
			NewBackup(string) (*sqlite.Backup, error)
		})
		if !ok {
			return fmt.Errorf("the SQLite driver's connection (%T) has no online backup", dc)
		}
		var err error
		// The copy is not synced: a step's commit to it need not be (a
		// synced, journaled step holds the writer many times as long, the
		// writes waiting meanwhile: docs/benchmarks.md, "Figures that were in code comments"),
		// and the caller syncs the copy if it keeps it
		// (GET /_backup only streams it: a sync of it would only crowd
		// the disk the log's syncs wait for).
		bk, err = c.NewBackup("file:" + (&url.URL{Path: path}).EscapedPath() + "?_pragma=synchronous(OFF)&_pragma=journal_mode(OFF)")
		return err
	})
	s.wmu.Unlock()
	if err != nil {
		return 0, fmt.Errorf("store: copy to %s: %w", path, err)
	}
	var seq uint64
	for {
		if err = ctx.Err(); err != nil {
			break
		}
		more := false
		s.wmu.Lock()
		held := time.Now()
		// The tables hold the state at folded_seq only once every chunk
		// handed to the folds is written whole: a chunk written in parts
		// is ahead of folded_seq until its last part, and a chunk leaves a
		// document to a later chunk that writes it again (latestDocs). The
		// replay at open mends both from the log, but the copy has no log:
		// the step that may be its last comes after every pending fold.
		// (Remaining is 0 before the first step, whose folds are few.)
		if bk.Remaining() <= s.tune.copyPages {
			err = s.foldPending()
		}
		if err == nil {
			err = s.conn.Raw(func(any) error {
				var err error
				more, err = bk.Step(int32(s.tune.copyPages))
				return err
			})
		}
		if err == nil && !more {
			// The copy is the file as it is now: its folded_seq is the
			// copy's, read before the writer lets a fold in.
			seq, err = s.foldedSeq(ctx)
		}
		total, left := bk.PageCount(), bk.Remaining()
		if err != nil || !more {
			ferr := s.conn.Raw(func(any) error { return bk.Finish() })
			s.wmu.Unlock()
			if err == nil {
				err = ferr
			}
			bk = nil
			if err == nil && progress != nil {
				progress(total, total)
			}
			break
		}
		s.wmu.Unlock()
		if progress != nil {
			progress(total-left, total)
		}
		// The writes waiting for the writer go first, and the copy holds
		// it at most half the time: a loop that takes it back at once
		// starves the groups waiting for it, even with a yield between
		// (docs/benchmarks.md, "Figures that were in code comments").
		time.Sleep(time.Since(held))
	}
	if bk != nil { // given up (ctx) between steps
		s.wmu.Lock()
		_ = s.conn.Raw(func(any) error { return bk.Finish() })
		s.wmu.Unlock()
	}
	if err != nil {
		return 0, fmt.Errorf("store: copy to %s: %w", path, err)
	}
	return seq, nil
}

// foldPending folds every chunk handed to the folds, whole. wmu is held.
func (s *Store) foldPending() error {
	for {
		more, err := s.foldLog()
		if err != nil || !more {
			return err
		}
	}
}

// foldedSeq reads folded_seq: the last seq the tables hold. wmu is held.
func (s *Store) foldedSeq(ctx context.Context) (uint64, error) {
	var seq uint64
	err := s.conn.QueryRowContext(ctx, `SELECT value FROM state WHERE key = 'folded_seq'`).Scan(&seq)
	return seq, err
}
