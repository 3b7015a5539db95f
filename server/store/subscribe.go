// Subscriptions: what the store tells the layers above it of each group it
// made durable and of a failure, without knowing who they are.

package store

import (
	"slices"
	"time"
)

// Event is what a subscriber is told: a group of units made durable (a
// commit), or the store's failure.
type Event struct {
	// Seq is the commit's position: the seq of the last unit of the group.
	Seq uint64
	// Changes are the group's changes, in commit order. They are the
	// store's: read them during the call only, and change nothing.
	Changes []Change
	// Wrote is how long the group's write to the log took (with its sync).
	Wrote time.Duration
	// Fsync: a sync of the log ended with this group. One sync may make
	// several groups durable, and only the last of them says so, so the
	// events that say so count the syncs.
	Fsync bool
	// Failed, when not nil, makes the event a failure instead: from now on
	// the store refuses every Commit, and the units written after Durable
	// are lost, until Probe succeeds and Resume is called.
	Failed error
}

// Colls returns the collections the commit's changes touched, each once,
// in the order of their first change.
func (e Event) Colls() []string {
	var colls []string
	for _, c := range e.Changes {
		if c.Coll != "" && !slices.Contains(colls, c.Coll) {
			colls = append(colls, c.Coll)
		}
	}
	return colls
}

// Subscribe has fn told of every event from now on, until the unsubscribe
// it returns is called. A commit is told on the goroutine that made it
// durable, after its waiters were let go and before the next group is
// written: fn must be quick, and must not call the store. A failure is
// told once, on a goroutine of its own.
func (s *Store) Subscribe(fn func(Event)) (unsubscribe func()) {
	return s.subs.Add(fn)
}
