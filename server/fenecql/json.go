package fenecql

import (
	"encoding/json"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// timeLayout is how timestamps leave the server: ISO-8601, UTC, always
// with milliseconds, so every timestamp has the same width and sorts as
// text the way it sorts as time.
const timeLayout = "2006-01-02T15:04:05.000Z"

// FormatTime renders epoch milliseconds as 2026-05-03T09:20:00.000Z.
func FormatTime(ms int64) string { return string(appendTime(nil, ms)) }

// appendTime is time's AppendFormat with timeLayout, written out: every
// row a claim answers has a timestamp or two, and the layout's general
// interpreter costs several times these few divisions.
func appendTime(dst []byte, ms int64) []byte {
	t := time.UnixMilli(ms).UTC()
	year, month, day := t.Date()
	if year < 0 || year > 9999 {
		return t.AppendFormat(dst, timeLayout)
	}
	hour, min, sec := t.Clock()
	milli := t.Nanosecond() / 1e6
	return append(dst,
		byte('0'+year/1000), byte('0'+year/100%10), byte('0'+year/10%10), byte('0'+year%10), '-',
		byte('0'+int(month)/10), byte('0'+int(month)%10), '-',
		byte('0'+day/10), byte('0'+day%10), 'T',
		byte('0'+hour/10), byte('0'+hour%10), ':',
		byte('0'+min/10), byte('0'+min%10), ':',
		byte('0'+sec/10), byte('0'+sec%10), '.',
		byte('0'+milli/100), byte('0'+milli/10%10), byte('0'+milli%10), 'Z')
}

// timeInputs are the forms ParseTime reads, most specific first. Go's
// parser accepts a fractional second after the seconds field even when
// the layout has none, so these also read 09:20:00.5 and 09:20:00.123456.
var timeInputs = []string{time.RFC3339, "2006-01-02T15:04:05", "2006-01-02"}

// ParseTime reads an ISO-8601 timestamp into epoch milliseconds: RFC 3339
// with or without fractional seconds and offset (UTC assumed without
// one), or a date alone (midnight UTC). Sub-millisecond digits are
// dropped, rounding toward the past.
func ParseTime(s string) (int64, error) {
	for _, layout := range timeInputs {
		if t, err := time.Parse(layout, s); err == nil {
			// An offset can carry 0000-01-01 or 9999-12-31 past the range.
			if err := checkTime(0, t.UnixMilli()); err != nil {
				return 0, Errorf(0, "timestamp %s is out of range: %s", strconv.Quote(cut(s, 40)), timeRange)
			}
			return t.UnixMilli(), nil
		}
	}
	return 0, Errorf(0, "invalid timestamp %s: expected ISO-8601 such as 2026-05-03T09:20:00Z or 2026-05-03", strconv.Quote(cut(s, 40)))
}

// ParseStoredTime reads what FormatTime wrote for any year, which a file
// written before timestamps were held to MinTime..MaxTime may hold
// ("10000-01-01T00:00:00.000Z", "-0001-12-31T00:00:00.000Z"): such a file
// still opens. ok is false for anything else.
func ParseStoredTime(s string) (ms int64, ok bool) {
	i := strings.IndexByte(s[min(1, len(s)):], '-') + 1 // past a sign
	if i <= 0 || len(s)-i != len(timeLayout)-4 {
		return 0, false
	}
	year, err := strconv.Atoi(s[:i])
	if err != nil {
		return 0, false
	}
	// Year 2000 is a leap year, as a stored February 29 may need.
	t, err := time.Parse(timeLayout, "2000"+s[i:])
	if err != nil {
		return 0, false
	}
	return time.Date(year, t.Month(), t.Day(), t.Hour(), t.Minute(), t.Second(), t.Nanosecond(), time.UTC).UnixMilli(), true
}

// MinTime and MaxTime bound a timestamp, in epoch milliseconds: the years
// 0000 to 9999, what ISO-8601 text without an expanded year can say, so
// every timestamp answered reads back (docs/fenecql.md, Timestamps).
const (
	MinTime int64 = -62167219200000 // 0000-01-01T00:00:00.000Z
	MaxTime int64 = 253402300799999 // 9999-12-31T23:59:59.999Z
)

const timeRange = "timestamps run from 0000-01-01T00:00:00.000Z to 9999-12-31T23:59:59.999Z"

// checkTime refuses epoch milliseconds outside MinTime..MaxTime.
func checkTime(pos Pos, ms int64) *Error {
	if ms < MinTime || ms > MaxTime {
		return Errorf(pos, "timestamp %d ms is out of range: %s", ms, timeRange)
	}
	return nil
}

// MarshalJSON writes v as JSON; see AppendJSON.
func (v Value) MarshalJSON() ([]byte, error) { return AppendJSON(nil, v), nil }

// AppendJSON appends v's JSON to dst. Objects keep their key order;
// timestamps are ISO-8601 text (JSON has no time); an integral float
// keeps a ".0" so that it reads back as a float, not an int.
func AppendJSON(dst []byte, v Value) []byte { return appendValue(dst, v, false) }

// AppendJSONText appends s as a JSON string, as AppendJSON(dst, Text(s))
// does without making the Value.
func AppendJSONText(dst []byte, s string) []byte { return appendString(dst, s) }

// appendValue writes JSON; spaced puts a space after each , and : for
// the short renderings in error messages, which read like FenecQL.
func appendValue(dst []byte, v Value, spaced bool) []byte {
	switch v.kind {
	case KindNull:
		return append(dst, "null"...)
	case KindBool:
		return strconv.AppendBool(dst, v.Bool())
	case KindInt:
		return strconv.AppendInt(dst, v.Int(), 10)
	case KindFloat:
		return appendFloat(dst, v.Float())
	case KindText:
		return appendString(dst, v.Text())
	case KindTime:
		dst = append(dst, '"')
		return append(appendTime(dst, v.Time()), '"')
	case KindList:
		dst = append(dst, '[')
		for i, it := range v.List() {
			if i > 0 {
				dst = appendSep(dst, ',', spaced)
			}
			dst = appendValue(dst, it, spaced)
		}
		return append(dst, ']')
	}
	o := v.Object()
	dst = append(dst, '{')
	for i, k := range o.Keys {
		if i > 0 {
			dst = appendSep(dst, ',', spaced)
		}
		dst = appendSep(appendString(dst, k), ':', spaced)
		dst = appendValue(dst, o.Vals[i], spaced)
	}
	return append(dst, '}')
}

func appendSep(dst []byte, c byte, spaced bool) []byte {
	if spaced {
		return append(dst, c, ' ')
	}
	return append(dst, c)
}

// appendFloat formats as encoding/json does (shortest form, exponent only
// outside 1e-6..1e21), plus ".0" when the result would read as an int.
func appendFloat(dst []byte, f float64) []byte {
	if math.IsInf(f, 0) || math.IsNaN(f) {
		// Evaluation and parsing refuse these; null is the only JSON
		// that will not corrupt the document if one slips through.
		return append(dst, "null"...)
	}
	format := byte('f')
	if abs := math.Abs(f); abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		format = 'e'
	}
	start := len(dst)
	dst = strconv.AppendFloat(dst, f, format, -1, 64)
	if format == 'e' {
		// Clean up e-09 to e-9, as encoding/json does.
		if n := len(dst); n-start >= 4 && dst[n-4] == 'e' && dst[n-3] == '-' && dst[n-2] == '0' {
			dst[n-2] = dst[n-1]
			dst = dst[:n-1]
		}
		return dst
	}
	if slices.Contains(dst[start:], '.') {
		return dst
	}
	return append(dst, ".0"...)
}

