package fenecql

import (
	"slices"
	"strconv"
	"unicode/utf8"
)

// Reading JSON: ParseJSON for what the server wrote, the strict check
// and reader for request bodies.

// maxJSONDepth bounds nesting, as encoding/json does, so a hostile
// document cannot exhaust the stack of the parser or of later walks.
const maxJSONDepth = 10000

// ParseJSON reads one JSON value. Objects keep their keys in the order
// written; a key written twice keeps the place of the first and the value
// of the last. Numbers read as in FromGo. A string of invalid UTF-8 or
// with a lone UTF-16 surrogate (\ud800) is refused, as a FenecQL literal
// is: encoding/json's silent U+FFFD would store what was not sent.
func ParseJSON(data []byte) (Value, error) { return parseJSON(data, false) }

// CheckStrictJSON returns the first thing in data that JSON allows but a
// request body may not hold: a key written twice in one object, invalid
// UTF-8, an escaped lone surrogate. Decoders disagree on what those mean
// (the first key's value or the last's; the bytes or U+FFFD), so a body
// holding one is refused rather than read one way. Data that is not JSON
// at all returns nil: the decoder that reads it says so in its own words.
// ParseJSON, which reads what the server itself wrote, forgives a key twice
// (the last wins) and refuses the other two.
func CheckStrictJSON(data []byte) error {
	p := jsonParser{data: data, strict: true}
	if _, err := p.value(); err != nil && p.refused {
		return err
	}
	return nil
}

// ParseStrictJSON reads one JSON value as ParseJSON does, but refuses
// what CheckStrictJSON refuses: a request body is checked and read in one
// pass. An error means a body that is not strict JSON, refused or not.
func ParseStrictJSON(data []byte) (Value, error) { return parseJSON(data, true) }

// parseJSON reads data as one JSON value and nothing after it.
func parseJSON(data []byte, strict bool) (Value, error) {
	p := jsonParser{data: data, strict: strict}
	v, err := p.value()
	if err != nil {
		return Null, err
	}
	if p.space(); p.i < len(p.data) {
		return Null, p.errorf("unexpected %s after the value", p.found())
	}
	return v, nil
}

// jsonParser is a small recursive-descent scanner: encoding/json's
// decoders either lose key order (maps) or allocate per token (Token),
// and documents are parsed on every load.
type jsonParser struct {
	data    []byte
	i       int
	depth   int
	strict  bool // refuse duplicate keys too
	refused bool // the error is one CheckStrictJSON answers: a key twice, invalid UTF-8, a lone surrogate
	// numberErr is the error of a number JSON's grammar allows and a value
	// cannot hold (1e999), without the byte it is at (JSONReader.Value).
	numberErr *Error
}

// refuse is errorf for what JSON's grammar allows and a value may not
// hold (CheckStrictJSON returns these).
func (p *jsonParser) refuse(format string, args ...any) *Error {
	p.refused = true
	return p.errorf(format, args...)
}

func (p *jsonParser) errorf(format string, args ...any) *Error {
	e := Errorf(0, format, args...)
	e.Msg = "invalid JSON at byte " + strconv.Itoa(p.i+1) + ": " + e.Msg
	return e
}

func (p *jsonParser) found() string {
	if p.i >= len(p.data) {
		return "the end"
	}
	r, _ := utf8.DecodeRune(p.data[p.i:])
	return strconv.QuoteRune(r)
}

func (p *jsonParser) space() {
	for p.i < len(p.data) {
		switch p.data[p.i] {
		case ' ', '\t', '\n', '\r':
			p.i++
		default:
			return
		}
	}
}

// expect skips space and then c, reporting whether it was there.
func (p *jsonParser) expect(c byte) bool {
	p.space()
	if p.i < len(p.data) && p.data[p.i] == c {
		p.i++
		return true
	}
	return false
}

func (p *jsonParser) value() (Value, *Error) {
	p.space()
	if p.i >= len(p.data) {
		return Null, p.errorf("expected a value, found the end")
	}
	switch c := p.data[p.i]; {
	case c == '{' || c == '[':
		if p.depth++; p.depth > maxJSONDepth {
			return Null, p.errorf("nested deeper than %d", maxJSONDepth)
		}
		defer func() { p.depth-- }()
		if c == '{' {
			return p.object()
		}
		return p.list()
	case c == '"':
		s, err := p.string()
		return Text(s), err
	case c == '-' || c >= '0' && c <= '9':
		return p.number()
	}
	for _, lit := range [...]struct {
		word string
		v    Value
	}{{"true", Bool(true)}, {"false", Bool(false)}, {"null", Null}} {
		if len(p.data)-p.i >= len(lit.word) && string(p.data[p.i:p.i+len(lit.word)]) == lit.word {
			p.i += len(lit.word)
			return lit.v, nil
		}
	}
	return Null, p.errorf("expected a value, found %s", p.found())
}

