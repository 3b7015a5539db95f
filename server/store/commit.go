// The commit path: Commit queues a unit in a group; flush leads the group
// to the disk through the two-stage pipeline (write, then sync).

package store

import (
	"errors"
	"fmt"
	"syscall"
	"time"
)

// spareGroups is how many changes slices the store keeps for reuse: about
// the groups on their way at once (queued, written, syncing).
const spareGroups = 4

// spareChanges is the most changes a slice kept for reuse may hold: a big
// batch's is left to the garbage collector. It holds a relaxed server's
// group of an interval at tens of thousands of jobs a second (two changes
// a job: a claim's and its ack's), 2.5 MB: a smaller spare grows anew
// each interval, and its copies, its fresh pages' faults and the
// collector's work show in the server's CPU (docs/benchmarks.md, "The
// relaxed path's CPU").
const spareChanges = 1 << 15

// group is the units queued between two commits: one log record; one sync
// of the log makes one group, or several, durable.
type group struct {
	changes []Change
	units   int
	seq     uint64    // the last unit's
	size    int64     // rough bytes held, to bound memory under interval/off
	since   time.Time // when its first unit was queued (under interval)
	done    chan struct{}
	err     error // set before done is closed

	flushed func() error // flush(this group): the wait its units' Commits answer

	// Under Store.mu.
	state groupState
	led   bool          // a flush leads it to the disk; other waiters wait for done
	wrote time.Duration // its write to the log took
	bytes int           // its log record's size
	seg   *segment      // the segment it was written to
}

// groupState is where a group is on its way to the disk.
type groupState uint8

const (
	queued  groupState = iota // Store.cur: units may still join
	writing                   // its log record is being written
	written                   // in Store.unsynced
	syncing                   // in the sync under way
	done                      // durable, or failed: done is closed
)

func newGroup() *group { return &group{done: make(chan struct{})} }

func (g *group) wait() error {
	<-g.done
	return g.err
}

func (s *Store) segBytes() int64 {
	if s.tune.segBytes > 0 {
		return s.tune.segBytes
	}
	return defaultSegBytes
}

func noWait() error { return nil }

// Detach is for a caller that may never call the waits Commit returns (a
// cluster node applying its log, which waits for some of its writes
// only): from now on the committer goroutine writes each unit under
// always too, as soon as it is queued. It is called before the Commits it
// concerns.
func (s *Store) Detach() {
	s.mu.Lock()
	s.detached = true
	s.mu.Unlock()
}

// Commit queues one unit (a statement's or a batch's changes; after a crash
// they are all there or none is). It is called under the engine's write
// lock, in seq order, and does no I/O. The wait it returns blocks until
// the unit is durable per the sync mode: under always until it is synced;
// under interval and off it returns at once (unless the queue has outgrown
// its bound: then it waits for the write). Once the store has failed,
// every wait returns the failure.
//
// The caller calls the wait at once: under always that call writes the
// unit's group and syncs the log itself, on the caller's goroutine, unless
// another waiter already does (flush). After Detach the committer writes
// each unit instead, and the waits need not be called. Under interval and
// off the committer writes every group.
func (s *Store) Commit(seq uint64, changes []Change) (wait func() error) {
	if s.mem {
		return noWait
	}
	var size int64
	for _, c := range changes {
		if c.Op < OpCreate || c.Op > OpMetaDelete {
			panic(fmt.Sprintf("store: Commit of a change with unknown op %d", c.Op))
		}
		size += int64(len(c.Coll)+len(c.Key)+len(c.Body)) + 64
	}
	s.mu.Lock()
	if err := s.failed; err != nil {
		s.mu.Unlock()
		return func() error { return err }
	}
	if s.closed {
		s.mu.Unlock()
		return func() error { return ErrClosed }
	}
	if seq <= s.lastSeq {
		last := s.lastSeq
		s.mu.Unlock()
		panic(fmt.Sprintf("store: Commit of seq %d after seq %d", seq, last))
	}
	s.lastSeq = seq
	s.committed = true
	detached := s.detached
	g := s.cur
	if s.mode.Kind == SyncInterval && g.units == 0 {
		g.since = time.Now()
	}
	if g.changes == nil {
		select {
		case g.changes = <-s.spare:
		default:
		}
	}
	g.changes = append(g.changes, changes...)
	g.units++
	g.seq = seq
	g.size += size
	now := (s.mode.Kind == SyncAlways && detached) || g.size >= s.tune.maxPending
	if g.flushed == nil && s.mode.Kind == SyncAlways {
		g.flushed = func() error { return s.flush(g) }
	}
	s.mu.Unlock()
	if now {
		s.poke()
	}
	// Under interval and off the engine may outrun the disk; once the queue
	// holds twice the early-write bound, its waits block until it is written,
	// so memory stays bounded and requests slow down instead. Under an
	// interval a group still queued an interval after its first unit means
	// the committer is behind: its waits block too, so an acknowledged unit
	// is never more than about an interval (plus the write before it) from
	// the disk — the loss bound docs/reliability.md states.
	if s.mode.Kind == SyncAlways {
		return g.flushed
	}
	if g.size >= 2*s.tune.maxPending || (s.mode.Kind == SyncInterval && g.units > 1 && time.Since(g.since) > s.mode.Interval) {
		return g.wait // for the committer's write
	}
	return s.failed0
}

