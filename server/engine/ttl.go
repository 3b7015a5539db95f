package engine

import (
	"context"
	"errors"
	"sort"
	"time"

	"github.com/fenecdb/fenec/server/fenecql"
)

// ttlField is one @ttl field of a collection: its position, its duration,
// and the sorted index of its times (the field's own @sorted, or one kept
// for the sweeper alone).
type ttlField struct {
	field int
	ms    int64
	times *sortedIndex
}

// lapsed reports whether d has lapsed at now: whether, for one of its
// @ttl fields, the field's time plus the duration is no longer after now.
// A null field never lapses. Every read and write asks it of the rows it
// reaches, so a lapsed document is gone the moment it lapses, whatever the
// sweeper has done yet (docs/fenecql.md, Expiry).
func (c *Collection) lapsed(d *Doc, now int64) bool {
	for _, t := range c.ttls {
		if v := d.val(t.field); v.Kind() == fenecql.KindTime && v.Time() <= now-t.ms {
			return true
		}
	}
	return false
}

// live returns the document of id unless it is missing or lapsed at now.
func (c *Collection) live(id int64, now int64) *Doc {
	d := c.get(id)
	if d == nil || c.lapsed(d, now) {
		return nil
	}
	return d
}

// SweepBatch is how many lapsed documents one sweep deletes at most: one
// commit, so the write lock is held for a bounded time however many
// documents lapse at once (docs/fenecql.md, Expiry; docs/benchmarks.md,
// "Expiry's sweeper", gives the hold measured).
const SweepBatch = 512

// SweepLapsed deletes up to max documents that have lapsed at the clock's
// now, oldest first, in one commit — the path a del takes, so the deletes
// are stored, replicated and counted like any write — and returns how
// many it deleted. A caller sweeps again while it returns max. On a
// cluster's follower it deletes nothing and returns 0: followers delete
// what the leader's sweep sends them through the log.
func (db *DB) SweepLapsed(ctx context.Context, max int) (int, error) {
	n, _, err := db.sweepLapsed(ctx, max)
	return n, err
}

// sweepLapsed is SweepLapsed, answering too how long the sweep's body
// held the write lock (what TestSweepHold measures).
func (db *DB) sweepLapsed(ctx context.Context, max int) (n int, held time.Duration, err error) {
	_, err = db.commit(ctx, func(t *tx) ([]*Result, error) {
		start := time.Now()
		defer func() { held = time.Since(start) }()
		now := db.clock.NowMS()
		var ids []int64
		for _, name := range db.sweepOrder() {
			c := db.colls[name]
			for _, tf := range c.ttls {
				if n >= max {
					return nil, nil
				}
				// Lapsed: time <= now - ttl. Nulls are in no range.
				hi := bound{v: fenecql.Time(now - tf.ms), inclusive: true, set: true}
				ids = ids[:0]
				tf.times.walk(bound{}, hi, false, func(id int64) bool {
					ids = append(ids, id)
					return n+len(ids) < max
				})
				for _, id := range ids {
					t.deleteDoc(c, id)
				}
				n += len(ids)
			}
		}
		return nil, nil
	})
	var nl *NotLeaderError
	if errors.As(err, &nl) {
		return 0, 0, nil
	}
	if err != nil {
		return 0, 0, err
	}
	return n, held, nil
}

// sweepOrder returns the names of the collections with a @ttl field, in
// creation order, so that sweeps are alike from run to run. Under the
// write lock.
func (db *DB) sweepOrder() []string {
	var names []string
	for name, c := range db.colls {
		if c.ttls != nil {
			names = append(names, name)
		}
	}
	sort.Slice(names, func(i, j int) bool { return db.created[names[i]] < db.created[names[j]] })
	return names
}

// liveLen returns how many documents are live at now: those stored less
// those lapsed and not swept yet, which are few (the sweeper deletes them
// within a second or so), so they are counted along the @ttl indexes.
func (c *Collection) liveLen(now int64) int {
	n := c.Len()
	if c.ttls == nil {
		return n
	}
	var seen map[int64]bool
	if len(c.ttls) > 1 {
		seen = map[int64]bool{}
	}
	for _, tf := range c.ttls {
		hi := bound{v: fenecql.Time(now - tf.ms), inclusive: true, set: true}
		tf.times.walk(bound{}, hi, false, func(id int64) bool {
			if seen == nil {
				n--
			} else if !seen[id] {
				seen[id] = true
				n--
			}
			return true
		})
	}
	return n
}
