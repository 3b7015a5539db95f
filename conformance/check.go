package conformance

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/big"
)

// Check applies the shared rule to one statement's HTTP answer: the body
// (a rows array, {"affected": n}, or an error object) and the status.
//
//   - no expectation: the statement succeeded (status 2xx);
//   - refused: s: the status is s;
//   - no row: status 2xx and the body is an empty array;
//   - a value: status 2xx, and the value equals the "affected" count of an
//     {"affected": n} body, or the first value (in the row's own column
//     order) of the first row of an array body. Numbers compare by value
//     (1 equals 1.0); strings, booleans and null compare exactly.
func Check(exp *Expect, answer json.RawMessage, status int) error {
	if err := exp.validate(); err != nil {
		return err
	}
	ok := status >= 200 && status <= 299
	switch {
	case exp != nil && exp.Refused != 0:
		if status != exp.Refused {
			return fmt.Errorf("want refused: %d, got status %d: %s", exp.Refused, status, brief(answer))
		}
		return nil
	case !ok:
		return fmt.Errorf("want %s, got status %d: %s", exp, status, brief(answer))
	case exp == nil:
		return nil
	case exp.NoRow:
		rows, err := rowsOf(answer)
		if err != nil {
			return fmt.Errorf("want no row: %w", err)
		}
		if rows != 0 {
			return fmt.Errorf("want no row, got %d: %s", rows, brief(answer))
		}
		return nil
	case exp.Value != nil:
		got, err := FirstValue(answer)
		if err != nil {
			return fmt.Errorf("want %s: %w", exp.Value, err)
		}
		eq, err := equalJSON(exp.Value, got)
		if err != nil {
			return err
		}
		if !eq {
			return fmt.Errorf("want %s, got %s (answer %s)", exp.Value, got, brief(answer))
		}
		return nil
	}
	return nil
}

// FirstValue returns what a value expectation is compared with: n of an
// {"affected": n} answer, else the first value of the first row of a rows
// answer. An empty rows answer is an error ("no row").
func FirstValue(answer json.RawMessage) (json.RawMessage, error) {
	d := json.NewDecoder(bytes.NewReader(answer))
	d.UseNumber()
	t, err := d.Token()
	if err != nil {
		return nil, fmt.Errorf("answer is not JSON: %s", brief(answer))
	}
	switch t {
	case json.Delim('{'):
		var obj map[string]json.RawMessage
		if err := json.Unmarshal(answer, &obj); err != nil {
			return nil, fmt.Errorf("answer is not JSON: %s", brief(answer))
		}
		n, ok := obj["affected"]
		if !ok {
			return nil, fmt.Errorf("answer is neither rows nor {\"affected\": n}: %s", brief(answer))
		}
		return n, nil
	case json.Delim('['):
		if !d.More() {
			return nil, errors.New("got no row")
		}
		t, err := d.Token()
		if err != nil || t != json.Delim('{') {
			return nil, fmt.Errorf("first row is not an object: %s", brief(answer))
		}
		if !d.More() {
			return nil, fmt.Errorf("first row has no column: %s", brief(answer))
		}
		if _, err := d.Token(); err != nil { // the first column's name
			return nil, fmt.Errorf("answer is not JSON: %s", brief(answer))
		}
		var v json.RawMessage
		if err := d.Decode(&v); err != nil {
			return nil, fmt.Errorf("answer is not JSON: %s", brief(answer))
		}
		return v, nil
	}
	return nil, fmt.Errorf("answer is neither rows nor {\"affected\": n}: %s", brief(answer))
}

func rowsOf(answer json.RawMessage) (int, error) {
	var rows []json.RawMessage
	if err := json.Unmarshal(answer, &rows); err != nil {
		return 0, fmt.Errorf("answer is not an array of rows: %s", brief(answer))
	}
	return len(rows), nil
}

// equalJSON compares two JSON values; numbers by value at any size.
func equalJSON(a, b json.RawMessage) (bool, error) {
	va, err := decodeNumbers(a)
	if err != nil {
		return false, fmt.Errorf("expectation %s is not JSON", a)
	}
	vb, err := decodeNumbers(b)
	if err != nil {
		return false, fmt.Errorf("answer value %s is not JSON", b)
	}
	return equalValues(va, vb), nil
}

func decodeNumbers(raw json.RawMessage) (any, error) {
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		return nil, err
	}
	if _, err := d.Token(); err != io.EOF {
		return nil, errors.New("trailing data")
	}
	return v, nil
}

func equalValues(a, b any) bool {
	switch x := a.(type) {
	case json.Number:
		y, ok := b.(json.Number)
		if !ok {
			return false
		}
		rx, okx := new(big.Rat).SetString(string(x))
		ry, oky := new(big.Rat).SetString(string(y))
		return okx && oky && rx.Cmp(ry) == 0
	case []any:
		y, ok := b.([]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for i := range x {
			if !equalValues(x[i], y[i]) {
				return false
			}
		}
		return true
	case map[string]any:
		y, ok := b.(map[string]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for k, v := range x {
			w, ok := y[k]
			if !ok || !equalValues(v, w) {
				return false
			}
		}
		return true
	}
	return a == b // string, bool, nil
}

func brief(b []byte) string {
	const max = 300
	if len(b) > max {
		return string(b[:max]) + "…"
	}
	return string(b)
}

// Runner is what Replay drives: one fresh database with a manual clock at
// ClockStartMS. Query sends one statement (POST /query) and answers the
// body and status; an error is for a failure to get an answer at all.
// Advance moves the clock (POST /_clock {"advance_ms": ms}).
type Runner interface {
	Query(query string, params []any) (answer json.RawMessage, status int, err error)
	Advance(ms int64) error
}

// Replay runs p's steps in order against r and stops at the first that
// fails, naming its file and line.
func (p Page) Replay(r Runner) error {
	for _, s := range p.Steps {
		if s.IsClock() {
			if err := r.Advance(s.AdvanceMS); err != nil {
				return fmt.Errorf("%s:%d: advancing the clock %d ms: %w", p.Source, s.Line, s.AdvanceMS, err)
			}
			continue
		}
		answer, status, err := r.Query(s.Query, s.Params)
		if err != nil {
			return fmt.Errorf("%s:%d: %s: %w", p.Source, s.Line, s.Query, err)
		}
		if err := Check(s.Expect, answer, status); err != nil {
			return fmt.Errorf("%s:%d: %s: %w", p.Source, s.Line, s.Query, err)
		}
	}
	return nil
}