func (s *Store) poke() {
	select {
	case s.wake <- struct{}{}:
	default: // already signalled; the committer will take this unit too
	}
}

// flush brings g to the disk per the sync mode and returns its error. The
// first caller for a group leads it; later ones wait for the leader.
//
// The leader writes the group as soon as no other group is being written
// and none waits for a sync, then syncs the log segment as soon as no
// other sync is under way. So the groups go down a pipeline of two stages:
// while the sync for group n is under way, group n+1 is written, and its
// sync starts the moment n's returns. A sync takes every group written
// before it started — all of them reached the segment first, so it makes
// all of them durable — and one group is written per sync, as without the
// pipeline. A group that moves the log to a new segment is written only
// once no sync is under way: a sync covers one segment, and a segment
// before the last is then whole (logfile.go).
//
// The pipeline pays while groups are small: a unit then waits for the disk,
// and hiding its write behind the sync before shortens that wait. But a
// group written early holds only the units that came during one sync, not
// during a write and a sync, so under many writers it would take more
// syncs (each costing CPU in the kernel) for the same units. So a group is
// written during a sync only while the sync carries at most pipelineUnits
// units, and while at most twice that many connections wrote lately
// (Inbound.Active): past either it waits for the sync to end and takes
// what came meanwhile. With 16 HTTP workers a sync of one or two units
// is a lull, and the group written early in it then took a second write
// after the hold for the units that came (docs/benchmarks.md,
// "Sixteen durable workers").
//
// And a sync takes every unit queued when it starts: under --sync always
// the leader that starts it first writes the units queued since the group
// written early (once, and not past the segment's end). Without that, a
// unit committed after the early write but before the sync under way
// ended waited for one more sync: with a few writers most syncs carried
// one unit (docs/benchmarks.md, "Figures that were in code comments").
//
// Before it starts a sync, the leader may hold it a little for units on
// their way (holdLocked, Options.Inbound): with a few writers, those that
// came just after a sync started otherwise wait for the next one, and the
// syncs alternate between small groups (the rule: docs/architecture.md,
// "The commit path"; what it measured: docs/benchmarks.md, "Group
// commit"). A leader whose group is still the queued one holds before
// writing it, so that the units that come meanwhile join the group and
// one write takes them all; one whose group was written early holds
// after, and gathers what came.
// Folds, probes and backups share the writer with the writes through wmu.
func (s *Store) flush(g *group) error {
	s.mu.Lock()
	if g.led {
		s.mu.Unlock()
		<-g.done
		return g.err
	}
	g.led = true
	gathered, held := false, false
	for g.state != done {
		switch {
		case g.state == syncing:
			s.mu.Unlock()
			<-g.done
			s.mu.Lock()
		case s.stopping:
			s.waitChange()
		case !held && s.inbound != nil && !s.syncing && !s.writing && !s.segFull &&
			((g.state == queued && len(s.unsynced) == 0) || (g.state == written && len(s.unsynced) == 1)):
			// Only this leader can be here: its group is the queued one
			// (s.cur), whose units that come while it holds join it and
			// one write takes them all; or the one written (early), and
			// no group is written while it holds.
			held = true
			s.holdLocked()
		case g.state == queued && !s.writing && len(s.unsynced) == 0 && (!s.syncing || (s.syncUnits <= pipelineUnits && !s.segFull && (s.inbound == nil || s.inbound.Active() <= 2*pipelineUnits))):
			s.writeLocked(g)
		case g.state == written && !s.syncing && !gathered && s.mode.Kind == SyncAlways && s.cur.units > 0 && !s.writing && !s.segFull:
			// The units queued meanwhile join this sync (their leader,
			// if any, finds its group written, then syncing).
			gathered = true
			s.writeLocked(s.cur)
		case g.state == written && !s.syncing:
			s.syncLocked()
		default:
			s.waitChange()
		}
	}
	s.mu.Unlock()
	return g.err
}