const hexDigits = "0123456789abcdef"

// appendString quotes s as encoding/json does without HTML escaping:
// invalid UTF-8 becomes U+FFFD, and U+2028/U+2029 are escaped so the
// output is also valid JavaScript.
func appendString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		b := s[i]
		if b < utf8.RuneSelf {
			if b >= 0x20 && b != '"' && b != '\\' {
				i++
				continue
			}
			dst = append(dst, s[start:i]...)
			switch b {
			case '"', '\\':
				dst = append(dst, '\\', b)
			case '\b':
				dst = append(dst, '\\', 'b')
			case '\f':
				dst = append(dst, '\\', 'f')
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hexDigits[b>>4], hexDigits[b&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			dst = append(append(dst, s[start:i]...), `\ufffd`...)
			i++
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			dst = append(append(dst, s[start:i]...), '\\', 'u', '2', '0', '2', hexDigits[r&0xf])
			i += size
			start = i
			continue
		}
		i += size
	}
	return append(append(dst, s[start:]...), '"')
}

// FromGo converts a value decoded by encoding/json (with UseNumber:
// json.Number, string, bool, nil, []any, map[string]any) or an int,
// int64, float64, time.Time or Value, as HTTP parameters arrive. Map keys
// are sorted, since a Go map has lost the order they were written in.
func FromGo(x any) (Value, error) {
	switch x := x.(type) {
	case nil:
		return Null, nil
	case Value:
		return x, nil
	case bool:
		return Bool(x), nil
	case string:
		return Text(x), nil
	case int:
		return Int(int64(x)), nil
	case int64:
		return Int(x), nil
	case float64:
		if math.IsInf(x, 0) || math.IsNaN(x) {
			return Null, Errorf(0, "number %v is out of range", x)
		}
		return Float(x), nil
	case json.Number:
		return numberValue(string(x))
	case time.Time:
		if err := checkTime(0, x.UnixMilli()); err != nil {
			return Null, err
		}
		return Time(x.UnixMilli()), nil
	case []any:
		l := make([]Value, len(x))
		for i, it := range x {
			v, err := FromGo(it)
			if err != nil {
				return Null, err
			}
			l[i] = v
		}
		return List(l), nil
	case map[string]any:
		o := NewObject(len(x))
		for k := range x {
			o.Keys = append(o.Keys, k)
		}
		slices.Sort(o.Keys)
		for _, k := range o.Keys {
			v, err := FromGo(x[k])
			if err != nil {
				return Null, err
			}
			o.Vals = append(o.Vals, v)
		}
		return ObjectOf(o), nil
	}
	return Null, Errorf(0, "cannot use a Go %T as a FenecQL value", x)
}

