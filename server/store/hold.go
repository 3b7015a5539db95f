// The hold before a sync: a leader waits a little for the units of
// requests on their way (Inbound), which then share its sync.

package store

import (
	"time"
)

// holdLocked waits, before a sync starts, for the units of requests on
// their way to a commit (Options.Inbound), which then join the sync
// (gathered): while any is between its head and its commit, or while the
// sync would carry fewer units than connections wrote lately and the
// last sync ended within Inbound.busy, for Inbound's hold at most. Holds that gain no unit twice running stop the
// holding for holdRest syncs: a connection that wrote lately but will
// not soon does not delay every sync. mu is held, and released meanwhile.
func (s *Store) holdLocked() {
	if s.holdRest > 0 {
		s.holdRest--
		return
	}
	units0 := s.pendingUnitsLocked()
	var end time.Time // zero: not waited
	siblings := -1    // whether to wait for the connections that wrote lately (-1: not asked yet)
	for {
		units, pending := s.pendingUnitsLocked(), s.inbound.Pending()
		if pending <= 0 && units >= s.inbound.Active() {
			break
		}
		now := time.Now()
		if siblings < 0 {
			siblings = 0
			if now.Sub(s.lastSync) < s.inbound.busy {
				siblings = 1
			}
		}
		if pending <= 0 && siblings == 0 {
			break // writing now and then: Inbound.busy
		}
		if end.IsZero() {
			end = now.Add(s.inbound.hold)
		} else if !now.Before(end) {
			break
		}
		s.mu.Unlock()
		s.inbound.wait(end.Sub(now), pending)
		s.mu.Lock()
	}
	switch {
	case end.IsZero():
	case s.pendingUnitsLocked() > units0:
		s.holdMisses = 0
	default:
		s.holdMisses++
		if s.holdMisses == 2 {
			s.holdMisses, s.holdRest = 0, holdRest
		}
	}
}

// holdRest is how many syncs start without a hold after two holds gained
// nothing (holdLocked).
const holdRest = 16

// pendingUnitsLocked returns the units written and queued, not yet
// syncing; mu is held.
func (s *Store) pendingUnitsLocked() int64 {
	units := int64(s.cur.units)
	for _, g := range s.unsynced {
		units += int64(g.units)
	}
	return units
}

// pipelineUnits is the most units a sync under way may carry for the next
// group to be written meanwhile (flush): as many as a few workers keep in
// flight, fewer than many workers put in one group. Past 2*pipelineUnits
// connections writing lately (Inbound.Active) no group is written early.
const pipelineUnits = 2
