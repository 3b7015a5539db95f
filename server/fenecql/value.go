package fenecql

import (
	"math"
	"strings"
	"unsafe"
)

// Kind is the kind of a Value.
type Kind uint8

const (
	KindNull Kind = iota
	KindBool
	KindInt
	KindFloat
	KindText
	KindTime // UTC epoch milliseconds
	KindList
	KindObject
)

var kindNames = [...]string{"null", "bool", "int", "float", "text", "timestamp", "list", "object"}

func (k Kind) String() string { return kindNames[k&^packed] }

// packed marks a list or object held as its compact JSON text (Pack)
// rather than as Values. Kind never reports it.
const packed Kind = 0x80

// Value is one FenecQL value. The zero Value is null. Values are immutable:
// lists and objects are never changed once built, so they may be shared.
//
// A text or a list is held as its data pointer and its length, not in an
// interface: an interface would box the string or slice header in an
// allocation of its own, and hold two pointer words where one is needed.
// A document's values are what the collector marks over and over, for
// every live document, so each Value is one pointer word (x) in 24 bytes.
type Value struct {
	x    unsafe.Pointer // text: its bytes; list: its first item; object: the *Object; else nil
	n    uint64         // bool, int, time: the integer; float: its bits; text, list: the length
	kind Kind
}

// Object is a JSON object that keeps its keys in the order written.
type Object struct {
	Keys []string
	Vals []Value
}

// NewObject returns an empty object with room for n keys and values.
// For up to len(objectBlocks) keys the object, its keys and its values are
// one allocation: a document's json field is then one object for the
// collector to mark, not three.
func NewObject(n int) *Object {
	if n <= 0 {
		return &Object{}
	}
	if n <= len(objectBlocks) {
		return objectBlocks[n-1]()
	}
	return &Object{Keys: make([]string, 0, n), Vals: make([]Value, 0, n)}
}

// objectBlock is an Object and the arrays (K, V) its keys and values are
// cut from.
type objectBlock[K, V any] struct {
	o Object
	k K
	v V
}

func (b *objectBlock[K, V]) init(keys []string, vals []Value) *Object {
	b.o.Keys, b.o.Vals = keys, vals
	return &b.o
}

// objectBlocks[n-1] allocates an Object with room for n keys and values.
var objectBlocks = [...]func() *Object{
	func() *Object { b := new(objectBlock[[1]string, [1]Value]); return b.init(b.k[:0], b.v[:0]) },
	func() *Object { b := new(objectBlock[[2]string, [2]Value]); return b.init(b.k[:0], b.v[:0]) },
	func() *Object { b := new(objectBlock[[3]string, [3]Value]); return b.init(b.k[:0], b.v[:0]) },
	func() *Object { b := new(objectBlock[[4]string, [4]Value]); return b.init(b.k[:0], b.v[:0]) },
	func() *Object { b := new(objectBlock[[5]string, [5]Value]); return b.init(b.k[:0], b.v[:0]) },
	func() *Object { b := new(objectBlock[[6]string, [6]Value]); return b.init(b.k[:0], b.v[:0]) },
	func() *Object { b := new(objectBlock[[7]string, [7]Value]); return b.init(b.k[:0], b.v[:0]) },
	func() *Object { b := new(objectBlock[[8]string, [8]Value]); return b.init(b.k[:0], b.v[:0]) },
}

// Get returns the value under key, or null.
func (o *Object) Get(key string) Value {
	for i, k := range o.Keys {
		if k == key {
			return o.Vals[i]
		}
	}
	return Null
}

// With returns a copy of o with key set to v (appended when new).
func (o *Object) With(key string, v Value) *Object {
	c := NewObject(len(o.Keys) + 1)
	c.Keys, c.Vals = append(c.Keys, o.Keys...), append(c.Vals, o.Vals...)
	for i, k := range c.Keys {
		if k == key {
			c.Vals[i] = v
			return c
		}
	}
	c.Keys = append(c.Keys, key)
	c.Vals = append(c.Vals, v)
	return c
}

