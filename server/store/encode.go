package store

import (
	"encoding/binary"
	"errors"
	"fmt"
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
				dst = appendBytes(dst, c.Coll)
			}
			prev, first = c.Coll, false
			switch c.Op {
			case OpCreate, OpPut:
				dst = binary.AppendVarint(dst, c.ID)
				dst = appendBytes(dst, c.Body)
			case OpDelete:
				dst = binary.AppendVarint(dst, c.ID)
			}
		case OpMetaPut:
			dst = append(dst, op)
			dst = appendBytes(dst, c.Key)
			dst = appendBytes(dst, c.Body)
			dst = binary.AppendVarint(dst, c.Expires)
		case OpMetaDelete:
			dst = append(dst, op)
			dst = appendBytes(dst, c.Key)
		}
	}
	return dst
}

func appendBytes[T string | []byte](dst []byte, b T) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(b)))
	return append(dst, b...)
}

// decodeChanges calls fn with each change encoded in b, in order. Bodies
// alias b, so b must not be reused while they are referenced.
func decodeChanges(b []byte, fn func(Change) error) error {
	d := decoder{b: b}
	prev := ""
	first := true
	for len(d.b) > 0 && d.err == nil {
		opb := d.b[0]
		d.b = d.b[1:]
		c := Change{Op: Op(opb &^ sameColl)}
		switch c.Op {
		case OpCreate, OpDrop, OpPut, OpDelete:
			if opb&sameColl != 0 {
				if first {
					return errCorrupt
				}
				c.Coll = prev
			} else {
				c.Coll = string(d.bytes())
			}
			prev, first = c.Coll, false
			switch c.Op {
			case OpCreate, OpPut:
				c.ID = d.varint()
				c.Body = d.bytes()
			case OpDelete:
				c.ID = d.varint()
			}
		case OpMetaPut, OpMetaDelete:
			if opb&sameColl != 0 {
				return errCorrupt
			}
			c.Key = string(d.bytes())
			if c.Op == OpMetaPut {
				c.Body = d.bytes()
				c.Expires = d.varint()
			}
		default:
			return fmt.Errorf("%w: unknown op %d", errCorrupt, opb)
		}
		if d.err != nil {
			break
		}
		if err := fn(c); err != nil {
			return err
		}
	}
	return d.err
}

// decoder reads fields off the front of b; the first short read sets err
// and makes every later read answer zero.
type decoder struct {
	b   []byte
	err error
}

func (d *decoder) varint() int64 {
	v, n := binary.Varint(d.b)
	if n <= 0 {
		d.fail()
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *decoder) bytes() []byte {
	n, k := binary.Uvarint(d.b)
	if k <= 0 || n > uint64(len(d.b)-k) {
		d.fail()
		return nil
	}
	out := d.b[k : k+int(n) : k+int(n)]
	d.b = d.b[k+int(n):]
	return out
}

func (d *decoder) fail() {
	if d.err == nil {
		d.err = errCorrupt
	}
	d.b = nil
}