func (p *jsonParser) list() (Value, *Error) {
	p.i++ // [
	var items []Value
	if p.expect(']') {
		return List(items), nil
	}
	for {
		v, err := p.value()
		if err != nil {
			return Null, err
		}
		items = append(items, v)
		if p.expect(']') {
			return List(items), nil
		}
		if !p.expect(',') {
			return Null, p.errorf("expected , or ], found %s", p.found())
		}
	}
}

// indexFrom is the key count past which duplicate keys are found with a
// map rather than by scanning the keys so far.
const indexFrom = 16

func (p *jsonParser) object() (Value, *Error) {
	p.i++ // {
	if p.expect('}') {
		return ObjectOf(&Object{}), nil
	}
	// The keys and values are gathered in room on the stack, then copied
	// into an object of their number (NewObject).
	var keyRoom [len(objectBlocks)]string
	var valRoom [len(objectBlocks)]Value
	keys, vals := keyRoom[:0], valRoom[:0]
	var index map[string]int
	for {
		p.space()
		if p.i >= len(p.data) || p.data[p.i] != '"' {
			return Null, p.errorf("expected a key in quotes, found %s", p.found())
		}
		keyAt := p.i
		k, err := p.string()
		if err != nil {
			return Null, err
		}
		if !p.expect(':') {
			return Null, p.errorf("expected : after the key, found %s", p.found())
		}
		v, err := p.value()
		if err != nil {
			return Null, err
		}
		at := -1
		if index != nil {
			if j, ok := index[k]; ok {
				at = j
			}
		} else {
			at = slices.Index(keys, k)
		}
		if at >= 0 && p.strict {
			p.i = keyAt
			return Null, p.refuse("key %s appears twice in one object", strconv.Quote(k))
		}
		if at >= 0 {
			vals[at] = v
		} else {
			keys = append(keys, k)
			vals = append(vals, v)
			if index != nil {
				index[k] = len(keys) - 1
			} else if len(keys) == indexFrom {
				index = make(map[string]int, 2*indexFrom)
				for j, key := range keys {
					index[key] = j
				}
			}
		}
		if p.expect('}') {
			o := NewObject(len(keys))
			o.Keys, o.Vals = append(o.Keys, keys...), append(o.Vals, vals...)
			return ObjectOf(o), nil
		}
		if !p.expect(',') {
			return Null, p.errorf("expected , or }, found %s", p.found())
		}
	}
}

// string reads a quoted string at p.i: one scan and one copy in the
// common case (quoted).
func (p *jsonParser) string() (string, *Error) {
	b, err := p.quoted()
	return string(b), err
}

// quoted reads the quoted string at p.i. The common case, valid UTF-8
// with no escapes, is one scan, and returns data's own bytes; a string
// with escapes is read into new bytes (slowBytes), which also says what
// is wrong with one that is not valid.
func (p *jsonParser) quoted() ([]byte, *Error) {
	start := p.i + 1 // past "
	plain := true
	for i := start; i < len(p.data); i++ {
		c := p.data[i]
		if c == '"' {
			if !plain && !utf8.Valid(p.data[start:i]) {
				break
			}
			p.i = i + 1
			return p.data[start:i], nil
		}
		if c == '\\' || c < 0x20 {
			break
		}
		if c >= utf8.RuneSelf {
			plain = false
		}
	}
	p.i = start
	return p.slowBytes()
}

// slowBytes reads a string with escapes or UTF-8 in it into new bytes.
func (p *jsonParser) slowBytes() ([]byte, *Error) {
	// Room for a statement's text at once (encoding/json writes < as
	// \u003c, so a claim's text comes here), not grown from nothing.
	b := make([]byte, 0, min(len(p.data)-p.i, 256))
	for p.i < len(p.data) {
		c := p.data[p.i]
		switch {
		case c == '"':
			p.i++
			return b, nil
		case c < 0x20:
			return nil, p.errorf("control character %s in a string: escape it", strconv.QuoteRune(rune(c)))
		case c == '\\':
			r, err := p.escape()
			if err != nil {
				return nil, err
			}
			b = utf8.AppendRune(b, r)
		case c < utf8.RuneSelf:
			b = append(b, c)
			p.i++
		default:
			r, size := utf8.DecodeRune(p.data[p.i:])
			if r == utf8.RuneError && size == 1 {
				return nil, p.refuse("a string is not valid UTF-8")
			}
			b = utf8.AppendRune(b, r)
			p.i += size
		}
	}
	return nil, p.errorf("unterminated string")
}

var simpleEscapes = map[byte]rune{'"': '"', '\\': '\\', '/': '/', 'b': '\b', 'f': '\f', 'n': '\n', 'r': '\r', 't': '\t'}

