package fenecdb

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
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
	d := json.NewDecoder(bytes.NewReader(body))
	d.UseNumber()
	t, err := d.Token()
	if err != nil {
		return Result{}, fmt.Errorf("fenecdb: the answer is not JSON: %w", err)
	}
	switch t {
	case json.Delim('{'):
		var a struct {
			Affected *int64 `json:"affected"`
		}
		if err := json.Unmarshal(body, &a); err != nil || a.Affected == nil {
			return Result{}, fmt.Errorf("fenecdb: the answer is neither rows nor {\"affected\": n}: %.200s", body)
		}
		return Result{Affected: *a.Affected}, nil
	case json.Delim('['):
		rows := []Row{}
		for d.More() {
			row, err := parseRow(d)
			if err != nil {
				return Result{}, err
			}
			rows = append(rows, row)
		}
		if _, err := d.Token(); err != nil {
			return Result{}, fmt.Errorf("fenecdb: the answer is not JSON: %w", err)
		}
		return Result{Affected: int64(len(rows)), Rows: rows}, nil
	}
	return Result{}, fmt.Errorf("fenecdb: the answer is neither rows nor {\"affected\": n}: %.200s", body)
}

// parseRow reads one row object from d, keeping its key order.
func parseRow(d *json.Decoder) (Row, error) {
	bad := func(err error) (Row, error) {
		if err == nil || errors.Is(err, io.EOF) {
			err = errors.New("a row is not an object")
		}
		return Row{}, fmt.Errorf("fenecdb: reading a row: %w", err)
	}
	t, err := d.Token()
	if err != nil || t != json.Delim('{') {
		return bad(err)
	}
	var row Row
	for d.More() {
		t, err := d.Token()
		if err != nil {
			return bad(err)
		}
		name, _ := t.(string)
		var v any
		if err := d.Decode(&v); err != nil {
			return bad(err)
		}
		row.Columns = append(row.Columns, name)
		row.Values = append(row.Values, v)
	}
	if _, err := d.Token(); err != nil {
		return bad(err)
	}
	return row, nil
}
