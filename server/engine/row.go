package engine

import (
	"encoding/binary"
	"math"
	"unsafe"

	"github.com/fenecdb/fenec/server/fenecql"
)

// A document's fields are held as one block of bytes, not as a
// fenecql.Value (24 bytes, and a pointer for the collector to follow) per
// field: a backlog's memory is mostly its documents (docs/architecture.md,
// "Memory"). The block is the fields' total length (uvarint), then each
// field in schema order: a tag byte and what the tag says follows.
//
//	tagNull, tagFalse, tagTrue   nothing
//	tagInt+n, tagTime+n          the number in n little-endian bytes (0..8), sign-extended
//	tagFloat                     8 bytes: the float's bits
//	tagPoint                     16 bytes: a geo point's two floats
//	tagText                      uvarint length, the text's bytes
//	tagList, tagObject           uvarint length, the JSON text (AppendJSON's)
//
// A read decodes the field it needs: numbers are copied out; a text is a
// string over the block's bytes and a list or object a packed value over
// them (fenecql.Packed), so reading allocates nothing but a geo point's
// list. Blocks are never changed once written, as Docs are not.
const (
	tagNull byte = iota
	tagFalse
	tagTrue
	tagFloat
	tagPoint
	tagText
	tagList
	tagObject
	tagInt  byte = 16 // 16..24
	tagTime byte = 32 // 32..40
)

// intBytes returns how few little-endian bytes hold v, sign-extended.
func intBytes(v int64) int {
	for n := 0; n < 8; n++ {
		if signExtend(uint64(v), n) == v {
			return n
		}
	}
	return 8
}

// signExtend returns the int held in u's low n bytes.
func signExtend(u uint64, n int) int64 {
	if n == 0 {
		return 0
	}
	s := uint(64 - 8*n)
	return int64(u<<s) >> s
}

func appendInt(b []byte, tag byte, v int64) []byte {
	n := intBytes(v)
	b = append(b, tag+byte(n))
	for k := 0; k < n; k++ {
		b = append(b, byte(v>>(8*k)))
	}
	return b
}

// appendJSON appends tag, then v's JSON text led by its length.
func appendJSON(b []byte, tag byte, v fenecql.Value) []byte {
	b = append(b, tag)
	start := len(b)
	b = fenecql.AppendJSON(b, v)
	n := len(b) - start
	var lb [binary.MaxVarintLen64]byte
	k := binary.PutUvarint(lb[:], uint64(n))
	b = append(b, lb[:k]...)
	copy(b[start+k:], b[start:start+n])
	copy(b[start:], lb[:k])
	return b
}

// appendField appends v, a value of a field of type t, as the block holds it.
func appendField(b []byte, t fenecql.Type, v fenecql.Value) []byte {
	switch v.Kind() {
	case fenecql.KindNull:
		return append(b, tagNull)
	case fenecql.KindBool:
		if v.Bool() {
			return append(b, tagTrue)
		}
		return append(b, tagFalse)
	case fenecql.KindInt:
		return appendInt(b, tagInt, v.Int())
	case fenecql.KindTime:
		return appendInt(b, tagTime, v.Time())
	case fenecql.KindFloat:
		return binary.LittleEndian.AppendUint64(append(b, tagFloat), math.Float64bits(v.Float()))
	case fenecql.KindText:
		s := v.Text()
		return append(binary.AppendUvarint(append(b, tagText), uint64(len(s))), s...)
	case fenecql.KindList:
		if t == fenecql.TypeGeo {
			// A geo field holds [lon, lat] as two floats (fenecql.Coerce);
			// its index reads them back at every write.
			if l := v.List(); len(l) == 2 && l[0].Kind() == fenecql.KindFloat && l[1].Kind() == fenecql.KindFloat {
				b = binary.LittleEndian.AppendUint64(append(b, tagPoint), math.Float64bits(l[0].Float()))
				return binary.LittleEndian.AppendUint64(b, math.Float64bits(l[1].Float()))
			}
		}
		return appendJSON(b, tagList, v)
	}
	return appendJSON(b, tagObject, v)
}

