// Package wire reads and writes the fields of the binary records the
// store's log and the cluster's log entries are made of: bytes, varints
// (zig-zag, for signed numbers), uvarints, and strings or byte slices
// after their uvarint length.
package wire

import (
	"encoding/binary"
	"errors"
)

// ErrShort is a Reader's error when a field runs past the end of the
// record and no Short error was given.
var ErrShort = errors.New("truncated")

// Reader reads fields off the front of B. The first read that finds B too
// short for its field sets Err (to Short, or ErrShort), empties B, and
// makes every later read return zero.
type Reader struct {
	B     []byte
	Err   error
	Short error
}

func (r *Reader) fail() {
	if r.Err == nil {
		r.Err = r.Short
		if r.Err == nil {
			r.Err = ErrShort
		}
	}
	r.B = nil
}

// Byte returns the next byte.
func (r *Reader) Byte() byte {
	if len(r.B) < 1 {
		r.fail()
		return 0
	}
	c := r.B[0]
	r.B = r.B[1:]
	return c
}

// Uvarint returns the next uvarint.
func (r *Reader) Uvarint() uint64 { return next(r, binary.Uvarint) }

// Varint returns the next zig-zag varint.
func (r *Reader) Varint() int64 { return next(r, binary.Varint) }

// next returns the number read reads off the front of r.B.
func next[T uint64 | int64](r *Reader, read func([]byte) (T, int)) T {
	v, n := read(r.B)
	if n <= 0 {
		r.fail()
		return 0
	}
	r.B = r.B[n:]
	return v
}

// Bytes returns the next byte slice (AppendBytes's). It aliases B, capped
// at its end, so that an append to it never writes into the record.
func (r *Reader) Bytes() []byte {
	n, k := binary.Uvarint(r.B)
	if k <= 0 || n > uint64(len(r.B)-k) {
		r.fail()
		return nil
	}
	out := r.B[k : k+int(n) : k+int(n)]
	r.B = r.B[k+int(n):]
	return out
}

// AppendBytes appends b after its uvarint length.
func AppendBytes[T string | []byte](dst []byte, b T) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(b)))
	return append(dst, b...)
}
