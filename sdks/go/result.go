package fenecdb

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"unicode/utf8"
)

// Result is what a statement answered.
type Result struct {
	// Affected is how many documents the statement wrote (or, for a read
	// or a write with Returning, how many rows it answered).
	Affected int64
	// Rows are the rows a read, or a write with Returning, answered; nil
	// when the server answered a count ({"affected": n}) instead.
	Rows []Row
	// Seq is the database's change number after a request that wrote (the
	// Fenec-Seq header); 0 when the request wrote nothing.
	Seq int64
	// Replayed reports that the answer is the first answer to the request's
	// Idempotency-Key, replayed: this request wrote nothing.
	Replayed bool
}

// Row is one row of an answer, its columns in the order the server sent
// them: for "*", id and then the collection's fields as declared; otherwise
// the order of the select or returning list.
//
// Values are typed by the declared field types of the collection
// (docs/sdks.md), never guessed from their shape: an int field (and id, and
// a count) is an int64, a float a float64, a timestamp a [time.Time] (UTC),
// text a string, bool a bool, and json or geo what encoding/json decodes
// into an any but with numbers as [json.Number], so no integer loses
// precision; null is nil. A path into a json field (payload.to) is as
// JSON decodes it. To read a row into typed fields, use [Row.Decode].
type Row struct {
	// Columns are the columns' names, in order.
	Columns []string
	// Values are the columns' values, Values[i] being column Columns[i].
	Values []any
}

// Get returns the value of the named column, or nil when the row has no
// such column.
func (r Row) Get(column string) any {
	if i := slices.Index(r.Columns, column); i >= 0 {
		return r.Values[i]
	}
	return nil
}

// Decode stores the row in the value v points to, as [json.Unmarshal]
// would store the row's JSON object: into a struct by its json tags, or a
// map.
//
//	var job struct {
//		ID       int64 `json:"id"`
//		Attempts int   `json:"attempts"`
//	}
//	err := row.Decode(&job)
func (r Row) Decode(v any) error {
	b, err := r.MarshalJSON()
	if err != nil {
		return err
	}
	return json.Unmarshal(b, v)
}

// MarshalJSON encodes the row as a JSON object in its column order.
func (r Row) MarshalJSON() ([]byte, error) { return marshalObject(r.Columns, r.Values) }

// parseBatch splits a batch's answer into its statements' answers.
func parseBatch(body []byte) ([]json.RawMessage, error) {
	var b apiBatchAnswer
	if err := json.Unmarshal(body, &b); err != nil {
		return nil, err
	}
	return b.Results, nil
}

// parseAnswer decodes one statement's answer: an array of row objects, or
// {"affected": n}.
func parseAnswer(body []byte) (Result, error) {
	if !json.Valid(body) {
		return Result{}, fmt.Errorf("fenecdb: the answer is not JSON: %.200s", body)
	}
	r := rowReader{b: body}
	switch r.skipSpace() {
	case '{':
		var a struct {
			Affected *int64 `json:"affected"`
		}
		if err := json.Unmarshal(body, &a); err != nil || a.Affected == nil {
			return Result{}, fmt.Errorf("fenecdb: the answer is neither rows nor {\"affected\": n}: %.200s", body)
		}
		return Result{Affected: *a.Affected}, nil
	case '[':
		rows, err := r.rows()
		if err != nil {
			return Result{}, err
		}
		return Result{Affected: int64(len(rows)), Rows: rows}, nil
	}
	return Result{}, fmt.Errorf("fenecdb: the answer is neither rows nor {\"affected\": n}: %.200s", body)
}

// parseRow decodes one row object, keeping its key order.
func parseRow(raw []byte) (Row, error) {
	if !json.Valid(raw) {
		return Row{}, errors.New("fenecdb: reading a row: not JSON")
	}
	r := rowReader{b: raw}
	r.skipSpace()
	return r.row(nil)
}

// rowReader reads rows out of JSON that json.Valid has passed, so it only
// has to find where each key and value begins and ends: encoding/json
// decodes a value, but keeps no key order but through its token API,
// which costs an allocation or more per token — most of a worker's
// claim, whose answer is its rows.
type rowReader struct {
	b []byte
	i int
}

// skipSpace moves past white space and returns the byte there (0 at the
// end).
func (r *rowReader) skipSpace() byte {
	for ; r.i < len(r.b); r.i++ {
		switch r.b[r.i] {
		case ' ', '\t', '\n', '\r':
		default:
			return r.b[r.i]
		}
	}
	return 0
}