// escape reads one backslash escape, joining a UTF-16 surrogate pair
// into one rune; a lone surrogate is refused.
func (p *jsonParser) escape() (rune, *Error) {
	if p.i+1 >= len(p.data) {
		return 0, p.errorf("unterminated string")
	}
	if r, ok := simpleEscapes[p.data[p.i+1]]; ok {
		p.i += 2
		return r, nil
	}
	r, ok := p.hex4()
	if !ok {
		return 0, p.errorf("invalid escape in a string")
	}
	if r < 0xd800 || r > 0xdfff {
		return r, nil
	}
	if r <= 0xdbff {
		save := p.i
		if lo, ok := p.hex4(); ok && lo >= 0xdc00 && lo <= 0xdfff {
			return 0x10000 + (r-0xd800)<<10 + (lo - 0xdc00), nil
		}
		p.i = save
	}
	p.i -= 6
	return 0, p.refuse("lone UTF-16 surrogate %s in a string", p.data[p.i:p.i+6])
}

// hex4 reads a \u escape and its four hex digits at p.i, advancing past
// it only when it is one.
func (p *jsonParser) hex4() (rune, bool) {
	r, ok := hex4(p.data[p.i:])
	if ok {
		p.i += 6
	}
	return r, ok
}

// number reads -?(0|[1-9][0-9]*)(.[0-9]+)?([eE][+-]?[0-9]+)? exactly, so
// that nothing strconv would accept beyond JSON (hex, underscores, Inf)
// gets in.
func (p *jsonParser) number() (Value, *Error) {
	start := p.i
	digits := func() int {
		n := 0
		for p.i < len(p.data) && p.data[p.i] >= '0' && p.data[p.i] <= '9' {
			p.i++
			n++
		}
		return n
	}
	if p.data[p.i] == '-' {
		p.i++
	}
	if p.i < len(p.data) && p.data[p.i] == '0' {
		p.i++
	} else if digits() == 0 {
		return Null, p.errorf("expected a digit, found %s", p.found())
	}
	if p.i < len(p.data) && p.data[p.i] == '.' {
		p.i++
		if digits() == 0 {
			return Null, p.errorf("expected a digit after the decimal point, found %s", p.found())
		}
	}
	if p.i < len(p.data) && (p.data[p.i] == 'e' || p.data[p.i] == 'E') {
		p.i++
		if p.i < len(p.data) && (p.data[p.i] == '+' || p.data[p.i] == '-') {
			p.i++
		}
		if digits() == 0 {
			return Null, p.errorf("expected a digit in the exponent, found %s", p.found())
		}
	}
	if n, ok := smallInt(p.data[start:p.i]); ok {
		return Int(n), nil
	}
	v, err := numberValue(string(p.data[start:p.i]))
	if err != nil {
		p.i = start
		p.numberErr = err.(*Error)
		return Null, p.errorf("%s", err.(*Error).Msg)
	}
	return v, nil
}

// smallInt reads a JSON integer of at most 18 digits, which int64 always
// holds, without the string numberValue takes; ok is false for any other
// number.
func smallInt(b []byte) (int64, bool) {
	neg := len(b) > 0 && b[0] == '-'
	if neg {
		b = b[1:]
	}
	if len(b) == 0 || len(b) > 18 {
		return 0, false
	}
	var n int64
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int64(c-'0')
	}
	if neg {
		n = -n
	}
	return n, true
}

// A JSONReader reads one JSON document a piece at a time, strictly (it
// refuses what CheckStrictJSON refuses, and anything that is not JSON),
// for a caller that knows the shape it wants: a request body read straight
// into what it holds, with no Value made for the objects around it. Each
// method returns false, and reads no further, at anything else; the caller
// then leaves the document to a reader that says what is wrong.
type JSONReader struct{ p jsonParser }

// NewJSONReader reads data.
func NewJSONReader(data []byte) *JSONReader {
	return &JSONReader{p: jsonParser{data: data, strict: true}}
}

// Open reads c, '{' or '[', the start of an object or array.
func (r *JSONReader) Open(c byte) bool { return r.p.expect(c) }

// Next reads on in an object or array closed by end, '}' or ']': the
// end (more false), or, before any item but the first, a comma (more
// true).
func (r *JSONReader) Next(end byte, first bool) (more, ok bool) {
	if r.p.expect(end) {
		return false, true
	}
	if first {
		return true, true
	}
	return true, r.p.expect(',')
}

// Key reads an object's key and its colon, as Text reads a string.
func (r *JSONReader) Key() ([]byte, bool) {
	b, ok := r.Text()
	return b, ok && r.p.expect(':')
}

// Text reads a string. Written without escapes, it is returned as the
// document's own bytes, which the caller must copy to keep beyond data.
func (r *JSONReader) Text() ([]byte, bool) {
	p := &r.p
	if p.space(); p.i >= len(p.data) || p.data[p.i] != '"' {
		return nil, false
	}
	b, err := p.quoted()
	return b, err == nil
}

// Value reads any value, as ParseJSON would in strict mode. Its error
// says what is wrong and where; for a number a value cannot hold
// (1e999), only what.
func (r *JSONReader) Value() (Value, error) {
	v, err := r.p.value()
	if err != nil {
		if r.p.numberErr != nil {
			return Null, r.p.numberErr
		}
		return Null, err
	}
	return v, nil
}

// End reports whether nothing but space is left.
func (r *JSONReader) End() bool {
	r.p.space()
	return r.p.i == len(r.p.data)
}
