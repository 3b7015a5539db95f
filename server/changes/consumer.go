package changes

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/fenecdb/fenec/server/engine"
)

// A consumer's position is a side record of the database (engine.Meta),
// committed through the same commit path as a write.
const consumerKey = "changes:"

// MaxLimit and DefaultLimit bound a read's changes; MaxWait its wait.
const (
	DefaultLimit = 100
	MaxLimit     = 1000
	MaxWait      = 30 * time.Second
)

// GoneError is a read or ack from a position older than the oldest kept.
type GoneError struct {
	Consumer string
	Pos      uint64
	Oldest   uint64
}

func (e *GoneError) Error() string {
	return fmt.Sprintf("consumer %s is at position %d, and the oldest change kept is %d: the changes between are no longer kept (--changes-retain); ack position %d to go on from the oldest kept", e.Consumer, e.Pos, e.Oldest, e.Oldest-1)
}

// PastError is an ack of a position past the newest.
type PastError struct{ Pos, Head uint64 }

func (e *PastError) Error() string {
	return fmt.Sprintf("position %d is past the newest change, %d", e.Pos, e.Head)
}

// ErrBusy is a read under a consumer name whose read is still running.
var ErrBusy = errors.New("changes: busy")

// Batch is what a consumer's read returns.
type Batch struct {
	Consumer string
	Pos      uint64 // the acknowledged position the read started after
	Next     uint64 // the position to ack once Changes are handled
	Changes  []Change
}

// CheckName returns why name is not a consumer's name, or nil.
func CheckName(name string) error {
	if name == "" || len(name) > 100 {
		return fmt.Errorf("a consumer's name is 1 to 100 characters, found %d", len(name))
	}
	for _, r := range name {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '-' || r == '.') {
			return fmt.Errorf("a consumer's name is letters, digits and _ - . only, found %q", r)
		}
	}
	return nil
}

// acked returns the consumer's acknowledged position, and whether it has
// one.
func (h *Hub) acked(name string) (uint64, bool) {
	m, ok := h.db.GetMeta(consumerKey + name)
	if !ok {
		return 0, false
	}
	var rec struct{ Position uint64 }
	if json.Unmarshal(m.Body, &rec) != nil {
		return 0, false
	}
	return rec.Position, true
}

// Read returns the changes after the consumer's acknowledged position, in
// commit order, of coll only when coll is not "", at most limit (but whole
// commits: one larger than limit comes alone and whole); when
// there are none it waits up to wait for a commit that brings one. A
// consumer never acknowledged reads from the oldest change kept. Only one
// read per name runs at a time (ErrBusy).
func (h *Hub) Read(ctx context.Context, name, coll string, limit int, wait time.Duration) (*Batch, error) {
	if limit <= 0 {
		limit = DefaultLimit
	}
	h.mu.Lock()
	if h.busy[name] {
		h.mu.Unlock()
		return nil, ErrBusy
	}
	h.busy[name] = true
	h.mu.Unlock()
	defer func() {
		h.mu.Lock()
		delete(h.busy, name)
		h.mu.Unlock()
	}()
	pos, had := h.acked(name)
	var timer <-chan time.Time
	if wait > 0 {
		t := time.NewTimer(wait)
		defer t.Stop()
		timer = t.C
	}
	for {
		// Only what the file has: a consumer must not act on a write that
		// a crash would undo. A commit wakes the wait below before its
		// sync; the read then waits for the sync (polled: it is under way).
		durable := h.db.Durable()
		h.mu.Lock()
		if !had {
			pos = h.floor
		}
		if pos < h.floor {
			oldest := h.floor + 1
			h.mu.Unlock()
			return nil, &GoneError{Consumer: name, Pos: pos, Oldest: oldest}
		}
		b := &Batch{Consumer: name, Pos: pos, Next: pos}
		full, syncing := false, false
	scan:
		for _, c := range h.kept {
			if c.pos <= pos {
				continue
			}
			if c.pos > durable {
				syncing = true
				break
			}
			// A batch holds whole commits: its Next is a commit's
			// position, and acking it must pass every change handed out.
			// So a commit that would go past limit waits for the next read
			// — unless the batch has none yet: a commit larger than limit
			// comes whole.
			n := 0
			for _, x := range c.changes {
				if coll == "" || x.Coll == coll {
					n++
				}
			}
			if n == 0 {
				continue
			}
			if len(b.Changes) > 0 && len(b.Changes)+n > limit {
				full = true
				break scan
			}
			for _, x := range c.changes {
				if coll == "" || x.Coll == coll {
					b.Changes = append(b.Changes, x)
				}
			}
			b.Next = c.pos
		}
		if upTo := min(h.head, durable); !full && !syncing && upTo > b.Next {
			// Every commit up to head was looked at: acking head skips
			// none, and passes the commits coll did not have.
			b.Next = upTo
		}
		if _, ok := h.seen[name]; ok || had {
			// Counted (the lag metrics) once acked: a read alone, under
			// any name a client makes up, adds no series.
			h.seen[name] = pos
		}
		woke, done := h.woke, h.done
		h.mu.Unlock()
		if len(b.Changes) > 0 || timer == nil {
			return b, nil
		}
		var synced <-chan time.Time
		if syncing {
			synced = time.After(time.Millisecond)
		}
		select {
		case <-synced:
		case <-woke:
		case <-timer:
			return b, nil
		case <-done:
			return b, nil
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// Ack moves the consumer's position to pos, committed as a write: it may
// move back, but not before the oldest change kept, nor past the head.
func (h *Hub) Ack(ctx context.Context, name string, pos uint64) error {
	h.mu.Lock()
	head, floor := h.head, h.floor
	h.mu.Unlock()
	if pos > head {
		return &PastError{Pos: pos, Head: head}
	}
	if pos < floor {
		return &GoneError{Consumer: name, Pos: pos, Oldest: floor + 1}
	}
	// From now on every write keeps its changes across a restart.
	h.startJournal()
	body := []byte(`{"position":` + strconv.FormatUint(pos, 10) + `}`)
	_, err := h.db.Run(ctx, nil, engine.RunOptions{Meta: func([]*engine.Result) map[string]engine.Meta {
		return map[string]engine.Meta{consumerKey + name: {Body: body}}
	}})
	if err != nil {
		return err
	}
	h.mu.Lock()
	h.seen[name] = pos
	h.mu.Unlock()
	return nil
}

// Position returns the consumer's acknowledged position and whether it has
// one.
func (h *Hub) Position(name string) (uint64, bool) { return h.acked(name) }

// lag returns, for each consumer acked (or read once acked) since the
// start, how many
// positions its acknowledged position is behind the head, and how old
// (by the database's clock, in seconds) the oldest change it has not
// acked is.
func (h *Hub) lag() map[string][2]float64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	now := h.db.Clock().NowMS()
	out := map[string][2]float64{}
	for name, pos := range h.seen {
		var secs float64
		for _, c := range h.kept {
			if c.pos > pos && len(c.changes) > 0 {
				secs = float64(now-c.at) / 1000
				break
			}
		}
		out[name] = [2]float64{float64(h.head - min(pos, h.head)), secs}
	}
	return out
}