// rows reads an array of row objects, r.i at its '['. Rows with the same
// columns as the row before share its Columns.
func (r *rowReader) rows() ([]Row, error) {
	rows := []Row{}
	r.i++ // [
	var prev []string
	for {
		switch r.skipSpace() {
		case ']':
			return rows, nil
		case ',':
			r.i++
			r.skipSpace()
		}
		row, err := r.row(prev)
		if err != nil {
			return nil, err
		}
		prev = row.Columns
		rows = append(rows, row)
	}
}

// row reads one object, r.i at it; prev are the columns of the row
// before, reused when this one's are the same.
func (r *rowReader) row(prev []string) (Row, error) {
	if r.i >= len(r.b) || r.b[r.i] != '{' {
		return Row{}, errors.New("fenecdb: reading a row: a row is not an object")
	}
	r.i++
	var row Row
	same := len(prev) > 0
	for {
		switch r.skipSpace() {
		case '}':
			r.i++
			switch {
			case !same:
			case len(row.Values) == len(prev):
				row.Columns = prev
			case len(row.Values) > 0: // fewer columns than the row before
				row.Columns = slices.Clone(prev[:len(row.Values)])
			}
			return row, nil
		case ',':
			r.i++
			r.skipSpace()
		}
		k := len(row.Values)
		key, err := r.key(prev, k)
		if err != nil {
			return Row{}, err
		}
		if same && (k >= len(prev) || prev[k] != key) {
			same = false
			row.Columns = append(make([]string, 0, k+1), prev[:k]...)
		}
		if !same {
			row.Columns = append(row.Columns, key)
		}
		r.skipSpace()
		r.i++ // :
		r.skipSpace()
		v, err := r.value()
		if err != nil {
			return Row{}, err
		}
		row.Values = append(row.Values, v)
	}
}

// key reads an object's key, r.i at its '"'; when it is prev[k] it
// returns that string, allocating none.
func (r *rowReader) key(prev []string, k int) (string, error) {
	start := r.i
	escaped := r.skipString()
	raw := r.b[start+1 : r.i-1]
	if !escaped {
		if k < len(prev) && prev[k] == string(raw) {
			return prev[k], nil
		}
		return string(raw), nil
	}
	var s string
	err := json.Unmarshal(r.b[start:r.i], &s)
	return s, err
}

// skipString moves past a string, r.i at its '"', and returns whether
// its bytes are not its text as they are: it holds an escape, or bytes
// that are not UTF-8 (which encoding/json reads as U+FFFD).
func (r *rowReader) skipString() (escaped bool) {
	start, high := r.i, false
	for r.i++; r.i < len(r.b); r.i++ {
		switch c := r.b[r.i]; {
		case c == '\\':
			escaped = true
			r.i++
		case c == '"':
			r.i++
			return escaped || high && !utf8.Valid(r.b[start:r.i])
		case c >= utf8.RuneSelf:
			high = true
		}
	}
	return escaped
}

// value reads one value, r.i at it, as encoding/json decodes it into an
// any, but with numbers as json.Number (its Decoder's UseNumber).
func (r *rowReader) value() (any, error) {
	start := r.i
	switch c := r.b[r.i]; {
	case c == '"':
		if r.skipString() {
			var s string
			err := json.Unmarshal(r.b[start:r.i], &s)
			return s, err
		}
		return string(r.b[start+1 : r.i-1]), nil
	case c == '{':
		m := map[string]any{}
		r.i++
		for {
			switch r.skipSpace() {
			case '}':
				r.i++
				return m, nil
			case ',':
				r.i++
				r.skipSpace()
			}
			k, err := r.key(nil, 0)
			if err != nil {
				return nil, err
			}
			r.skipSpace()
			r.i++ // :
			r.skipSpace()
			if m[k], err = r.value(); err != nil {
				return nil, err
			}
		}
	case c == '[':
		a := []any{}
		r.i++
		for {
			switch r.skipSpace() {
			case ']':
				r.i++
				return a, nil
			case ',':
				r.i++
				r.skipSpace()
			}
			v, err := r.value()
			if err != nil {
				return nil, err
			}
			a = append(a, v)
		}
	case c == 'n':
		r.i += len("null")
		return nil, nil
	case c == 't':
		r.i += len("true")
		return true, nil
	case c == 'f':
		r.i += len("false")
		return false, nil
	}
	for r.i < len(r.b) && (r.b[r.i] == '-' || r.b[r.i] == '+' || r.b[r.i] == '.' || r.b[r.i] == 'e' || r.b[r.i] == 'E' || r.b[r.i] >= '0' && r.b[r.i] <= '9') {
		r.i++
	}
	return json.Number(r.b[start:r.i]), nil
}
