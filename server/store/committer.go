// The committer: the goroutine that writes the groups no waiter leads,
// and folds the log into the tables in chunks.

package store

import (
	"errors"
	"fmt"
	"math"
	"os"
	"time"
)

// run is the committer: it writes the groups no waiter writes (under an
// interval, off, or after Detach), and folds the log, until Close.
// After a failure it writes nothing (Commit refuses every unit) but answers
// probes, until Resume.
//
// Folds stay off the commit path: the log is folded in chunks of at most
// foldChunk bytes of log records and about foldRows rows to write (what a
// chunk's time grows with: a few ms here), one chunk per turn of the loop,
// and every turn first writes the units queued (under always and
// interval), so a committed unit waits for at most one short chunk's fold
// before it is written.
// Under an interval that bounds what a crash can lose to the units of the
// last interval plus one chunk's fold (docs/reliability.md).
func (s *Store) run() {
	defer close(s.stopped)
	var tick <-chan time.Time
	if s.mode.Kind == SyncInterval {
		t := time.NewTicker(s.mode.Interval)
		defer t.Stop()
		tick = t.C
	}
	foldTimer := time.NewTimer(time.Hour)
	foldTimer.Stop()
	defer foldTimer.Stop()
	for {
		write, closing := false, false
		select {
		case <-s.wake:
			write = true
		case <-tick:
			write = true
		case <-foldTimer.C:
		case answer := <-s.probe:
			s.wmu.Lock()
			answer <- s.tryWrite()
			s.wmu.Unlock()
			continue
		case <-s.closing:
			write, closing = true, true
		}
		s.mu.Lock()
		loaded, failed := s.loaded, s.failed != nil
		var g *group
		if (write || s.mode.Kind != SyncOff) && s.cur.units > 0 && !failed {
			g = s.cur
		}
		s.mu.Unlock()
		if failed {
			// Commit refuses while the store is failed: nothing is queued.
			if closing {
				return
			}
			continue
		}
		if g != nil {
			if err := s.flush(g); err != nil {
				if closing {
					return
				}
				continue
			}
		}
		if closing {
			// Groups that waiters lead may still be on their way: the
			// log is closed only once they are durable.
			s.mu.Lock()
			for s.writing || s.syncing || len(s.unsynced) > 0 {
				s.waitChange()
			}
			s.mu.Unlock()
		}
		// Fold only once Load has handed over the log's unfolded rows;
		// before that the fold set does not cover the whole log.
		s.fmu.Lock()
		unfolded, age := s.unfoldedLocked(), time.Duration(0)
		if len(s.folds) > 0 {
			age = time.Since(s.folds[0].since)
		}
		s.fmu.Unlock()
		if loaded && unfolded > 0 {
			if closing || unfolded >= s.tune.foldBytes || age >= s.tune.foldAge {
				// A group already taken for writing (its leader waits for
				// the connection) goes before the chunk. Once: under a
				// steady load another is always on its way, and the fold
				// must keep up.
				s.mu.Lock()
				if s.writing {
					s.waitChange()
				}
				s.mu.Unlock()
				s.wmu.Lock()
				for {
					more, err := s.foldLog()
					if err == nil && !closing {
						err = s.dropFolded(false)
					}
					if err != nil {
						s.fail(err)
						break
					}
					if !closing || !more {
						break
					}
				}
				s.wmu.Unlock()
				s.fmu.Lock()
				more := s.unfoldedLocked() > 0
				s.fmu.Unlock()
				if more && !closing {
					foldTimer.Reset(0) // the next chunk, after the queued units
				}
			} else {
				foldTimer.Reset(s.tune.foldAge - age)
			}
		}
		if closing {
			return
		}
	}
}

// unfoldedLocked returns the size of the log records not yet folded; fmu
// is held.
func (s *Store) unfoldedLocked() int64 {
	var n int64
	for _, f := range s.folds {
		n += f.bytes
	}
	return n
}

// addFold adds one log record's changes to the chunks waiting for a fold;
// fmu is held. It takes changes: the chunks keep what they need of them
// (the bodies), and the slice goes to the spares for a later group to
// reuse, so the caller must not use it after.
//
// A chunk is closed once it holds foldChunk bytes or foldRows rows, and
// before a group that would take it past foldRows: a big group (a batch)
// starts a chunk of its own, which the fold can write in parts unless
// the chunk creates or drops a collection (foldSet.partable).
func (s *Store) addFold(changes []Change, seq uint64, size int) {
	if n := len(s.folds); n == 0 || (!s.folds[n-1].empty() && (s.folds[n-1].bytes >= s.tune.foldChunk ||
		(s.tune.foldRows > 0 && s.folds[n-1].rows+len(changes)+1 > s.tune.foldRows))) {
		s.folds = append(s.folds, newFoldSet())
	}
	// A chunk begun by a group of at most foldRows rows closes before it
	// passes foldRows; one begun by a bigger group takes no other. So it
	// holds at most that many documents of a collection, however many the
	// last chunk sealed held (collLatest.hint): under --sync always, after
	// a put of thousands of jobs, each chunk of a few claims' and acks'
	// rows made maps for thousands until the next fold (a quarter of a
	// megabyte a chunk).
	f := s.folds[len(s.folds)-1]
	if f.empty() && s.tune.foldRows > 0 {
		f.room = max(s.tune.foldRows, len(changes)+1)
	}
	// s.latest is Load's, which bounds the ids the tables hold: none is
	// made here, which would take the tables for empty.
	f.add(changes, seq, size, s.latest)
	if cap(changes) <= spareChanges {
		clear(changes) // the bodies, for the garbage collector
		select {
		case s.spare <- changes[:0]:
		default:
		}
	}
}