// waitChange waits, with mu released, until the pipeline's state changes.
func (s *Store) waitChange() {
	s.watched = true
	ch := s.changed
	s.mu.Unlock()
	<-ch
	s.mu.Lock()
}

// changedLocked wakes the leaders waiting for the pipeline; mu is held.
func (s *Store) changedLocked() {
	if s.watched {
		close(s.changed)
		s.changed = make(chan struct{})
		s.watched = false
	}
}

// writeLocked writes g, the queued group, as one log record; mu is held,
// and released while it writes.
func (s *Store) writeLocked(g *group) {
	s.writing = true
	s.cur = newGroup()
	g.state = writing
	s.mu.Unlock()
	s.wmu.Lock()
	s.mu.Lock()
	failed := s.failed // a fold or a sync failed while the group waited for wmu
	s.mu.Unlock()
	var err error
	var n int
	full := s.segFull
	start := time.Now()
	if failed == nil {
		n, err = s.writeGroup(g)
		if err == nil {
			full = g.seg.size >= s.segBytes()
		}
	}
	took := time.Since(start)
	s.wmu.Unlock()
	s.mu.Lock()
	switch {
	case failed != nil:
		s.failLocked(failed, g)
	case err != nil:
		s.failWriteLocked(err, g)
	case s.failed != nil:
		// A sync failed while the record was written: the file is in
		// doubt, and the store stays failed until it is reopened.
		s.failLocked(s.failed, g)
	default:
		s.segFull = full
		g.wrote, g.bytes = took, n
		s.stats.LogBytes += int64(n)
		if s.mode.Kind == SyncOff {
			s.doneLocked([]*group{g}, false)
		} else {
			g.state = written
			s.unsynced = append(s.unsynced, g)
		}
	}
	s.writing = false
	s.changedLocked()
}

// syncLocked syncs the log segment, making durable every group written
// before it starts; mu is held, and released during the sync. The groups
// are all in one segment (flush moves to a new one only with no sync under
// way and none waiting).
func (s *Store) syncLocked() {
	batch := s.unsynced
	s.unsynced = nil
	s.syncing = true
	s.syncUnits = 0
	for _, g := range batch {
		g.state = syncing
		s.syncUnits += g.units
	}
	s.recentUnits[s.recentAt] = s.syncUnits
	s.recentAt = (s.recentAt + 1) % recentSyncs
	s.changedLocked() // the next group may be written while this syncs
	s.mu.Unlock()
	start := time.Now()
	err := s.faultAt(FaultSync)
	if err == nil {
		err = fdatasync(batch[0].seg.f)
	}
	took := time.Since(start)
	s.mu.Lock()
	if err != nil {
		// After a failed sync the kernel may have dropped the pages it
		// could not write: what the segment holds is in doubt, and a
		// later sync may answer success without them. Only reopening the
		// file (a restart) reads it afresh, so the store stays failed till
		// then.
		s.syncErr = fmt.Errorf("syncing the log: %w", err)
		s.failLocked(s.syncErr, batch...)
	} else {
		for _, g := range batch {
			g.wrote += took
		}
		if s.inbound != nil {
			s.lastSync = start.Add(took)
		}
		s.stats.Fsyncs++
		s.syncedTo(batch[len(batch)-1].seq)
		s.doneLocked(batch, true)
	}
	// Cleared only now: the next sync's groups go to the folds after these.
	s.syncing = false
	s.changedLocked()
}

