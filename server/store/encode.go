package store

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/fenecdb/fenec/server/internal/wire"
)

// A log row holds all the changes of one commit group, encoded back to back.
// Unit boundaries are not kept: the row is written atomically, so the units
// in it are all there or none is, and replay only needs the changes in order.
//
// Each change is one op byte followed by its fields. Strings and bodies are a
// uvarint length then the bytes; ids and expiry times are zig-zag varints.
// When a change names the same collection as the change before it (the usual
// case: a statement writes many documents of one collection) the op byte
// carries sameColl and the name is left out.
const sameColl = 0x80

var errCorrupt = errors.New("corrupt log row")

// appendChanges appends the encoding of changes to dst.
func appendChanges(dst []byte, changes []Change) []byte {
	prev := ""
	first := true
	for _, c := range changes {
		op := byte(c.Op)
		switch c.Op {
		case OpCreate, OpDrop, OpPut, OpDelete:
			if !first && c.Coll == prev {
				dst = append(dst, op|sameColl)
			} else {
				dst = append(dst, op)
				dst = wire.AppendBytes(dst, c.Coll)
			}
			prev, first = c.Coll, false
			switch c.Op {
			case OpCreate, OpPut:
				dst = binary.AppendVarint(dst, c.ID)
				dst = wire.AppendBytes(dst, c.Body)
			case OpDelete:
				dst = binary.AppendVarint(dst, c.ID)
			}
		case OpMetaPut:
			dst = append(dst, op)
			dst = wire.AppendBytes(dst, c.Key)
			dst = wire.AppendBytes(dst, c.Body)
			dst = binary.AppendVarint(dst, c.Expires)
		case OpMetaDelete:
			dst = append(dst, op)
			dst = wire.AppendBytes(dst, c.Key)
		}
	}
	return dst
}

// decodeChanges calls fn with each change encoded in b, in order. Bodies
// alias b, so b must not be reused while they are referenced.
func decodeChanges(b []byte, fn func(Change) error) error {
	d := wire.Reader{B: b, Short: errCorrupt}
	prev := ""
	first := true
	for len(d.B) > 0 && d.Err == nil {
		opb := d.Byte()
		c := Change{Op: Op(opb &^ sameColl)}
		switch c.Op {
		case OpCreate, OpDrop, OpPut, OpDelete:
			if opb&sameColl != 0 {
				if first {
					return errCorrupt
				}
				c.Coll = prev
			} else {
				c.Coll = string(d.Bytes())
			}
			prev, first = c.Coll, false
			switch c.Op {
			case OpCreate, OpPut:
				c.ID = d.Varint()
				c.Body = d.Bytes()
			case OpDelete:
				c.ID = d.Varint()
			}
		case OpMetaPut, OpMetaDelete:
			if opb&sameColl != 0 {
				return errCorrupt
			}
			c.Key = string(d.Bytes())
			if c.Op == OpMetaPut {
				c.Body = d.Bytes()
				c.Expires = d.Varint()
			}
		default:
			return fmt.Errorf("%w: unknown op %d", errCorrupt, opb)
		}
		if d.Err != nil {
			break
		}
		if err := fn(c); err != nil {
			return err
		}
	}
	return d.Err
}