// dropFolded deletes the segments whose records are all folded (all of
// them, at Close), once the folds that cover them are durable: it syncs
// SQLite's WAL first (a fold commits without a sync; a checkpoint would
// have synced it). That order is the invariant of the package comment: a
// crash at any point finds each change in the tables or in the log. wmu
// is held.
func (s *Store) dropFolded(all bool) error {
	s.mu.Lock()
	loaded := s.loaded
	s.mu.Unlock()
	if !loaded {
		return nil // the records are not in the folds yet
	}
	s.fmu.Lock()
	folded := true
	through := uint64(math.MaxUint64) // every seq up to it is folded
	for _, f := range s.folds {
		if !f.empty() {
			folded, through = false, f.first-1
			break
		}
	}
	s.fmu.Unlock()
	n := 0
	if all && folded {
		n = len(s.segs)
	} else {
		for n+1 < len(s.segs) && s.segs[n+1].first-1 <= through {
			n++
		}
	}
	if n == 0 {
		return nil
	}
	err := s.faultAt(FaultSync)
	if err == nil {
		err = fdatasync(s.wal)
	}
	if err != nil {
		s.mu.Lock()
		s.syncErr = fmt.Errorf("syncing the WAL: %w", err)
		s.mu.Unlock()
		return s.syncErr
	}
	if s.tune.onDrop != nil {
		s.tune.onDrop()
	}
	for _, seg := range s.segs[:n] {
		if seg.f != nil {
			seg.f.Close()
			seg.f = nil
		}
		if err := os.Remove(seg.path); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("deleting a folded log segment: %w", err)
		}
	}
	s.segs = s.segs[n:]
	if len(s.segs) == 0 {
		s.segs = nil
	}
	return nil
}

// foldLog folds the oldest chunk of unfolded log records into the tables
// in one transaction, and returns whether more is left to fold. A failure
// rolls it back whole: the chunk stays queued for the next try (and its
// records stay in the log in any case: dropFolded). wmu is held.
func (s *Store) foldLog() (more bool, err error) {
	s.fmu.Lock()
	if len(s.folds) == 0 {
		s.fmu.Unlock()
		return false, nil
	}
	f := s.folds[0]
	if f.empty() {
		// A chunk sealed with nothing in it (more is left only after it).
		s.folds = s.folds[1:]
		more = len(s.folds) > 0
		s.fmu.Unlock()
		return more, nil
	}
	if len(s.folds) == 1 {
		// Seal the chunk: groups made durable meanwhile go to the next.
		s.folds = append(s.folds, newFoldSet())
	}
	f.seal()
	s.fmu.Unlock()
	start := time.Now()
	if s.foldTx == nil {
		s.foldTx = newFoldTx(s.conn)
	}
	tx := s.foldTx
	// A chunk of a few big groups holds more documents than foldRows: it
	// is written in parts of foldRows, one a call, so that no commit waits
	// for more than one part.
	part := f.partable(s.tune.foldRows)
	write := func() error { return f.write(tx, func() error { return s.faultAt(FaultFold) }) }
	if part {
		write = func() error {
			if err := f.writePart(tx, s.tune.foldRows); err != nil {
				return err
			}
			return s.faultAt(FaultFold)
		}
	}
	if err := tx.run(write); err != nil {
		return true, err
	}
	if s.tune.onFold != nil {
		s.tune.onFold(time.Since(start))
	}
	if part {
		f.written += s.tune.foldRows
		return true, nil
	}
	s.mu.Lock()
	s.stats.Folds++
	s.stats.LogBytes -= f.bytes
	s.mu.Unlock()
	// Chunks fold oldest first, so every seq up to this chunk's last is
	// in the tables now (FoldedSeq).
	s.foldedTo.Store(f.seq)
	s.fmu.Lock()
	f.forget()
	s.folds = s.folds[1:]
	if len(s.folds) == 1 && s.folds[0].empty() {
		s.folds = nil
	}
	more = len(s.folds) > 0
	s.fmu.Unlock()
	return more, nil
}
