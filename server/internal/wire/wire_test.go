package wire

import (
	"encoding/binary"
	"errors"
	"testing"
)

// TestReader reads back what the appends wrote, and then fails: a short
// read sets the error given (or ErrShort) and every read after it
// returns zero.
func TestReader(t *testing.T) {
	b := []byte{7}
	b = binary.AppendUvarint(b, 300)
	b = binary.AppendVarint(b, -5)
	b = AppendBytes(b, "coll")
	b = AppendBytes(b, []byte{})
	r := Reader{B: b}
	if c, u, v, s, e := r.Byte(), r.Uvarint(), r.Varint(), r.Bytes(), r.Bytes(); c != 7 || u != 300 || v != -5 || string(s) != "coll" || len(e) != 0 || r.Err != nil || len(r.B) != 0 {
		t.Fatalf("read %d %d %d %q %q, err %v, %d bytes left", c, u, v, s, e, r.Err, len(r.B))
	}
	if s := (&Reader{B: AppendBytes(nil, "abc")}).Bytes(); cap(s) != 3 {
		t.Fatalf("Bytes returned a slice of cap %d, want 3 (capped at its end)", cap(s))
	}
	mine := errors.New("corrupt")
	short := Reader{B: AppendBytes(nil, "abcdef")[:4], Short: mine}
	if s := short.Bytes(); s != nil || short.Err != mine {
		t.Fatalf("a short field read %q, err %v; want nothing, %v", s, short.Err, mine)
	}
	if short.Byte() != 0 || short.Varint() != 0 || short.Uvarint() != 0 || short.Err != mine {
		t.Fatalf("reads after a short one returned something, or changed the error (%v)", short.Err)
	}
	var none Reader
	if none.Varint(); !errors.Is(none.Err, ErrShort) {
		t.Fatalf("an empty record's read set err %v, want ErrShort", none.Err)
	}
}
