package wait

import (
	"slices"
	"time"

	"github.com/fenecdb/fenec/server/engine"
)

// loop is the hub's one goroutine: it runs a round whenever a write, a
// claim's arrival or departure, or the time calls for one.
func (h *Hub) loop() {
	defer close(h.done)
	for {
		select {
		case <-h.closing:
			return
		case <-h.kick:
		case <-h.timer.C: // a look put off by lookGap
		}
		h.rounds.Add(1)
		h.rmu.Lock()
		next, _, _ := h.round(false, false)
		h.rmu.Unlock()
		h.timer.Stop()
		if !next.IsZero() {
			h.timer.Reset(time.Until(next))
		}
	}
}

// round has the head of every line on a written collection look, all under
// one read lock, and gives the turn to the claim that ranks a row first;
// the rest stay held and look again once its run is done. It returns when
// the loop should next wake by itself (zero: only when told), and whether
// it woke a held claim's goroutine (woke). With here, the claim given the
// turn is not woken but answered to the caller (run), which runs it itself
// (runHere) — unless its request has already ended. rmu is held.
//
// With unlooked (a writer's round), a lone line to look gets the turn
// without the look: with no other bid to rank against, the look would
// only tell whether its head takes a row, and the head's own run, all or
// nothing (OnlyIfTakes), tells that too: on the path from a put to the
// claim it wakes, a run alone picks once where a look then a run pick
// twice (docs/benchmarks.md, "Put → held worker, hop by hop"). A run
// that takes nothing reports back (turnDone) and its line looks in the
// loop's next round, which always looks: the look sets when time alone
// gives the line rows, and a loop's round that gave turns unlooked would
// give one again at each report.
func (h *Hub) round(here, unlooked bool) (next time.Time, run *waiter, woke bool) {
	h.mu.Lock()
	now := time.Now()
	later := func(t time.Time) {
		if next.IsZero() || t.Before(next) {
			next = t
		}
	}
	lines := h.roundLines[:0]
	// A line on two written collections looks once; a round on one
	// collection (the common case) needs no map, its lines being a set.
	var seen map[*line]bool
	if len(h.dirty) > 1 {
		seen = map[*line]bool{}
	}
	for c := range h.dirty {
		// The lines on a collection look together or not at all: a row
		// goes to the best bid only once every claim that could beat it
		// has looked.
		var gap time.Time
		busy := false
		for l := range h.byColl[c] {
			busy = busy || l.running != nil
			if g := l.lastNil.Add(lookGap); g.After(gap) {
				gap = g
			}
		}
		if busy {
			continue // looked at again when the running claim reports
		}
		if now.Before(gap) {
			later(gap) // writes that come faster than this share one look
			continue
		}
		delete(h.dirty, c)
		for l := range h.byColl[c] {
			if !seen[l] && len(l.waiters) > 0 {
				if seen != nil {
					seen[l] = true
				}
				lines = append(lines, l)
			}
		}
	}
	if unlooked && len(lines) == 1 {
		run, woke = h.turn(lines[0], lines[0].waiters[0], here)
		h.setAlarm()
		h.mu.Unlock()
		clear(lines)
		h.roundLines = lines
		return next, run, woke
	}
	heads := slices.Grow(h.roundHeads[:0], len(lines))[:len(lines)]
	reqs := slices.Grow(h.roundReqs[:0], len(lines))[:len(lines)]
	for i, l := range lines {
		heads[i] = l.waiters[0]
		reqs[i] = heads[i].req.Parsed
	}
	h.mu.Unlock()

	var bids []engine.Bid
	if len(reqs) > 0 {
		bids = h.db.LookInto(h.roundBids, reqs)
		h.metrics.looked(len(reqs))
	}

	h.mu.Lock()
	defer h.mu.Unlock()
	defer func() {
		// Kept for the next round, holding nothing of this one's.
		clear(lines)
		clear(heads)
		clear(reqs)
		clear(bids)
		h.roundLines, h.roundHeads, h.roundReqs = lines, heads, reqs
		if bids != nil {
			h.roundBids = bids
		}
	}()
	best := -1
	for i, b := range bids {
		l, w := lines[i], heads[i]
		if len(l.waiters) == 0 || l.waiters[0] != w || l.running != nil {
			continue // it left, or the line moved on, while we looked
		}
		switch {
		case b.Err != nil:
			h.give(l, w) // its run answers the error at once
			woke = true
		case b.Takes:
			if best < 0 || beats(b, w.seq, bids[best], heads[best].seq) {
				best = i
			}
		default:
			if l.entered {
				l.entered = false
			} else {
				l.lastNil = now
			}
			l.due = 0
			if b.HasDue {
				l.due = b.Due
			}
		}
	}
	if best >= 0 {
		run, woke = h.turn(lines[best], heads[best], here)
	}
	h.setAlarm()
	return next, run, woke
}

// turn gives w, the head of l, the turn: answered to be run on the
// caller's goroutine with here (round), else woken; h.mu is held.
func (h *Hub) turn(l *line, w *waiter, here bool) (run *waiter, woke bool) {
	if here && !w.given() {
		l.running, w.here = w, true
		return w, false
	}
	h.give(l, w)
	return nil, true
}

// setAlarm has the clock call timeMoved when the earliest line whose rows
// come due by time alone is due; h.mu is held.
func (h *Hub) setAlarm() {
	var due int64
	for _, l := range h.lines {
		if l.due != 0 && len(l.waiters) > 0 && (due == 0 || l.due < due) {
			due = l.due
		}
	}
	if due == h.alarmAt || h.closed {
		return
	}
	if h.stopAlarm != nil {
		h.stopAlarm()
		h.stopAlarm = nil
	}
	h.alarmAt = due
	if due != 0 {
		h.stopAlarm = h.clk.AtMS(due, h.timeMoved)
	}
}

// give hands a line's head the turn to run.
func (h *Hub) give(l *line, w *waiter) {
	l.running = w
	select {
	case w.turn <- struct{}{}:
	default:
	}
}
