package engine

import (
	"encoding/binary"
	"math"
	"math/bits"
	"unsafe"

	"github.com/fenecdb/fenec/server/fenecql"
)

// A document's fields are held as one block of bytes, not as a
// fenecql.Value (24 bytes, and a pointer for the collector to follow) per
// field: a backlog's memory is mostly its documents (docs/architecture.md,
// "Memory"). The block is, after its length (uvarint):
//
//	tags    a byte per field, in schema order: its kind (below)
//	slots   8 bytes per int, float and timestamp field of the schema, in
//	        schema order (0 when null): where such a field is, is known
//	        from the schema alone, so reading it walks nothing
//	rest    each text, json and geo field's bytes, in schema order, as
//	        long as its tag says:
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

// intBytes returns how few little-endian bytes hold v, sign-extended:
// its bits and a sign bit.
func intBytes(v int64) int {
	if v == 0 {
		return 0
	}
	return (bits.Len64(uint64(v^(v>>63))) + 8) / 8
}

// signExtend returns the int held in u's low n bytes.
func signExtend(u uint64, n int) int64 {
	if n == 0 {
		return 0
	}
	s := uint(64 - 8*n)
	return int64(u<<s) >> s
}

// isPoint reports whether v, a value of a field of type t, is a geo
// point as fenecql.Coerce makes them: two floats.
func isPoint(t fenecql.Type, v fenecql.Value) bool {
	if t != fenecql.TypeGeo || v.Kind() != fenecql.KindList {
		return false
	}
	l := v.List()
	return len(l) == 2 && l[0].Kind() == fenecql.KindFloat && l[1].Kind() == fenecql.KindFloat
}

// tag returns field f's tag for v.
func (s *schema) tag(f int, v fenecql.Value) byte {
	k := v.Kind()
	if s.l.slot[f] >= 0 {
		switch k {
		case fenecql.KindNull:
			return tagNull
		case fenecql.KindInt:
			return tagInt + 8
		case fenecql.KindTime:
			return tagTime + 8
		case fenecql.KindFloat:
			return tagFloat
		}
		// The engine fits every value to its field's type (storedValue).
		panic("engine: a " + s.fields[f].Type.String() + " field holds a " + k.String())
	}
	switch k {
	case fenecql.KindNull:
		return tagNull
	case fenecql.KindBool:
		if v.Bool() {
			return tagTrue
		}
		return tagFalse
	case fenecql.KindInt:
		return tagInt + byte(intBytes(v.Int()))
	case fenecql.KindTime:
		return tagTime + byte(intBytes(v.Time()))
	case fenecql.KindFloat:
		return tagFloat
	case fenecql.KindText:
		return tagText
	case fenecql.KindList:
		if isPoint(s.fields[f].Type, v) {
			return tagPoint
		}
		return tagList
	}
	return tagObject
}

// slotBits returns the 8 bytes of an int, float or timestamp field's slot.
func slotBits(v fenecql.Value) uint64 {
	if v.Kind() == fenecql.KindFloat {
		return math.Float64bits(v.Float())
	}
	return uint64(v.Int())
}

// appendRest appends v's bytes in the rest, of a field of type t whose
// tag is tag.
func appendRest(b []byte, tag byte, v fenecql.Value) []byte {
	switch {
	case tag >= tagTime:
		return appendLE(b, uint64(v.Time()), int(tag-tagTime))
	case tag >= tagInt:
		return appendLE(b, uint64(v.Int()), int(tag-tagInt))
	}
	switch tag {
	case tagFloat:
		return binary.LittleEndian.AppendUint64(b, math.Float64bits(v.Float()))
	case tagPoint:
		l := v.List()
		b = binary.LittleEndian.AppendUint64(b, math.Float64bits(l[0].Float()))
		return binary.LittleEndian.AppendUint64(b, math.Float64bits(l[1].Float()))
	case tagText:
		t := v.Text()
		return append(binary.AppendUvarint(b, uint64(len(t))), t...)
	case tagList, tagObject:
		if text, ok := v.PackedJSON(); ok {
			return append(binary.AppendUvarint(b, uint64(len(text))), text...)
		}
		start := len(b)
		b = fenecql.AppendJSON(b, v)
		n := len(b) - start
		var lb [binary.MaxVarintLen64]byte
		k := binary.PutUvarint(lb[:], uint64(n))
		b = append(b, lb[:k]...)
		copy(b[start+k:], b[start:start+n])
		copy(b[start:], lb[:k])
	}
	return b
}

