package engine

import (
	"strconv"

	"github.com/fenecdb/fenec/server/fenecql"
)

// Result is one statement's answer: rows (a read, or a write with
// returning), or the count of documents a write wrote.
type Result struct {
	IsRows   bool
	Columns  []string
	Rows     [][]fenecql.Value
	Affected int64
	Seq      uint64 // the database's change number after the request
}

func affected(n int64) *Result { return &Result{Affected: n} }

// AppendJSON appends the answer as the HTTP API writes it: an array of row
// objects, each keeping its column order, or {"affected": n}.
func (r *Result) AppendJSON(dst []byte) []byte {
	if !r.IsRows {
		dst = append(dst, `{"affected":`...)
		dst = strconv.AppendInt(dst, r.Affected, 10)
		return append(dst, '}')
	}
	dst = append(dst, '[')
	for i, row := range r.Rows {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = append(dst, '{')
		for k, v := range row {
			if k > 0 {
				dst = append(dst, ',')
			}
			// A JSON string, not strconv.AppendQuote: Go's \x01 is not JSON,
			// and a column is named by its text, which may hold any character.
			dst = fenecql.AppendJSONText(dst, r.Columns[k])
			dst = append(dst, ':')
			dst = fenecql.AppendJSON(dst, v)
		}
		dst = append(dst, '}')
	}
	return append(dst, ']')
}

// MarshalJSON is AppendJSON for encoding/json.
func (r *Result) MarshalJSON() ([]byte, error) { return r.AppendJSON(nil), nil }

// Count returns how many rows the answer holds, or the count written.
func (r *Result) Count() int64 {
	if r.IsRows {
		return int64(len(r.Rows))
	}
	return r.Affected
}