// numberValue reads a JSON number: an int when it is written without a
// fraction or exponent and fits in 64 bits, a float otherwise.
func numberValue(s string) (Value, error) {
	isInt := true
	for i := 0; i < len(s); i++ {
		if c := s[i]; c == '.' || c == 'e' || c == 'E' {
			isInt = false
			break
		}
	}
	if isInt {
		if n, err := strconv.ParseInt(s, 10, 64); err == nil {
			return Int(n), nil
		}
		// Past 64 bits it is a float, which an int field takes only up
		// to 2^53 (Coerce): -2^63-1 is not stored as -2^63.
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil && !isRangeErr(err) || math.IsNaN(f) {
		return Null, Errorf(0, "invalid number %s", strconv.Quote(cut(s, 40)))
	}
	// Overflow returns ±Inf, which no JSON can carry back; underflow
	// answers 0 (1e-400), a number the client did not write.
	if math.IsInf(f, 0) || f == 0 && nonZero(s) {
		return Null, Errorf(0, "number %s is out of range", cut(s, 40))
	}
	return Float(f), nil
}

// nonZero reports whether a JSON number has a digit other than 0 before
// its exponent.
func nonZero(s string) bool {
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == 'e' || c == 'E':
			return false
		case c >= '1' && c <= '9':
			return true
		}
	}
	return false
}

func isRangeErr(err error) bool {
	ne, ok := err.(*strconv.NumError)
	return ok && ne.Err == strconv.ErrRange
}

// maxJSONDepth bounds nesting, as encoding/json does, so a hostile
// document cannot exhaust the stack of the parser or of later walks.
const maxJSONDepth = 10000

// ParseJSON reads one JSON value. Objects keep their keys in the order
// written; a key written twice keeps the place of the first and the value
// of the last. Numbers read as in FromGo. A string of invalid UTF-8 or
// with a lone UTF-16 surrogate (\ud800) is refused, as a FenecQL literal
// is: encoding/json's silent U+FFFD would store what was not sent.
func ParseJSON(data []byte) (Value, error) {
	p := jsonParser{data: data}
	v, err := p.value()
	if err != nil {
		return Null, err
	}
	if p.space(); p.i < len(p.data) {
		return Null, p.errorf("unexpected %s after the value", p.found())
	}
	return v, nil
}

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
func ParseStrictJSON(data []byte) (Value, error) {
	p := jsonParser{data: data, strict: true}
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

// string reads a quoted string at p.i. The common case, plain valid
// UTF-8 with no escapes, is one scan and one copy.
func (p *jsonParser) string() (string, *Error) {
	p.i++ // "
	start := p.i
	plain := true
	for ; p.i < len(p.data); p.i++ {
		c := p.data[p.i]
		if c == '"' {
			s := p.data[start:p.i]
			if !plain && !utf8.Valid(s) {
				break
			}
			p.i++
			return string(s), nil
		}
		if c == '\\' || c < 0x20 {
			break
		}
		if c >= utf8.RuneSelf {
			plain = false
		}
	}
	p.i = start
	return p.slowString()
}

func (p *jsonParser) slowString() (string, *Error) {
	b, err := p.slowBytes()
	return string(b), err
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

// Key reads an object's key and its colon. A key written plainly —
// ASCII, without escapes — is answered as the document's own bytes;
// another as new bytes.
func (r *JSONReader) Key() ([]byte, bool) {
	p := &r.p
	if p.space(); p.i >= len(p.data) || p.data[p.i] != '"' {
		return nil, false
	}
	start := p.i + 1
	for i := start; i < len(p.data); i++ {
		switch c := p.data[i]; {
		case c == '"':
			p.i = i + 1
			return p.data[start:i], p.expect(':')
		case c == '\\' || c < 0x20 || c >= utf8.RuneSelf:
			p.i = start
			b, err := p.slowBytes()
			return b, err == nil && p.expect(':')
		}
	}
	return nil, false
}

// Text reads a string. Written without escapes, it is answered as the
// document's own bytes, which the caller must copy to keep beyond data.
func (r *JSONReader) Text() ([]byte, bool) {
	p := &r.p
	if p.space(); p.i >= len(p.data) || p.data[p.i] != '"' {
		return nil, false
	}
	start := p.i + 1
	plain := true
	for i := start; i < len(p.data); i++ {
		c := p.data[i]
		if c == '"' {
			if !plain && !utf8.Valid(p.data[start:i]) {
				return nil, false
			}
			p.i = i + 1
			return p.data[start:i], true
		}
		if c == '\\' || c < 0x20 {
			break
		}
		if c >= utf8.RuneSelf {
			plain = false
		}
	}
	p.i = start
	b, err := p.slowBytes()
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