// appendLE appends u's low n bytes, little-endian.
func appendLE(b []byte, u uint64, n int) []byte {
	for k := 0; k < n; k++ {
		b = append(b, byte(u>>(8*k)))
	}
	return b
}

// restSize returns how many bytes appendRest appends, or -1 when only
// appending tells (a list or object not packed).
func restSize(tag byte, v fenecql.Value) int {
	if n := tagLen[tag]; n >= 0 {
		return int(n)
	}
	var n int
	if tag == tagText {
		n = len(v.Text())
	} else if text, ok := v.PackedJSON(); ok {
		n = len(text)
	} else {
		return -1
	}
	return uvarintLen(n) + n
}

func uvarintLen(n int) int { return (bits.Len64(uint64(n)|1) + 6) / 7 }

// uvarint reads a uvarint at b[i:]; it returns the number and the index
// past it. The block was written by binary.AppendUvarint.
func uvarint(b []byte, i int) (uint64, int) {
	if c := b[i]; c < 0x80 {
		return uint64(c), i + 1
	}
	n, k := binary.Uvarint(b[i:])
	return n, i + k
}

// tagLen[tag] is how many bytes a field of kind tag has in the rest, or
// -1 for a length (uvarint) and that many.
var tagLen = func() (l [256]int8) {
	for n := range int8(9) {
		l[tagInt+byte(n)], l[tagTime+byte(n)] = n, n
	}
	l[tagFloat], l[tagPoint] = 8, 16
	l[tagText], l[tagList], l[tagObject] = -1, -1, -1
	return l
}()