// Null is the null value.
var Null = Value{}

func Bool(b bool) Value {
	if b {
		return Value{kind: KindBool, n: 1}
	}
	return Value{kind: KindBool}
}
func Int(i int64) Value        { return Value{kind: KindInt, n: uint64(i)} }
func Float(f float64) Value    { return Value{kind: KindFloat, n: math.Float64bits(f)} }
func Time(ms int64) Value      { return Value{kind: KindTime, n: uint64(ms)} }
func ObjectOf(o *Object) Value { return Value{kind: KindObject, x: unsafe.Pointer(o)} }

func Text(s string) Value {
	return Value{kind: KindText, x: unsafe.Pointer(unsafe.StringData(s)), n: uint64(len(s))}
}

func List(vs []Value) Value {
	return Value{kind: KindList, x: unsafe.Pointer(unsafe.SliceData(vs)), n: uint64(len(vs))}
}

func (v Value) Kind() Kind     { return v.kind &^ packed }
func (v Value) IsNull() bool   { return v.kind == KindNull }
func (v Value) Bool() bool     { return v.num() != 0 }
func (v Value) Int() int64     { return int64(v.num()) }
func (v Value) Float() float64 { return math.Float64frombits(v.num()) }
func (v Value) Time() int64    { return int64(v.num()) }

// num is n as the number accessors read it: 0 for a text, list or object
// (whose n is a length, or unused), as for null.
func (v Value) num() uint64 {
	if v.x != nil {
		return 0
	}
	return v.n
}

// Text returns a text's string ("" for any other kind). It shares the
// bytes Text was given, which no one changes: Go strings are immutable.
func (v Value) Text() string {
	if v.kind != KindText {
		return ""
	}
	return unsafe.String((*byte)(v.x), int(v.n))
}

// List returns a list's items (nil for any other kind), its capacity its
// length: an append to it copies rather than writing into the list.
func (v Value) List() []Value {
	if v.kind == KindList|packed {
		return v.unpack().List()
	}
	if v.kind != KindList {
		return nil
	}
	return unsafe.Slice((*Value)(v.x), int(v.n))
}

// Object returns an object (nil for any other kind). A packed object is
// decoded anew on each call: the caller may keep what it gets, but a loop
// should read it once.
func (v Value) Object() *Object {
	if v.kind == KindObject|packed {
		return v.unpack().Object()
	}
	if v.kind != KindObject {
		return nil
	}
	return (*Object)(v.x)
}

// Pack returns v, a list or an object, held as its compact JSON text: one
// allocation of about the JSON's length where the decoded form costs a
// Value (24 bytes) per item, a string per key and text, and the object's
// blocks — three to four times the bytes (bench/results/memory.md). A
// document's json field is stored packed (the engine calls Pack as it
// stores one): most are written and read back whole, which then copies
// the text; a query that reaches inside one decodes it. Other kinds, and
// a value already packed, are returned as they are.
func Pack(v Value) Value {
	if v.kind != KindList && v.kind != KindObject {
		return v
	}
	var scratch [256]byte
	b := AppendJSON(scratch[:0], v)
	text := make([]byte, len(b))
	copy(text, b)
	return Value{kind: v.kind | packed, x: unsafe.Pointer(unsafe.SliceData(text)), n: uint64(len(text))}
}

// Packed returns the list or object (k) whose JSON text, as AppendJSON
// writes it, is text: held packed, as Pack's result is, but sharing text
// rather than copying it. The engine's compact documents hand out their
// json fields this way; the caller never changes text afterwards. Another
// k returns null.
func Packed(k Kind, text []byte) Value {
	if k != KindList && k != KindObject || len(text) == 0 {
		return Null
	}
	return Value{kind: k | packed, x: unsafe.Pointer(unsafe.SliceData(text)), n: uint64(len(text))}
}

