package fenecdb

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
)

// ErrNoRows is what [FirstAs] returns when the read answers no row.
// ([Query.First] returns a nil row and a nil error then, as it always
// has.)
var ErrNoRows = errors.New("fenecdb: no rows")

// RowsAs sends q's read and returns its rows, each decoded into a T as
// [Row.Decode] decodes it (a struct by its json tags, or a map):
//
//	type Job struct {
//		ID       int64     `json:"id"`
//		RunAt    time.Time `json:"run_at"`
//		Attempts int       `json:"attempts"`
//	}
//	jobs, err := fenecdb.RowsAs[Job](ctx, db.From("jobs").Where("owner", nil))
//
// A row that does not decode into a T is an error naming it.
func RowsAs[T any](ctx context.Context, q Query, opts ...CallOption) ([]T, error) {
	rows, err := q.Rows(ctx, opts...)
	if err != nil {
		return nil, err
	}
	out := make([]T, len(rows))
	for i, r := range rows {
		if err := r.Decode(&out[i]); err != nil {
			return nil, fmt.Errorf("fenecdb: row %d of %s as %T: %w", i, q.name, out[i], err)
		}
	}
	return out, nil
}

// FirstAs sends q's read with limit 1 and returns its row decoded into a
// T, or [ErrNoRows] when it answers none.
func FirstAs[T any](ctx context.Context, q Query, opts ...CallOption) (T, error) {
	var v T
	row, err := q.First(ctx, opts...)
	if err != nil {
		return v, err
	}
	if row == nil {
		return v, ErrNoRows
	}
	if err := row.Decode(&v); err != nil {
		return v, fmt.Errorf("fenecdb: the row of %s as %T: %w", q.name, v, err)
	}
	return v, nil
}

// docOf returns what Insert writes for v: a [Doc] as it is, or the JSON
// object encoding/json makes of v (a struct by its json tags, a map), its
// fields in that order and each value sent as that JSON.
func docOf(v any) (Doc, error) {
	switch d := v.(type) {
	case Doc:
		return d, nil
	case *Doc:
		if d != nil {
			return *d, nil
		}
	}
	if isNull(v) {
		return Doc{}, errors.New("fenecdb: insert: a nil document")
	}
	b, err := json.Marshal(v)
	if err != nil {
		return Doc{}, fmt.Errorf("fenecdb: insert: %T: %w", v, err)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	if t, _ := dec.Token(); t != json.Delim('{') {
		return Doc{}, fmt.Errorf("fenecdb: insert: a %T is not a document (its JSON is not an object)", v)
	}
	var d Doc
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return Doc{}, err
		}
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return Doc{}, err
		}
		d.names = append(d.names, t.(string))
		if string(raw) == "null" {
			d.values = append(d.values, nil)
		} else {
			d.values = append(d.values, raw)
		}
	}
	return d, nil
}

// docsOf returns what InsertMany writes for docs: a []Doc, or a slice of
// anything [docOf] takes.
func docsOf(docs any) ([]Doc, error) {
	if ds, ok := docs.([]Doc); ok {
		return ds, nil
	}
	rv := reflect.ValueOf(docs)
	if rv.Kind() != reflect.Slice && rv.Kind() != reflect.Array {
		return nil, fmt.Errorf("fenecdb: insert: a list of documents is a slice, not a %T", docs)
	}
	out := make([]Doc, rv.Len())
	for i := range out {
		d, err := docOf(rv.Index(i).Interface())
		if err != nil {
			return nil, fmt.Errorf("%w (document %d)", err, i)
		}
		out[i] = d
	}
	return out, nil
}
