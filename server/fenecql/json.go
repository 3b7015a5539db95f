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
	if v.kind&packed != 0 {
		if !spaced {
			return append(dst, v.packedText()...)
		}
		v = v.unpack()
	}
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
