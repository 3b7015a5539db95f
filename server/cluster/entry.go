package cluster

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/fenecdb/fenec/server/store"
)

// An entry of the log is one write: its change number, the mark of the
// memory that made it (engine.DB.Apply), and its changes as the store
// takes them — computed values, never statements, so every node applies
// the same thing (docs/cluster.md).
const entryVersion = 1

func encodeEntry(seq, mark uint64, changes []store.Change) []byte {
	size := 1 + 2*binary.MaxVarintLen64
	for _, c := range changes {
		size += 1 + 4*binary.MaxVarintLen64 + len(c.Coll) + len(c.Key) + len(c.Body) + binary.MaxVarintLen64
	}
	b := make([]byte, 0, size)
	b = append(b, entryVersion)
	b = binary.AppendUvarint(b, seq)
	b = binary.AppendUvarint(b, mark)
	for _, c := range changes {
		b = append(b, byte(c.Op))
		b = binary.AppendUvarint(b, uint64(len(c.Coll)))
		b = append(b, c.Coll...)
		b = binary.AppendVarint(b, c.ID)
		b = binary.AppendUvarint(b, uint64(len(c.Key)))
		b = append(b, c.Key...)
		b = binary.AppendUvarint(b, uint64(len(c.Body)))
		b = append(b, c.Body...)
		b = binary.AppendVarint(b, c.Expires)
	}
	return b
}

var errBadEntry = errors.New("cluster: a log entry that is not a write")

func decodeEntry(b []byte) (seq, mark uint64, changes []store.Change, err error) {
	if len(b) == 0 || b[0] != entryVersion {
		return 0, 0, nil, errBadEntry
	}
	r := reader{b: b[1:]}
	seq, mark = r.uvarint(), r.uvarint()
	for r.err == nil && len(r.b) > 0 {
		var c store.Change
		c.Op = store.Op(r.byte())
		c.Coll = string(r.bytes())
		c.ID = r.varint()
		c.Key = string(r.bytes())
		if body := r.bytes(); len(body) > 0 {
			c.Body = body
		}
		c.Expires = r.varint()
		if c.Op < store.OpCreate || c.Op > store.OpMetaDelete {
			r.err = fmt.Errorf("change of unknown op %d", c.Op)
		}
		changes = append(changes, c)
	}
	if r.err != nil {
		return 0, 0, nil, fmt.Errorf("%w: %v", errBadEntry, r.err)
	}
	return seq, mark, changes, nil
}

type reader struct {
	b   []byte
	err error
}

func (r *reader) fail() { r.err, r.b = errors.New("truncated"), nil }

func (r *reader) byte() byte {
	if len(r.b) < 1 {
		r.fail()
		return 0
	}
	c := r.b[0]
	r.b = r.b[1:]
	return c
}

func (r *reader) uvarint() uint64 {
	v, n := binary.Uvarint(r.b)
	if n <= 0 {
		r.fail()
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *reader) varint() int64 {
	v, n := binary.Varint(r.b)
	if n <= 0 {
		r.fail()
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *reader) bytes() []byte {
	n := r.uvarint()
	if r.err != nil || uint64(len(r.b)) < n {
		r.fail()
		return nil
	}
	v := r.b[:n:n]
	r.b = r.b[n:]
	return v
}
