package engine

import (
	"sort"

	"github.com/fenecdb/fenec/server/fenecql"
)

// A queue is a collection with a run_at timestamp field (docs/queues.md):
// its jobs are, by the time now,
//
//	ready    run_at <= now
//	leased   run_at > now, owner set
//	delayed  run_at > now, no owner
//	dead     run_at null, with an error
//	kept     run_at null, no error
//
// Counting them with FenecQL reads every job of the state, and an operator
// watching a queue of a million jobs asks every second. So each queue keeps
// a queueIndex beside its other indexes, changed with every document, that
// answers the five counts and the oldest ready job without reading a job:
// the counts that do not move with the clock are kept as numbers, and
// those that do are ranks of now among the run_at values (numSet.CountTo,
// a walk of its leaves' lengths: a leaf per 512 jobs).

// queueIndex is a queue's counts. It is an index (added to and removed
// from with every document) that answers no query.
type queueIndex struct {
	runAt, owner, errField int     // field positions; -1 when the collection has none
	timed                  *numSet // every job with a run_at: numItem{run_at, id}
	owned                  *numSet // those with an owner too
	dead, kept             int
	// sorted is run_at's @sorted index when it has one (useSorted). It
	// holds every job in run_at order, nulls first, so timed is not kept
	// beside it: a claim's and an ack's jobs go through one tree fewer.
	sorted *sortedIndex
}

// useSorted has the counts read run_at's @sorted index x instead of a
// tree of their own; called before any document is added.
func (q *queueIndex) useSorted(x *sortedIndex) { q.sorted = x }

// newQueueIndex returns the counts of a collection with these fields, or
// nil when it is no queue (no run_at timestamp field).
func newQueueIndex(s *schema) *queueIndex {
	at, ok := s.byName["run_at"]
	if !ok || s.fields[at].Type != fenecql.TypeTimestamp {
		return nil
	}
	pos := func(name string) int {
		if i, ok := s.byName[name]; ok {
			return i
		}
		return -1
	}
	return &queueIndex{runAt: at, owner: pos("owner"), errField: pos("error"), timed: &numSet{}, owned: &numSet{}}
}

func (q *queueIndex) has(d *Doc, f int) bool { return f >= 0 && !d.isNull(f) }

// same reports whether d counts where old did: the same run_at, and an
// owner and an error where old had them.
func (q *queueIndex) same(old, d *Doc) bool {
	return sameValue(old.val(q.runAt), d.val(q.runAt)) &&
		q.has(old, q.owner) == q.has(d, q.owner) && q.has(old, q.errField) == q.has(d, q.errField)
}

func (q *queueIndex) add(d *Doc) {
	at := d.val(q.runAt)
	switch {
	case !at.IsNull():
		it := numItem{at.Int(), d.ID}
		if q.sorted == nil {
			q.timed.Set(it)
		}
		if q.has(d, q.owner) {
			q.owned.Set(it)
		}
	case q.has(d, q.errField):
		q.dead++
	default:
		q.kept++
	}
}

func (q *queueIndex) remove(d *Doc) {
	at := d.val(q.runAt)
	switch {
	case !at.IsNull():
		it := numItem{at.Int(), d.ID}
		if q.sorted == nil {
			q.timed.Delete(it)
		}
		if q.has(d, q.owner) { // only a job with an owner is in owned
			q.owned.Delete(it)
		}
	case q.has(d, q.errField):
		q.dead--
	default:
		q.kept--
	}
}

// QueueStats is a queue's jobs by state at one moment.
type QueueStats struct {
	Name                               string
	Ready, Leased, Delayed, Dead, Kept int
	OldestReadyMS                      int64 // the oldest ready job's run_at; valid when Ready > 0
}

// timedStats returns how many jobs have a run_at, how many of them are
// due by now, and the earliest run_at (valid when some are due).
func (q *queueIndex) timedStats(now int64) (timed, ready int, oldest int64) {
	if q.sorted == nil {
		timed, ready = q.timed.Len(), q.timed.CountTo(now)
		if first, ok := q.timed.Min(); ok {
			oldest = first.n
		}
		return timed, ready, oldest
	}
	// The index's nulls (the dead and kept jobs) are apart from its
	// numbers, which are every timed job.
	nums := q.sorted.nums
	if first, ok := nums.Min(); ok {
		oldest = first.n
	}
	return nums.Len(), nums.CountTo(now), oldest
}

func (q *queueIndex) stats(name string, now int64) QueueStats {
	timed, ready, oldest := q.timedStats(now)
	leased := q.owned.Len() - q.owned.CountTo(now)
	s := QueueStats{Name: name, Ready: ready, Leased: leased, Delayed: timed - ready - leased, Dead: q.dead, Kept: q.kept}
	if ready > 0 {
		s.OldestReadyMS = oldest
	}
	return s
}

// Queues returns every queue's jobs by state at the clock's now, in the
// order the collections were made. It reads every job of none: see
// queueIndex.
func (db *DB) Queues() []QueueStats {
	db.mu.RLock()
	defer db.mu.RUnlock()
	now := db.clock.NowMS()
	out := []QueueStats{}
	for name, c := range db.colls {
		if c.queue != nil {
			out = append(out, c.queue.stats(name, now))
		}
	}
	sort.Slice(out, func(i, j int) bool { return db.created[out[i].Name] < db.created[out[j].Name] })
	return out
}

// IsQueue reports whether the collection name exists and is a queue.
func (db *DB) IsQueue(name string) bool {
	db.mu.RLock()
	defer db.mu.RUnlock()
	c := db.colls[name]
	return c != nil && c.queue != nil
}
