package changes

import (
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/fenecdb/fenec/server/engine"
	"github.com/fenecdb/fenec/server/internal/wire"
	"github.com/fenecdb/fenec/server/store"
)

// The changes a consumer may still need are kept across a restart as side
// records of the database, one per commit that wrote a document, put by
// the engine's journal in the same unit as the write they describe
// (docs/changes.md, Across a restart). Each record names the position of
// the record before it (from), so that on open the hub takes only the
// records that follow one another with none missing, back to the first
// whose predecessor is gone: that one's from is the floor.
const journalKey = "changelog:"

// journal is the hub's side of the records: which are on disk, oldest
// first, so that the write that pushes them past the retention bounds
// deletes the oldest. Its lock is taken under the database's write lock
// (the engine's journal) and under the hub's; it takes neither.
type journal struct {
	mu     sync.Mutex
	on     atomic.Bool // some consumer exists: until then a write only loads this
	last   uint64
	recs   []jrec
	n      int
	bytes  int64
	size   int64
	orphan []string // records left out on open, deleted by the next write
}

type jrec struct {
	pos   uint64
	n     int
	bytes int64 // of rows
	size  int64 // of the side record: key and body
}

func recordKey(pos uint64) string { return fmt.Sprintf("%s%020d", journalKey, pos) }

