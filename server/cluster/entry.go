package cluster

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/fenecdb/fenec/server/internal/wire"
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
		b = wire.AppendBytes(b, c.Coll)
		b = binary.AppendVarint(b, c.ID)
		b = wire.AppendBytes(b, c.Key)
		b = wire.AppendBytes(b, c.Body)
		b = binary.AppendVarint(b, c.Expires)
	}
	return b
}

var errBadEntry = errors.New("cluster: a log entry that is not a write")

func decodeEntry(b []byte) (seq, mark uint64, changes []store.Change, err error) {
	if len(b) == 0 || b[0] != entryVersion {
		return 0, 0, nil, errBadEntry
	}
	r := wire.Reader{B: b[1:]}
	seq, mark = r.Uvarint(), r.Uvarint()
	for r.Err == nil && len(r.B) > 0 {
		var c store.Change
		c.Op = store.Op(r.Byte())
		c.Coll = string(r.Bytes())
		c.ID = r.Varint()
		c.Key = string(r.Bytes())
		if body := r.Bytes(); len(body) > 0 {
			c.Body = body
		}
		c.Expires = r.Varint()
		if c.Op < store.OpCreate || c.Op > store.OpMetaDelete {
			r.Err = fmt.Errorf("change of unknown op %d", c.Op)
		}
		changes = append(changes, c)
	}
	if r.Err != nil {
		return 0, 0, nil, fmt.Errorf("%w: %v", errBadEntry, r.Err)
	}
	return seq, mark, changes, nil
}
