package fenecdb

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"reflect"
	"time"
)

// Condition is a condition written in FenecQL, made by [Raw].
type Condition struct{ fragment }

// Expression is a value written in FenecQL, made by [Expr].
type Expression struct{ fragment }

// fragment is FenecQL text whose ? marks (outside a '…' or "…" string
// literal) stand for arguments, each rendered as the next parameter $n.
type fragment struct {
	helper string // "raw" or "expr", for messages
	text   string
	args   []any
}

// Raw returns a condition written in FenecQL, for [Query.WhereRaw]:
//
//	jobs.WhereRaw(fenecdb.Raw("run_at <= now()"))
//	jobs.WhereRaw(fenecdb.Raw("attempts >= ? or error is not null", 5))
//
// Each ? stands for the next of args, which are sent as parameters, never
// spliced into the text; write ? rather than $n. The text itself is sent as
// written: never build it from input.
func Raw(text string, args ...any) Condition {
	return Condition{fragment{helper: "raw", text: text, args: args}}
}

// Expr returns a value written in FenecQL, for a patch, a document or the
// value of a condition:
//
//	fenecdb.D("run_at", fenecdb.Expr("now() + ?", 30000))
//
// renders as {run_at: now() + $1} with 30000 as $1. Its ? marks are those
// of [Raw].
func Expr(text string, args ...any) Expression {
	return Expression{fragment{helper: "expr", text: text, args: args}}
}

// Increment is a patch value that adds to a field its own value, made by
// [Inc].
type Increment struct{ by any }

// Inc returns a patch value adding n to the field it is set on:
// D("attempts", Inc(1)) renders as {attempts: attempts + $1}.
func Inc[N int | int8 | int16 | int32 | int64 | uint | uint8 | uint16 | uint32 | uint64 | float32 | float64](n N) Increment {
	return Increment{by: n}
}

// Doc is a document or a patch: field names and values, in order. Make one
// with [D]. Its fields render in the order given, as the other SDKs render an
// object's keys.
//
// A value is sent as a parameter, except an [Expression] (its text) and,
// in a patch, nil (the literal null) and an [Increment]. A Doc used as a
// value (of a json field) is sent as a JSON object in its order.
type Doc struct {
	names  []string
	values []any
	err    error
}

// D returns a Doc of alternating field names and values:
//
//	fenecdb.D("owner", owner, "attempts", fenecdb.Inc(1))
//
// A name that is not a string, or a name without a value, is an error
// returned by the call the Doc is given to.
func D(namesAndValues ...any) Doc {
	var d Doc
	if len(namesAndValues)%2 != 0 {
		d.err = fmt.Errorf("fenecdb: D has a field name without a value (%d arguments)", len(namesAndValues))
		return d
	}
	for i := 0; i < len(namesAndValues); i += 2 {
		name, ok := namesAndValues[i].(string)
		if !ok {
			d.err = fmt.Errorf("fenecdb: D's argument %d is a field name, and %T is not a string", i, namesAndValues[i])
			return d
		}
		d.names = append(d.names, name)
		d.values = append(d.values, namesAndValues[i+1])
	}
	return d
}

// MarshalJSON encodes d as a JSON object keeping its field order.
func (d Doc) MarshalJSON() ([]byte, error) {
	if d.err != nil {
		return nil, d.err
	}
	return marshalObject(d.names, d.values)
}

// marshalObject encodes names and values as a JSON object in their order.
func marshalObject(names []string, values []any) ([]byte, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, name := range names {
		if i > 0 {
			b.WriteByte(',')
		}
		k, err := json.Marshal(name)
		if err != nil {
			return nil, err
		}
		pv, err := param(values[i])
		if err != nil {
			return nil, fmt.Errorf("fenecdb: field %s: %w", name, err)
		}
		v, err := json.Marshal(pv)
		if err != nil {
			return nil, fmt.Errorf("fenecdb: field %s: %w", name, err)
		}
		b.Write(k)
		b.WriteByte(':')
		b.Write(v)
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

// Returning makes a write answer the rows it wrote (an update) or removed (a
// delete), in [Result.Rows]: Returning("*") answers id and every field,
// Returning("id", "payload.to") those columns.
func Returning(columns ...string) CallOption {
	return func(o *callOptions) {
		if err := checkColumns("returning", columns); err != nil {
			o.fail(err)
			return
		}
		o.returning = columns
	}
}

// Require makes a write refused unless it writes (or, with [Returning],
// answers) exactly n rows: the server answers 412 ([CodeUnmet]) and the
// write leaves no trace.
func Require(n int) CallOption {
	return func(o *callOptions) {
		if n < 0 {
			o.fail(fmt.Errorf("fenecdb: require must be a non-negative integer, not %d", n))
			return
		}
		o.require = n
	}
}

// timestampLayout is how a time is sent: ISO-8601 in UTC with
// milliseconds, as every SDK sends it (docs/sdks.md).
const timestampLayout = "2006-01-02T15:04:05.000Z07:00"

// param returns a value as it is sent: a time as ISO-8601 UTC text with
// milliseconds, a pointer as what it points to (nil as null), lists and
// maps with their elements so, and a non-finite number refused.
func param(v any) (any, error) {
	switch x := v.(type) {
	case nil, string, bool, int, int8, int16, int32, int64, uint, uint8, uint16, uint32, uint64, json.Number, json.RawMessage:
		return v, nil
	case float64:
		return v, finite(x)
	case float32:
		return v, finite(float64(x))
	case time.Time:
		return x.UTC().Format(timestampLayout), nil
	case Doc:
		for _, dv := range x.values {
			if _, err := param(dv); err != nil {
				return nil, err
			}
		}
		return x, x.err
	case json.Marshaler:
		return v, nil
	}
	rv := reflect.ValueOf(v)
	switch rv.Kind() {
	case reflect.Pointer, reflect.Interface:
		if rv.IsNil() {
			return nil, nil
		}
		return param(rv.Elem().Interface())
	case reflect.Slice, reflect.Array:
		if rv.Kind() == reflect.Slice && rv.IsNil() {
			return nil, nil
		}
		if rv.Type().Elem().Kind() == reflect.Uint8 {
			return v, nil // []byte: base64, as encoding/json sends it
		}
		out := make([]any, rv.Len())
		for i := range out {
			e, err := param(rv.Index(i).Interface())
			if err != nil {
				return nil, err
			}
			out[i] = e
		}
		return out, nil
	case reflect.Map:
		if rv.IsNil() {
			return nil, nil
		}
		if rv.Type().Key().Kind() != reflect.String {
			return v, nil
		}
		out := make(map[string]any, rv.Len())
		for it := rv.MapRange(); it.Next(); {
			e, err := param(it.Value().Interface())
			if err != nil {
				return nil, err
			}
			out[it.Key().String()] = e
		}
		return out, nil
	case reflect.Float32, reflect.Float64:
		return v, finite(rv.Float())
	}
	return v, nil
}

// params returns a statement's parameters as they are sent.
func params(ps []any) ([]any, error) {
	out := make([]any, len(ps))
	for i, p := range ps {
		v, err := param(p)
		if err != nil {
			return nil, fmt.Errorf("fenecdb: parameter $%d: %w", i+1, err)
		}
		out[i] = v
	}
	return out, nil
}

func finite(f float64) error {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return fmt.Errorf("%v is not a finite number", f)
	}
	return nil
}

// isNull reports whether v is nil or a nil pointer: a where on it is
// "is null".
func isNull(v any) bool {
	if v == nil {
		return true
	}
	rv := reflect.ValueOf(v)
	return rv.Kind() == reflect.Pointer && rv.IsNil()
}