// PackedJSON returns a packed list's or object's JSON text, which the
// caller does not change, and false for any other value.
func (v Value) PackedJSON() ([]byte, bool) {
	if v.kind&packed == 0 {
		return nil, false
	}
	return v.packedText(), true
}

// packedText returns a packed value's JSON text.
func (v Value) packedText() []byte { return unsafe.Slice((*byte)(v.x), int(v.n)) }

// unpack decodes a packed value. Its text is what AppendJSON wrote, so it
// parses, and parses to the value that was packed (AppendJSON's output
// reads back as the value it came from: a whole float keeps its ".0").
func (v Value) unpack() Value {
	u, err := ParseJSON(v.packedText())
	if err != nil {
		panic("fenecql: a packed value does not parse: " + err.Error())
	}
	return u
}

// IsNumber reports whether v is an int or a float.
func (v Value) IsNumber() bool { return v.kind == KindInt || v.kind == KindFloat }

// Number returns an int or float as a float64.
func (v Value) Number() float64 {
	if v.kind == KindInt {
		return float64(int64(v.n))
	}
	return v.Float()
}

// Path reads a path into a json value: object keys, or list indexes given
// as decimal text. A missing key is null.
func (v Value) Path(keys []string) Value {
	for _, k := range keys {
		switch v.Kind() {
		case KindObject:
			v = v.Object().Get(k)
		case KindList:
			i, ok := atoi(k)
			l := v.List()
			if !ok || i >= len(l) {
				return Null
			}
			v = l[i]
		default:
			return Null
		}
	}
	return v
}

func atoi(s string) (int, bool) {
	if s == "" || len(s) > 9 {
		return 0, false
	}
	n := 0
	for _, c := range s {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int(c-'0')
	}
	return n, true
}

// rank orders kinds for Compare across kinds: null first, then bools,
// numbers and times, text, lists, objects.
func rank(k Kind) int {
	switch k {
	case KindNull:
		return 0
	case KindBool:
		return 1
	case KindInt, KindFloat, KindTime:
		return 2
	case KindText:
		return 3
	case KindList:
		return 4
	}
	return 5
}

// Compare is the total order of values used by order and the sorted
// indexes: null first, then by kind rank, numbers by value (an int and a
// time compare as numbers of milliseconds), text by bytes, lists
// element-wise, objects key by key.
func Compare(a, b Value) int {
	ra, rb := rank(a.Kind()), rank(b.Kind())
	if ra != rb {
		return cmpInt(int64(ra), int64(rb))
	}
	switch ra {
	case 0:
		return 0
	case 1:
		return cmpInt(int64(a.n), int64(b.n))
	case 2:
		if a.kind != KindFloat && b.kind != KindFloat {
			return cmpInt(int64(a.n), int64(b.n))
		}
		return cmpFloat(a.Number(), b.Number())
	case 3:
		return strings.Compare(a.Text(), b.Text())
	case 4:
		la, lb := a.List(), b.List()
		for i := 0; i < len(la) && i < len(lb); i++ {
			if c := Compare(la[i], lb[i]); c != 0 {
				return c
			}
		}
		return cmpInt(int64(len(la)), int64(len(lb)))
	}
	oa, ob := a.Object(), b.Object()
	for i := 0; i < len(oa.Keys) && i < len(ob.Keys); i++ {
		if c := strings.Compare(oa.Keys[i], ob.Keys[i]); c != 0 {
			return c
		}
		if c := Compare(oa.Vals[i], ob.Vals[i]); c != 0 {
			return c
		}
	}
	return cmpInt(int64(len(oa.Keys)), int64(len(ob.Keys)))
}

// Equal reports whether a and b are the same value under Compare.
func Equal(a, b Value) bool { return Compare(a, b) == 0 }

func cmpInt(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func cmpFloat(a, b float64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	case a == b:
		return 0
	}
	// NaN sorts before every number so the order stays total.
	an, bn := math.IsNaN(a), math.IsNaN(b)
	switch {
	case an && bn:
		return 0
	case an:
		return -1
	}
	return 1
}
