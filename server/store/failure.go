// Failure: a failed write stops the store; Probe and Resume start it again.

package store

import (
	"context"
	"fmt"
	"strconv"
)

// failWriteLocked fails the store after a group's write failed: the syncs
// under way end first, and the groups written before g are synced, so
// Durable is final before anyone learns of the failure; mu is held.
func (s *Store) failWriteLocked(err error, g *group) {
	s.stopping = true
	for s.syncing || len(s.unsynced) > 0 {
		if s.syncing {
			s.waitChange()
		} else {
			s.syncLocked()
		}
	}
	s.stopping = false
	s.failLocked(err, g)
}

// failLocked records err as the store's failure (unless it has failed
// already) and hands it to gs, to the groups written but not synced and
// to the units still queued; Commits answer it at once until Resume. The
// units after Durable are lost: the next Commit may reuse their seqs. mu
// is held.
func (s *Store) failLocked(err error, gs ...*group) {
	first := s.failed == nil
	if first {
		s.failed = fmt.Errorf("store: %w", err)
		s.stats.Failed = s.failed
		s.stats.Failures++
	}
	s.lastSeq = s.durable
	pending := s.cur
	s.cur = newGroup()
	for _, g := range append(append(gs, s.unsynced...), pending) {
		if g != nil && g.state != done {
			g.err = s.failed
			g.state = done
			close(g.done)
		}
	}
	s.unsynced = nil
	s.changedLocked()
	if first && s.subs.Any() {
		go s.subs.Tell(Event{Failed: s.failed})
	}
}

// fail fails the store from the committer (a fold's failure), once the
// syncs under way have ended; wmu is held.
func (s *Store) fail(err error) {
	s.mu.Lock()
	s.failWriteLocked(err, nil)
	s.mu.Unlock()
}

// Failed returns the store's failure while it refuses Commits, else nil.
func (s *Store) Failed() error {
	if s.mem {
		return nil
	}
	return s.failure()
}

func (s *Store) failure() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.failed
}

func (s *Store) faultAt(at string) error {
	if s.fault == nil {
		return nil
	}
	return s.fault(at)
}

// probeRows is the size of the probe's write: enough that a disk with no
// room left fails it, as it failed the write that stopped the store.
const probeRows = 64 << 10

// tryWrite is a probe, run by the committer under wmu: it folds what is
// left to fold, writes (and deletes) a row in one SQLite transaction, and
// writes zeros past the log's end (where the next record goes), synced as
// groups are. After a failed sync it returns that failure: only reopening
// the file ends it.
func (s *Store) tryWrite() error {
	s.mu.Lock()
	syncErr := s.syncErr
	s.mu.Unlock()
	if syncErr != nil {
		return fmt.Errorf("store: %w (restart the server to read the file afresh)", syncErr)
	}
	if err := s.faultAt(FaultCommit); err != nil {
		return fmt.Errorf("store: %w", err)
	}
	for {
		more, err := s.foldLog()
		if err != nil {
			return fmt.Errorf("store: %w", err)
		}
		if !more {
			break
		}
	}
	if err := s.exec(context.Background(), "BEGIN IMMEDIATE",
		"INSERT INTO log(seq, body) VALUES (0, zeroblob("+strconv.Itoa(probeRows)+"))",
		"DELETE FROM log WHERE seq = 0", "COMMIT"); err != nil {
		return fmt.Errorf("store: %w", err)
	}
	// Zeros after the last record read as the log's end at open.
	if n := len(s.segs); n > 0 {
		seg := s.segs[n-1]
		if _, err := seg.f.WriteAt(make([]byte, probeRows), seg.size); err != nil {
			return fmt.Errorf("store: %w", writeError(err))
		}
		if s.mode.Kind != SyncOff {
			if err := fdatasync(seg.f); err != nil {
				return fmt.Errorf("store: syncing the log: %w", err)
			}
		}
	}
	return nil
}

// Probe tries a write to the file (and any fold left to do) and returns
// its error: nil when the store works again. It writes nothing the engine
// sees; Resume then lets Commits in.
func (s *Store) Probe() error {
	if s.mem {
		return nil
	}
	answer := make(chan error, 1)
	select {
	case s.probe <- answer:
		return <-answer
	case <-s.stopped:
		return ErrClosed
	}
}

// Resume ends a failure: Commits are taken again, from seq Durable()+1.
// The engine calls it once it has undone the lost units and a Probe
// succeeded.
func (s *Store) Resume() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.failed = nil
	s.stats.Failed = nil
}