// doneLocked lets the waiters of groups now durable go, tells the
// subscribers (Subscribe), in seq order, and hands the groups to the
// folds; mu is held, and released meanwhile (the caller's writing or
// syncing flag keeps the next groups' doneLocked after this one's).
func (s *Store) doneLocked(gs []*group, fsync bool) {
	last := gs[len(gs)-1]
	s.durable = last.seq
	for _, g := range gs {
		s.stats.Commits += uint64(g.units)
		s.stats.Changes += uint64(len(g.changes))
		g.state = done
		close(g.done)
	}
	loaded := s.loaded
	s.mu.Unlock()
	if s.subs.Any() {
		for i, g := range gs {
			s.subs.Tell(Event{Seq: g.seq, Changes: g.changes, Wrote: g.wrote, Fsync: fsync && i == len(gs)-1})
		}
	}
	if loaded {
		s.fmu.Lock()
		first := len(s.folds) == 0
		for _, g := range gs {
			s.addFold(g.changes, g.seq, g.bytes)
		}
		due := first || s.unfoldedLocked() >= s.tune.foldBytes
		s.fmu.Unlock()
		if due {
			s.poke() // the committer arms its fold timer, or folds
		}
	}
	s.mu.Lock()
}

// writeGroup writes g as one log record, with one pwrite at the end of the
// current segment (a new one once it is full), and returns the record's
// size; wmu is held. A write that fails is cut off again, so that the next
// record follows the last whole one.
func (s *Store) writeGroup(g *group) (int, error) {
	if err := s.faultAt(FaultCommit); err != nil {
		return 0, err
	}
	seg, err := s.segment()
	if err != nil {
		return 0, err
	}
	s.buf = appendRecord(s.buf[:0], g.seq, s.synced.Load(), g.changes)
	if _, err := seg.f.WriteAt(s.buf, seg.size); err != nil {
		if terr := seg.f.Truncate(seg.size); terr != nil {
			// The segment may end in part of a record: only a restart
			// (which cuts it off at open) makes it safe to write again.
			s.mu.Lock()
			s.syncErr = fmt.Errorf("writing the log: %w (and cutting off the part written: %v)", err, terr)
			s.mu.Unlock()
		}
		return 0, writeError(err)
	}
	seg.size += int64(len(s.buf))
	s.written = g.seq
	g.seg = seg
	seg.zeroAhead()
	return len(s.buf), nil
}

// writeError says what a failed write to the log was, and that the disk
// is full when it is.
func writeError(err error) error {
	if errors.Is(err, syscall.ENOSPC) {
		return fmt.Errorf("writing the log: the disk is full: %w", err)
	}
	return fmt.Errorf("writing the log: %w", err)
}

// segment returns the segment the next record goes to: the current one, or
// a new one once it is full (or there is none), named by the next seq;
// wmu is held. Every group in the old one is durable by then (flush), and
// under off it is synced here, so that a segment before the last is whole.
func (s *Store) segment() (*segment, error) {
	if n := len(s.segs); n > 0 && s.segs[n-1].size < s.segBytes() {
		return s.segs[n-1], nil
	}
	if n := len(s.segs); n > 0 {
		if err := fdatasync(s.segs[n-1].f); err != nil {
			s.mu.Lock()
			s.syncErr = fmt.Errorf("syncing the log: %w", err)
			s.mu.Unlock()
			return nil, s.syncErr
		}
		s.syncedTo(s.written)
	}
	s.mu.Lock()
	first := s.durable + 1
	s.mu.Unlock()
	seg, err := createSegment(s.path, first, s.tune.prealloc)
	if err != nil {
		return nil, writeError(fmt.Errorf("creating a log segment: %w", err))
	}
	s.segs = append(s.segs, seg)
	return seg, nil
}

// syncedTo records that a sync of the log made every seq up to seq
// durable.
func (s *Store) syncedTo(seq uint64) {
	for {
		old := s.synced.Load()
		if seq <= old || s.synced.CompareAndSwap(old, seq) {
			return
		}
	}
}
