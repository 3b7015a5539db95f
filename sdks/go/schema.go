package fenecdb

import (
	"context"
	"encoding/json"
	"fmt"
	"iter"
	"strings"
	"sync"
	"time"
)

// schemas caches each collection's declared field types (GET
// /collections), by which rows are decoded (docs/sdks.md): never by
// guessing from a value's shape.
type schemas struct {
	mu     sync.Mutex
	fields map[string]map[string]string // collection → field → type; nil until read
	// undeclared are columns no field declared even after a fresh read (an
	// expression): they send no more reads.
	undeclared map[[2]string]bool
}

// forget drops the cache after a statement that may change a schema.
func (s *schemas) forget() {
	s.mu.Lock()
	s.fields, s.undeclared = nil, nil
	s.mu.Unlock()
}

// load reads every collection's fields.
func (s *schemas) load(ctx context.Context, c *Client, o callOptions) error {
	reply, err := c.send(ctx, "GET /collections", false, callOptions{timeout: o.timeout}, "", false, func(ctx context.Context, t *apiTransport, _ batchHeaders) (apiReply, error) {
		return t.collections(ctx)
	})
	if err != nil {
		return err
	}
	var body apiCollections
	if err := json.Unmarshal(reply.body, &body); err != nil {
		return unexpected(reply.host, "GET /collections", reply.status, reply.body)
	}
	fields := map[string]map[string]string{}
	for _, coll := range body.Collections {
		m := map[string]string{}
		for _, f := range coll.Fields {
			m[f.Name] = f.Type
		}
		fields[coll.Name] = m
	}
	s.mu.Lock()
	s.fields = fields
	s.mu.Unlock()
	return nil
}

// lookup returns a collection's field types, and whether the cache has
// been read at all.
func (s *schemas) lookup(coll string) (map[string]string, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.fields[coll], s.fields != nil
}

// prepare reads the schema before a statement that answers rows of a
// collection the cache does not know, so that a failure to read it sends
// nothing (a claim's rows are never lost to it).
func (s *schemas) prepare(ctx context.Context, c *Client, st Statement, o callOptions) error {
	if st.rowsOf == "" {
		return nil
	}
	if f, read := s.lookup(st.rowsOf); read && f != nil {
		return nil
	}
	return s.load(ctx, c, o)
}

// decode types the rows of a builder's statement by its collection's
// declared field types. A column the cache does not know makes it read the
// schema once more (a field added since); a column no field declares (a
// path into a json field, an expression, count) is as the JSON says, and
// so are the rows of a statement written as text.
func (s *schemas) decode(ctx context.Context, c *Client, o callOptions, st Statement, rows []Row) error {
	if st.rowsOf == "" || len(rows) == 0 {
		return nil
	}
	fields, _ := s.lookup(st.rowsOf)
	unknown := func() (cols [][2]string) {
		s.mu.Lock()
		defer s.mu.Unlock()
		for _, col := range rows[0].Columns {
			key := [2]string{st.rowsOf, col}
			if _, ok := fields[col]; !ok && col != "id" && !strings.Contains(col, ".") && !s.undeclared[key] {
				cols = append(cols, key)
			}
		}
		return cols
	}
	if len(unknown()) > 0 && s.load(ctx, c, o) == nil {
		fields, _ = s.lookup(st.rowsOf)
		still := unknown()
		s.mu.Lock()
		if s.undeclared == nil {
			s.undeclared = map[[2]string]bool{}
		}
		for _, key := range still {
			s.undeclared[key] = true
		}
		s.mu.Unlock()
	}
	for _, row := range rows {
		for i, col := range row.Columns {
			typ := fields[col]
			if col == "id" {
				typ = "int"
			}
			v, err := typed(typ, row.Values[i])
			if err != nil {
				return &Error{Code: CodeUnexpected, At: -1, Message: fmt.Sprintf("column %s of %s: %v", col, st.rowsOf, err)}
			}
			row.Values[i] = v
		}
	}
	return nil
}

// typed converts a JSON-decoded value (numbers as json.Number) to the Go
// type of a declared field type: int → int64, float → float64, timestamp
// → time.Time; text, bool, json and geo are as JSON decodes them.
func typed(typ string, v any) (any, error) {
	if v == nil {
		return nil, nil
	}
	switch typ {
	case "int":
		if n, ok := v.(json.Number); ok {
			return n.Int64()
		}
	case "float":
		if n, ok := v.(json.Number); ok {
			return n.Float64()
		}
	case "timestamp":
		if s, ok := v.(string); ok {
			t, err := time.Parse(time.RFC3339Nano, s)
			return t.UTC(), err
		}
	default:
		return v, nil
	}
	return nil, fmt.Errorf("%v is not a %s", v, typ)
}

// words yields the words of a statement outside its string literals and
// -- comments: enough to tell its verb, its collection, and whether it
// says returning. Each word is a piece of query, so none is allocated
// (they are read for every call sent).
func words(query string) iter.Seq[string] {
	return func(yield func(string) bool) {
		start := -1 // where the word being read began
		for i := 0; i < len(query); i++ {
			ch := query[i]
			if ch == '_' || ch >= 'a' && ch <= 'z' || ch >= 'A' && ch <= 'Z' || ch >= '0' && ch <= '9' {
				if start < 0 {
					start = i
				}
				continue
			}
			if start >= 0 {
				if !yield(query[start:i]) {
					return
				}
				start = -1
			}
			switch {
			case ch == '\'' || ch == '"':
				for i++; i < len(query) && query[i] != ch; i++ {
					if query[i] == '\\' {
						i++
					}
				}
			case ch == '-' && i+1 < len(query) && query[i+1] == '-':
				for i < len(query) && query[i] != '\n' {
					i++
				}
			}
		}
		if start >= 0 {
			yield(query[start:])
		}
	}
}

// verb returns a statement's first word ("" when it has none).
func verb(query string) string {
	for w := range words(query) {
		return w
	}
	return ""
}

// isClaim reports whether a statement is a claim, which alone carries a
// wait: a set with returning (docs/sdks.md).
func isClaim(query string) bool {
	first := true
	for w := range words(query) {
		if first && !strings.EqualFold(w, "set") {
			return false
		}
		if !first && strings.EqualFold(w, "returning") {
			return true
		}
		first = false
	}
	return false
}

// schemaChange reports whether a statement may change a collection's
// fields.
func schemaChange(query string) bool {
	v := verb(query)
	return strings.EqualFold(v, "create") || strings.EqualFold(v, "drop") || strings.EqualFold(v, "alter")
}
