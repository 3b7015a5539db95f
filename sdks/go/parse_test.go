package fenecdb

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"slices"
	"testing"
)

// decodeRows is how encoding/json's token API reads an answer's rows in
// key order: the reference rowReader must agree with.
func decodeRows(body []byte) ([]Row, error) {
	d := json.NewDecoder(bytes.NewReader(body))
	d.UseNumber()
	if t, err := d.Token(); err != nil || t != json.Delim('[') {
		return nil, errors.New("not an array")
	}
	rows := []Row{}
	for d.More() {
		if t, err := d.Token(); err != nil || t != json.Delim('{') {
			return nil, errors.New("a row is not an object")
		}
		var row Row
		for d.More() {
			t, err := d.Token()
			if err != nil {
				return nil, err
			}
			var v any
			if err := d.Decode(&v); err != nil {
				return nil, err
			}
			row.Columns = append(row.Columns, t.(string))
			row.Values = append(row.Values, v)
		}
		if _, err := d.Token(); err != nil {
			return nil, err
		}
		rows = append(rows, row)
	}
	return rows, nil
}

// FuzzParseAnswer: the rows parseAnswer reads are the rows, columns in
// order and values as encoding/json decodes them (numbers as
// json.Number), whatever the spacing, escapes and nesting; what is not
// JSON, or not an array of objects, is an error.
func FuzzParseAnswer(f *testing.F) {
	for _, s := range []string{
		`[]`, ` [ ] `, `{"affected": 3}`,
		`[{"id":1,"run_at":"2026-12-05T00:00:00Z","payload":{"to":"a@b","n":[1,2.5,-3e2]},"owner":"w-1:2","attempts":1,"error":null}]`,
		`[{"id":1,"a":"x"},{"id":2,"a":"y"},{"id":3},{"id":4,"b":true,"a":false}]`,
		"[ {\"k\\u00e9y\" : \"v\\\"al\\\\\" , \"n\" :-0.5E+3}\n,\t{ } ,{\"x\":[{\"y\":\"}]\"}]}]",
		`[{"a":1},{"a":1,"b":2},{"b":2}]`, `[1]`, `[{"a":1}`, `[{"a":}]`, `nul`, ``,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, body string) {
		res, err := parseAnswer([]byte(body))
		want, werr := decodeRows([]byte(body))
		if werr != nil || !json.Valid([]byte(body)) {
			if err == nil && res.Rows != nil {
				t.Fatalf("%q: read rows %v, want an error (%v)", body, res.Rows, werr)
			}
			return
		}
		if err != nil {
			t.Fatalf("%q: %v, want %v", body, err, want)
		}
		if !reflect.DeepEqual(res.Rows, want) || res.Affected != int64(len(want)) {
			t.Fatalf("%q:\nread %#v\nwant %#v", body, res.Rows, want)
		}
	})
}

// BenchmarkParseAnswer reads a claim's answer of ten jobs.
func BenchmarkParseAnswer(b *testing.B) {
	var rows []string
	for range 10 {
		rows = append(rows, `{"id":12345,"payload":{"to":"user-12345@example.com"},"run_at":"2026-12-05T00:59:12.345Z","owner":"w-0a1b2c3d:42","attempts":1,"error":null}`)
	}
	body := []byte("[" + string(bytes.Join(func() (bs [][]byte) {
		for _, r := range rows {
			bs = append(bs, []byte(r))
		}
		return
	}(), []byte(","))) + "]")
	b.Run("rowReader", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := parseAnswer(body); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("tokens", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := decodeRows(body); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// TestWords: a statement's words skip string literals (with their
// escapes) and -- comments, and split at anything else.
func TestWords(t *testing.T) {
	for q, want := range map[string][]string{
		"":           nil,
		"  get jobs": {"get", "jobs"},
		"set jobs {a: 'returning'} where b = \"it\\\"s returning\" -- returning\nlimit 1": {"set", "jobs", "a", "where", "b", "limit", "1"},
		"set jobs {owner: $1} where run_at <= now() returning *":                          {"set", "jobs", "owner", "1", "where", "run_at", "now", "returning"},
		"del x--y\nreturning id":  {"del", "x", "returning", "id"},
		"'unterminated returning": nil,
		"a-b_c9":                  {"a", "b_c9"},
	} {
		if got := slices.Collect(words(q)); !slices.Equal(got, want) {
			t.Errorf("words(%q) = %q, want %q", q, got, want)
		}
	}
	for q, want := range map[string]bool{
		"set jobs {a: 1} returning *": true, "SET jobs {a: 1} RETURNING id": true,
		"set jobs {a: 'returning'}": false, "get jobs -- returning": false, "del jobs returning id": false, "returning": false,
	} {
		if isClaim(q) != want {
			t.Errorf("isClaim(%q) = %v", q, !want)
		}
	}
	if isWrite("  get jobs") || !isWrite("") || !isWrite("put jobs {}") || !schemaChange("CREATE collection x ()") || schemaChange("get create") {
		t.Error("isWrite or schemaChange misread the verb")
	}
}
