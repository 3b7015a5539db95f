package fenecql

import (
	"math"
	"strings"
	"unicode/utf8"
)

// Coerce fits v to a field of type t, or says why it does not fit. Null
// fits every type. Conversions are the lossless ones a client needs: an
// integral float for an int (JSON clients often cannot tell them apart),
// an int for a float, epoch milliseconds or ISO-8601 text for a timestamp.
// The error names the type and the value; the caller adds the field.
func Coerce(v Value, t Type) (Value, error) {
	if v.IsNull() {
		return v, nil
	}
	switch t {
	case TypeInt:
		switch v.Kind() {
		case KindInt:
			return v, nil
		case KindFloat:
			// A whole float (2.0, 1e3) is the integer, below 2^53: from
			// there floats are spaced 2 or more apart, and the integer the
			// client wrote (9007199254740993.0, read as 2^53) may have
			// been rounded on its way to a float.
			if f := v.Float(); f == math.Trunc(f) && math.Abs(f) < maxExactFloat {
				return Int(int64(f)), nil
			}
			if f := v.Float(); f == math.Trunc(f) {
				return Null, Errorf(0, "int expected, found float %s: from 2^53 a float may not be the integer written; write it without a fraction or an exponent", short(v))
			}
		}
	case TypeFloat:
		switch v.Kind() {
		case KindFloat:
			return v, nil
		case KindInt:
			return Float(float64(v.Int())), nil
		}
	case TypeText:
		if v.Kind() == KindText {
			return v, nil
		}
	case TypeBool:
		if v.Kind() == KindBool {
			return v, nil
		}
	case TypeTimestamp:
		switch v.Kind() {
		case KindTime:
			return v, nil
		case KindInt:
			if err := checkTime(0, v.Int()); err != nil {
				return Null, err
			}
			return Time(v.Int()), nil
		case KindText:
			ms, err := ParseTime(v.Text())
			if err == nil {
				return Time(ms), nil
			}
			if strings.Contains(err.Error(), timeRange) {
				return Null, err // a timestamp, but out of range: say so
			}
			return Null, Errorf(0, "timestamp expected as epoch milliseconds or ISO-8601 text (2026-05-03T09:20:00Z), found text %s", short(v))
		}
	case TypeJSON:
		v, _ = jsonable(v)
		return v, nil
	case TypeGeo:
		if lon, lat, ok := geoPoint(v); ok {
			return List([]Value{Float(lon), Float(lat)}), nil
		}
		return Null, Errorf(0, "geo point expected as [lon, lat] with lon in -180..180 and lat in -90..90, found %s", short(v))
	default:
		return Null, Errorf(0, "unknown type %s", t)
	}
	return Null, Errorf(0, "%s expected, found %s %s", t, v.Kind(), short(v))
}

// jsonable returns v with every timestamp in it turned into its ISO text,
// since a json field holds only what JSON can say. It reports whether it
// changed anything, so that only lists and objects holding a timestamp
// are copied.
func jsonable(v Value) (Value, bool) {
	switch v.Kind() {
	case KindTime:
		return Text(FormatTime(v.Time())), true
	case KindList:
		if l, ok := jsonableAll(v.List()); ok {
			return List(l), true
		}
	case KindObject:
		o := v.Object()
		if vals, ok := jsonableAll(o.Vals); ok {
			return ObjectOf(&Object{Keys: o.Keys, Vals: vals}), true
		}
	}
	return v, false
}

func jsonableAll(vs []Value) ([]Value, bool) {
	var c []Value
	for i, it := range vs {
		j, changed := jsonable(it)
		if changed && c == nil {
			c = append(make([]Value, 0, len(vs)), vs[:i]...)
		}
		if c != nil {
			c = append(c, j)
		}
	}
	return c, c != nil
}

// short renders v for an error message: its JSON, spaced like FenecQL,
// cut to about 40 characters.
func short(v Value) string {
	return cut(string(appendValue(nil, v, true)), 40)
}

// maxExactFloat is 2^53: a float below it that is whole is the integer
// written, from it on it may be a neighbour rounded to it.
const maxExactFloat = 1 << 53

// ClipLen is how much of a text a client sent an error message echoes
// (Clip).
const ClipLen = 200

// Clip cuts text a client sent to at most ClipLen bytes, marked with "…"
// where cut, for an error message that echoes it: a megabyte identifier
// is named by its start, not sent back whole.
func Clip(s string) string { return cut(s, ClipLen) }

// cut shortens s to at most n bytes on a rune boundary, marking the cut.
func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}