// uvarint reads a uvarint at b[i:]; it returns the number and the index
// past it. The block was written by binary.AppendUvarint.
func uvarint(b []byte, i int) (uint64, int) {
	if c := b[i]; c < 0x80 {
		return uint64(c), i + 1
	}
	n, k := binary.Uvarint(b[i:])
	return n, i + k
}

// fieldEnd returns the index past the field that starts at b[i].
func fieldEnd(b []byte, i int) int {
	tag := b[i]
	i++
	switch {
	case tag >= tagTime:
		return i + int(tag-tagTime)
	case tag >= tagInt:
		return i + int(tag-tagInt)
	}
	switch tag {
	case tagFloat:
		return i + 8
	case tagPoint:
		return i + 16
	case tagText, tagList, tagObject:
		n, i := uvarint(b, i)
		return i + int(n)
	}
	return i
}

// decodeField returns the value of the field that starts at b[i].
func decodeField(b []byte, i int) fenecql.Value {
	tag := b[i]
	i++
	if tag >= tagInt {
		n, base := int(tag-tagInt), tagInt
		if tag >= tagTime {
			n, base = int(tag-tagTime), tagTime
		}
		var u uint64
		for k := 0; k < n; k++ {
			u |= uint64(b[i+k]) << (8 * k)
		}
		if base == tagTime {
			return fenecql.Time(signExtend(u, n))
		}
		return fenecql.Int(signExtend(u, n))
	}
	switch tag {
	case tagFalse:
		return fenecql.Bool(false)
	case tagTrue:
		return fenecql.Bool(true)
	case tagFloat:
		return fenecql.Float(math.Float64frombits(binary.LittleEndian.Uint64(b[i:])))
	case tagPoint:
		return fenecql.List([]fenecql.Value{
			fenecql.Float(math.Float64frombits(binary.LittleEndian.Uint64(b[i:]))),
			fenecql.Float(math.Float64frombits(binary.LittleEndian.Uint64(b[i+8:]))),
		})
	case tagText:
		n, i := uvarint(b, i)
		if n == 0 {
			return fenecql.Text("")
		}
		return fenecql.Text(unsafe.String(&b[i], int(n)))
	case tagList:
		n, i := uvarint(b, i)
		return fenecql.Packed(fenecql.KindList, b[i:i+int(n):i+int(n)])
	case tagObject:
		n, i := uvarint(b, i)
		return fenecql.Packed(fenecql.KindObject, b[i:i+int(n):i+int(n)])
	}
	return fenecql.Null
}

// row returns the document's fields' block, less its length.
func (d *Doc) row() []byte {
	p := unsafe.Pointer(d.p)
	if p == nil {
		return nil
	}
	var n uint64
	k := 0
	for shift := uint(0); ; shift += 7 {
		c := *(*byte)(unsafe.Add(p, k))
		k++
		n |= uint64(c&0x7f) << shift
		if c < 0x80 {
			break
		}
	}
	return unsafe.Slice((*byte)(unsafe.Add(p, k)), n)
}

// val returns field f's value.
func (d *Doc) val(f int) fenecql.Value {
	b := d.row()
	i := 0
	for ; f > 0; f-- {
		i = fieldEnd(b, i)
	}
	return decodeField(b, i)
}

// isNull reports whether field f is null, without decoding it.
func (d *Doc) isNull(f int) bool {
	b := d.row()
	i := 0
	for ; f > 0; f-- {
		i = fieldEnd(b, i)
	}
	return b[i] == tagNull
}

// appendVals appends every field's value to dst, in schema order.
func (d *Doc) appendVals(dst []fenecql.Value) []fenecql.Value {
	b := d.row()
	for i := 0; i < len(b); i = fieldEnd(b, i) {
		dst = append(dst, decodeField(b, i))
	}
	return dst
}

// fieldBuf is room on a caller's stack for a document's values, as a
// write gathers them before encode.
type fieldBuf [16]fenecql.Value

// blank returns a null value per field, in buf when it has room.
func (s *schema) blank(buf *fieldBuf) []fenecql.Value {
	if n := len(s.fields); n <= len(buf) {
		return buf[:n]
	}
	return make([]fenecql.Value, len(s.fields))
}