// decodeField returns the value of kind tag whose bytes start at b[i].
func decodeField(b []byte, tag byte, i int) fenecql.Value {
	if tag >= tagInt {
		n, base := int(tag-tagInt), tagInt
		if tag >= tagTime {
			n, base = int(tag-tagTime), tagTime
		}
		var u uint64
		if i+8 <= len(b) {
			u = binary.LittleEndian.Uint64(b[i:])
		} else {
			for k := 0; k < n; k++ {
				u |= uint64(b[i+k]) << (8 * k)
			}
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

// layout is where a schema's fields sit in its documents' blocks.
type layout struct {
	// slot[f] is field f's offset in the block, past the length, for an
	// int, float or timestamp field; -1 for another.
	slot []int
	rest int   // where the rest starts
	vars []int // the fields in the rest, in order
	// varAt[f] is field f's place in vars.
	varAt []int
}

func newLayout(fields []Field) layout {
	l := layout{slot: make([]int, len(fields)), varAt: make([]int, len(fields))}
	fixed := 0
	for f, fd := range fields {
		l.slot[f], l.varAt[f] = -1, -1
		switch fd.Type {
		case fenecql.TypeInt, fenecql.TypeFloat, fenecql.TypeTimestamp:
			l.slot[f] = len(fields) + 8*fixed
			fixed++
		default:
			l.varAt[f] = len(l.vars)
			l.vars = append(l.vars, f)
		}
	}
	l.rest = len(fields) + 8*fixed
	return l
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

// slotValue returns the value of kind tag in the 8 bytes at b[i:].
func slotValue(tag byte, b []byte, i int) fenecql.Value {
	u := binary.LittleEndian.Uint64(b[i:])
	switch tag {
	case tagNull:
		return fenecql.Null
	case tagFloat:
		return fenecql.Float(math.Float64frombits(u))
	case tagTime + 8:
		return fenecql.Time(int64(u))
	}
	return fenecql.Int(int64(u))
}

// restAt returns where field f's bytes start in the rest of b.
func (s *schema) restAt(b []byte, f int) int {
	i := s.l.rest
	for _, g := range s.l.vars[:s.l.varAt[f]] {
		i = restEnd(b, b[g], i)
	}
	return i
}

// restEnd returns the index past the bytes of a field of kind tag that
// start at b[i].
func restEnd(b []byte, tag byte, i int) int {
	if n := tagLen[tag]; n >= 0 {
		return i + int(n)
	}
	n, j := uvarint(b, i)
	return j + int(n)
}

// val returns field f's value.
func (d *Doc) val(f int) fenecql.Value {
	b := d.row()
	if i := d.s.l.slot[f]; i >= 0 {
		return slotValue(b[f], b, i)
	}
	return decodeField(b, b[f], d.s.restAt(b, f))
}

// isNull reports whether field f is null, without decoding it.
func (d *Doc) isNull(f int) bool { return d.row()[f] == tagNull }

// appendVals appends every field's value to dst, in schema order.
func (d *Doc) appendVals(dst []fenecql.Value) []fenecql.Value {
	b := d.row()
	l := &d.s.l
	i := l.rest
	for f := range l.slot {
		tag := b[f]
		if at := l.slot[f]; at >= 0 {
			dst = append(dst, slotValue(tag, b, at))
			continue
		}
		dst = append(dst, decodeField(b, tag, i))
		i = restEnd(b, tag, i)
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
	var tags [64]byte
	if len(vals) > len(tags) {
		return s.encodeSlow(id, vals)
	}
	size := s.l.rest
	for f, v := range vals {
		tags[f] = s.tag(f, v)
	}
	for _, f := range s.l.vars {
		n := restSize(tags[f], vals[f])
		if n < 0 {
			return s.encodeSlow(id, vals)
		}
		size += n
	}
	d, blk := allocDoc(uvarintLen(size) + size)
	b := binary.AppendUvarint(blk[:0], uint64(size))
	b = s.appendBlock(b, tags[:len(vals)], vals)
	d.ID, d.s, d.p = id, s, &blk[0]
	return d
}

// appendBlock appends the block of vals, whose tags are tags, less its
// length.
func (s *schema) appendBlock(b, tags []byte, vals []fenecql.Value) []byte {
	b = append(b, tags...)
	for f, v := range vals {
		if s.l.slot[f] >= 0 {
			b = binary.LittleEndian.AppendUint64(b, slotBits(v))
		}
	}
	for _, f := range s.l.vars {
		b = appendRest(b, tags[f], vals[f])
	}
	return b
}

// encodeSlow is encode for values whose size only writing them tells, or
// a schema of many fields.
func (s *schema) encodeSlow(id int64, vals []fenecql.Value) *Doc {
	tags := make([]byte, len(vals))
	for f, v := range vals {
		tags[f] = s.tag(f, v)
	}
	b := s.appendBlock(nil, tags, vals)
	d, blk := allocDoc(uvarintLen(len(b)) + len(b))
	copy(blk[binary.PutUvarint(blk, uint64(len(b))):], b)
	d.ID, d.s, d.p = id, s, &blk[0]
	return d
}

// reencode returns d with the fields marked written holding vals' values
// and the others as they are, their bytes copied rather than decoded and
// encoded again.
func (s *schema) reencode(d *Doc, vals []fenecql.Value, written []bool) *Doc {
	old := d.row()
	var tagBuf [64]byte
	if len(vals) > len(tagBuf) {
		return s.encode(d.ID, d.mixed(vals, written))
	}
	tags := tagBuf[:len(vals)]
	copy(tags, old)
	for f, w := range written {
		if w {
			tags[f] = s.tag(f, vals[f])
		}
	}
	size := s.l.rest
	for i, f := s.l.rest, 0; f < len(s.l.vars); f++ {
		g := s.l.vars[f]
		end := restEnd(old, old[g], i)
		n := end - i
		if written[g] {
			if n = restSize(tags[g], vals[g]); n < 0 {
				return s.encode(d.ID, d.mixed(vals, written))
			}
		}
		size += n
		i = end
	}
	nd, blk := allocDoc(uvarintLen(size) + size)
	b := binary.AppendUvarint(blk[:0], uint64(size))
	b = append(b, tags...)
	for f, at := range s.l.slot {
		switch {
		case at < 0:
		case written[f]:
			b = binary.LittleEndian.AppendUint64(b, slotBits(vals[f]))
		default:
			b = append(b, old[at:at+8]...)
		}
	}
	i := s.l.rest
	for _, f := range s.l.vars {
		end := restEnd(old, old[f], i)
		if written[f] {
			b = appendRest(b, tags[f], vals[f])
		} else {
			b = append(b, old[i:end]...)
		}
		i = end
	}
	nd.ID, nd.s, nd.p = d.ID, s, &blk[0]
	return nd
}

// mixed returns vals with d's values in the fields not written.
func (d *Doc) mixed(vals []fenecql.Value, written []bool) []fenecql.Value {
	out := d.appendVals(make([]fenecql.Value, 0, len(vals)))
	for f, w := range written {
		if w {
			out[f] = vals[f]
		}
	}
	return out
}

// allocDoc returns a Doc and a block of at least need bytes, in one
// allocation when blockSizes has one that large.
func allocDoc(need int) (*Doc, []byte) {
	for _, bs := range blockSizes {
		if bs.n >= need {
			return bs.alloc()
		}
	}
	return &Doc{}, make([]byte, need)
}