// record is the engine's journal (engine.Journal): a record of the
// documents a write puts and deletes, and the oldest records past the
// bounds deleted with it.
func (h *Hub) record(seq uint64, changes []store.Change) (map[string]engine.Meta, []string) {
	j := &h.j
	if !j.on.Load() {
		return nil, nil
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	n, size := 0, 0
	for _, ch := range changes {
		if ch.Op == store.OpPut || ch.Op == store.OpDelete {
			n++
			size += len(ch.Coll) + len(ch.Body) + 24
		}
	}
	if n == 0 {
		return nil, nil
	}
	now := h.db.Clock().NowMS()
	from := j.last
	if from == 0 || from >= seq {
		from = seq - 1
	}
	b := make([]byte, 0, size+24)
	b = binary.AppendUvarint(b, from)
	b = binary.AppendVarint(b, now)
	var rows int64
	for _, ch := range changes {
		if ch.Op != store.OpPut && ch.Op != store.OpDelete {
			continue
		}
		b = append(b, byte(ch.Op))
		b = wire.AppendBytes(b, ch.Coll)
		b = binary.AppendVarint(b, ch.ID)
		body := ch.Body
		if ch.Op == store.OpDelete {
			body = nil
		}
		b = wire.AppendBytes(b, body)
		rows += int64(len(body))
	}
	key := recordKey(seq)
	j.last = seq
	j.add(jrec{pos: seq, n: n, bytes: rows, size: int64(len(key) + len(b))})
	del := j.orphan
	j.orphan = nil
	for len(j.recs) > 1 && (j.n > h.opts.Retain || j.bytes > h.opts.RetainBytes) {
		del = append(del, recordKey(j.recs[0].pos))
		j.remove(0)
	}
	// The age bound needs no write of its own: a record expires when its
	// change would, and the database's sweep deletes it.
	return map[string]engine.Meta{key: {Body: b, Expires: now + h.opts.RetainAge.Milliseconds()}}, del
}

// startJournal turns the records on once a consumer is about to exist.
// The records then follow from the position the database is at: a write
// before it wrote its changes to no record, and one after it does.
func (h *Hub) startJournal() {
	if h.j.on.Swap(true) {
		return
	}
	seq := h.db.Seq()
	h.j.mu.Lock()
	if h.j.last == 0 {
		h.j.last = seq
	}
	h.j.mu.Unlock()
}

var errRecord = errors.New("changes: a damaged change record")

// decodeRecord returns a record's commit; the rows are slices of body,
// which the database keeps unchanged.
func decodeRecord(pos uint64, body []byte) (from uint64, c commit, err error) {
	r := wire.Reader{B: body, Short: errRecord}
	from = r.Uvarint()
	c = commit{pos: pos, at: r.Varint()}
	for r.Err == nil && len(r.B) > 0 {
		op := store.Op(r.Byte())
		coll := string(r.Bytes())
		id := r.Varint()
		row := r.Bytes()
		if r.Err != nil {
			break
		}
		x := Change{Pos: pos, At: c.at, Coll: coll, ID: id, Delete: op == store.OpDelete}
		if !x.Delete && len(row) > 0 {
			x.Row = row
		}
		c.changes = append(c.changes, x)
		if !slices.Contains(c.colls, coll) {
			c.colls = append(c.colls, coll)
		}
	}
	return from, c, r.Err
}

// loadJournal reads the records the database holds, and returns the
// commits that follow one another back from the newest with none missing,
// oldest first, and the floor below them; ok is false when there are
// none. The journal's state is made anew from them (on start, and after
// an undo or a cluster node's snapshot, which change the records under
// it); the records left out are deleted by the next write. It takes no
// lock of the hub's and reads the database before it locks the journal:
// the engine's journal runs under the database's write lock.
func (h *Hub) loadJournal() (kept []commit, floor uint64, ok bool) {
	type rec struct {
		from uint64
		c    commit
		size int64
	}
	var recs []rec
	var bad []string
	for _, m := range h.db.MetaWithPrefix(journalKey) {
		pos, err := strconv.ParseUint(strings.TrimPrefix(m.Key, journalKey), 10, 64)
		if err != nil {
			bad = append(bad, m.Key)
			continue
		}
		from, c, err := decodeRecord(pos, m.Body)
		if err != nil || from >= pos {
			bad = append(bad, m.Key)
			continue
		}
		recs = append(recs, rec{from, c, int64(len(m.Key) + len(m.Body))})
	}
	consumers := len(h.db.MetaWithPrefix(consumerKey)) > 0
	seq := h.db.Seq()
	slices.SortFunc(recs, func(a, b rec) int { return cmp.Compare(a.c.pos, b.c.pos) })
	i := len(recs) - 1
	for i > 0 && recs[i].from == recs[i-1].c.pos {
		i--
	}

	j := &h.j
	j.mu.Lock()
	defer j.mu.Unlock()
	if consumers {
		j.on.Store(true)
	}
	j.recs, j.n, j.bytes, j.size, j.last = nil, 0, 0, 0, 0
	j.orphan = bad
	if len(recs) == 0 {
		if j.on.Load() {
			// A consumer exists and every record is gone (expired): the
			// records start again from here.
			j.last = seq
		}
		return nil, 0, false
	}
	floor = recs[i].from
	if i > 0 {
		// Not chained to the one after it: nothing at or before it can be
		// vouched for, even if a stale from names a position before it.
		floor = max(floor, recs[i-1].c.pos)
	}
	for _, r := range recs[:i] {
		j.orphan = append(j.orphan, recordKey(r.c.pos))
	}
	for _, r := range recs[i:] {
		kept = append(kept, r.c)
		j.add(jrec{pos: r.c.pos, n: len(r.c.changes), bytes: rowBytes(r.c), size: r.size})
	}
	j.last = recs[len(recs)-1].c.pos
	return kept, floor, true
}

func rowBytes(c commit) int64 {
	var n int64
	for _, x := range c.changes {
		n += int64(len(x.Row))
	}
	return n
}

// seen keeps the records of a write the journal did not make here (a
// cluster node applying the leader's log) in step, so that this node
// trims them if it becomes the leader.
func (h *Hub) seenRecords(w engine.Write) {
	j := &h.j
	j.mu.Lock()
	defer j.mu.Unlock()
	for _, ch := range w.Changes {
		if !strings.HasPrefix(ch.Key, journalKey) {
			continue
		}
		pos, err := strconv.ParseUint(strings.TrimPrefix(ch.Key, journalKey), 10, 64)
		if err != nil {
			continue
		}
		switch ch.Op {
		case store.OpMetaPut:
			if len(j.recs) > 0 && j.recs[len(j.recs)-1].pos >= pos {
				continue // made here
			}
			_, c, err := decodeRecord(pos, ch.Body)
			if err != nil {
				continue
			}
			j.add(jrec{pos: pos, n: len(c.changes), bytes: rowBytes(c), size: int64(len(ch.Key) + len(ch.Body))})
			j.last = max(j.last, pos)
		case store.OpMetaDelete:
			// Oldest first, so mostly the first one; sorted, so found
			// by halves otherwise. One made here is gone already.
			if i, ok := slices.BinarySearchFunc(j.recs, pos, func(r jrec, p uint64) int { return cmp.Compare(r.pos, p) }); ok {
				j.remove(i)
			}
		}
	}
}

func (j *journal) add(r jrec) {
	j.recs = append(j.recs, r)
	j.n += r.n
	j.bytes += r.bytes
	j.size += r.size
}

func (j *journal) remove(i int) {
	r := j.recs[i]
	j.n -= r.n
	j.bytes -= r.bytes
	j.size -= r.size
	switch i {
	case 0:
		j.recs = j.recs[1:] // the common case: no copy (append moves the rest on)
	case len(j.recs) - 1:
		j.recs = j.recs[:i]
	default:
		j.recs = slices.Delete(j.recs, i, i+1)
	}
}

// Records returns how many side records hold the changes kept across a
// restart, and their bytes (keys and bodies), as engine.DB.MetaLen and
// MetaBytes count them: the idempotency keys' caps leave them out.
func (h *Hub) Records() (n int, size int64) {
	h.j.mu.Lock()
	defer h.j.mu.Unlock()
	return len(h.j.recs), h.j.size
}