// vals returns every field's value, in schema order, in buf when it has
// room.
func (d *Doc) vals(buf *fieldBuf) []fenecql.Value {
	if len(d.s.fields) <= len(buf) {
		return d.appendVals(buf[:0])
	}
	return d.appendVals(make([]fenecql.Value, 0, len(d.s.fields)))
}

// docBlock is a Doc with room (A) for its block in the same allocation:
// one object per document, whose only pointers (the Doc's) come first,
// so the collector marks no further than them.
type docBlock[A any] struct {
	Doc
	b A
}

func newBlock[A any]() (*Doc, []byte) {
	blk := new(docBlock[A])
	return &blk.Doc, unsafe.Slice((*byte)(unsafe.Pointer(&blk.b)), unsafe.Sizeof(blk.b))
}

// docHeader is a Doc's size; each of blockSizes, with it, is one of the
// Go allocator's size classes, so no byte of a block is rounded away.
const docHeader = int(unsafe.Sizeof(Doc{}))

var blockSizes = [...]struct {
	n     int
	alloc func() (*Doc, []byte)
}{
	{32 - docHeader, newBlock[[32 - docHeader]byte]},
	{48 - docHeader, newBlock[[48 - docHeader]byte]},
	{64 - docHeader, newBlock[[64 - docHeader]byte]},
	{80 - docHeader, newBlock[[80 - docHeader]byte]},
	{96 - docHeader, newBlock[[96 - docHeader]byte]},
	{112 - docHeader, newBlock[[112 - docHeader]byte]},
	{128 - docHeader, newBlock[[128 - docHeader]byte]},
	{144 - docHeader, newBlock[[144 - docHeader]byte]},
	{160 - docHeader, newBlock[[160 - docHeader]byte]},
	{176 - docHeader, newBlock[[176 - docHeader]byte]},
	{192 - docHeader, newBlock[[192 - docHeader]byte]},
	{208 - docHeader, newBlock[[208 - docHeader]byte]},
	{224 - docHeader, newBlock[[224 - docHeader]byte]},
	{240 - docHeader, newBlock[[240 - docHeader]byte]},
	{256 - docHeader, newBlock[[256 - docHeader]byte]},
	{288 - docHeader, newBlock[[288 - docHeader]byte]},
	{320 - docHeader, newBlock[[320 - docHeader]byte]},
	{352 - docHeader, newBlock[[352 - docHeader]byte]},
	{384 - docHeader, newBlock[[384 - docHeader]byte]},
	{416 - docHeader, newBlock[[416 - docHeader]byte]},
	{448 - docHeader, newBlock[[448 - docHeader]byte]},
	{480 - docHeader, newBlock[[480 - docHeader]byte]},
	{512 - docHeader, newBlock[[512 - docHeader]byte]},
	{576 - docHeader, newBlock[[576 - docHeader]byte]},
	{640 - docHeader, newBlock[[640 - docHeader]byte]},
	{704 - docHeader, newBlock[[704 - docHeader]byte]},
	{768 - docHeader, newBlock[[768 - docHeader]byte]},
	{896 - docHeader, newBlock[[896 - docHeader]byte]},
	{1024 - docHeader, newBlock[[1024 - docHeader]byte]},
}

// encode returns the document of the schema with id and vals (one per
// field, in order). It keeps nothing of vals: their texts and JSON are
// copied into the block.
func (s *schema) encode(id int64, vals []fenecql.Value) *Doc {
	if len(vals) != len(s.fields) {
		panic("engine: a document's values do not match its schema")
	}
	if len(vals) == 0 {
		return &Doc{ID: id, s: s}
	}
	var scratch [256]byte
	b := scratch[:binary.MaxVarintLen64]
	for f, v := range vals {
		b = appendField(b, s.fields[f].Type, v)
	}
	fields := b[binary.MaxVarintLen64:]
	var lb [binary.MaxVarintLen64]byte
	k := binary.PutUvarint(lb[:], uint64(len(fields)))
	need := k + len(fields)
	var d *Doc
	var blk []byte
	for _, bs := range blockSizes {
		if bs.n >= need {
			d, blk = bs.alloc()
			break
		}
	}
	if d == nil {
		d, blk = &Doc{}, make([]byte, need)
	}
	copy(blk, lb[:k])
	copy(blk[k:], fields)
	d.ID, d.s, d.p = id, s, &blk[0]
	return d
}
