package httpapi

import (
	"net/http"
	"sort"

	"github.com/fenecdb/fenec/server/fenecql"
	"github.com/fenecdb/fenec/server/httpapi/gen"
)

// The statements' one reader. A /query or /batch body is read once, by
// fenecql's strict JSON reader, straight into each statement's text and
// FenecQL parameters, and held to what openapi.yaml's QueryRequest and
// BatchRequest say: an object, "query" a non-empty string and required,
// "params" an array of any values, no other key; "statements" a non-empty
// array of those, and no other key. Its headers are held to the spec's
// Fenec-Wait and Idempotency-Key.
//
// ServeHTTP reads a body so first (the fast path): what the reader takes,
// the spec takes too, so the spec's validation is not run on it. A body it
// does not take goes to the full check (server.go check: the strict JSON
// check, then kin-openapi's validation), which says what is wrong in the
// words docs/http.md and the tests give; a body the check passes reaches
// the handler (Query, Batch), which reads it with the same reader, whose
// refusal then can only be a parameter's value (1e999).
// TestFastPathAcceptsWhatTheSpecAccepts holds the reader to the spec, and
// to encoding/json's reading of the same bodies.

// stmtIn is one statement of a body: its text, as the body's bytes (for
// the statement cache to look up without a copy), and its parameters.
type stmtIn struct {
	raw    []byte
	params []fenecql.Value
}

// notStatements is readStatements' refusal of a body that is not what
// the spec says: the full check, run on such a body, says what is wrong.
func notStatements(batch bool) *apiError {
	if batch {
		return badRequest("the body is not a batch (openapi.yaml, BatchRequest)")
	}
	return badRequest("the body is not a query (openapi.yaml, QueryRequest)")
}

// trailing is the refusal of a body with more after its JSON value, which
// the spec's validation does not look at.
func trailing() *apiError { return badRequest("the body holds data after its JSON value") }

// readStatements reads a /query (batch false) or /batch body, appending
// its statements to stmts and their parameters to *slab. It refuses a
// parameter's value with what is wrong and which it is, any other body
// with notStatements.
func readStatements(body []byte, batch bool, stmts []stmtIn, slab *[]fenecql.Value) ([]stmtIn, *apiError) {
	r := fenecql.NewJSONReader(body)
	if !batch {
		st, e := readStatement(r, slab, -1)
		if e != nil {
			return nil, e
		}
		if !r.End() {
			return nil, trailing()
		}
		return append(stmts, st), nil
	}
	if !r.Open('{') {
		return nil, notStatements(batch)
	}
	if k, ok := r.Key(); !ok || string(k) != "statements" || !r.Open('[') {
		return nil, notStatements(batch)
	}
	for first := true; ; first = false {
		more, ok := r.Next(']', first)
		if !ok {
			return nil, notStatements(batch)
		}
		if !more {
			break
		}
		st, e := readStatement(r, slab, len(stmts))
		if e != nil {
			return nil, e
		}
		if stmts == nil {
			stmts = make([]stmtIn, 0, 16)
		}
		stmts = append(stmts, st)
	}
	// "statements" is the only key, and holds one statement or more.
	if more, ok := r.Next('}', false); !ok || more || len(stmts) == 0 {
		return nil, notStatements(batch)
	}
	if !r.End() {
		return nil, trailing()
	}
	return stmts, nil
}

// readStatement reads a QueryRequest object, the at-th of a batch (-1: a
// /query's). Its parameters are appended to *slab, which the body's
// statements share (a /batch of ten acks allocates for its parameters
// once or twice, not twenty times), and cut from it at their length, so
// no later append writes into them.
func readStatement(r *fenecql.JSONReader, slab *[]fenecql.Value, at int) (stmtIn, *apiError) {
	var st stmtIn
	if !r.Open('{') {
		return st, notStatements(at >= 0)
	}
	query, params := false, false
	for first := true; ; first = false {
		more, ok := r.Next('}', first)
		if !ok {
			return st, notStatements(at >= 0)
		}
		if !more {
			break
		}
		k, ok := r.Key()
		if !ok {
			return st, notStatements(at >= 0)
		}
		switch string(k) {
		case "query":
			if query {
				return st, notStatements(at >= 0) // a key twice
			}
			query = true
			if st.raw, ok = r.Text(); !ok || len(st.raw) == 0 {
				return st, notStatements(at >= 0)
			}
		case "params":
			if params || !r.Open('[') {
				return st, notStatements(at >= 0)
			}
			params = true
			if *slab == nil {
				*slab = make([]fenecql.Value, 0, 8)
			}
			start := len(*slab)
			for first := true; ; first = false {
				more, ok := r.Next(']', first)
				if !ok {
					return st, notStatements(at >= 0)
				}
				if !more {
					break
				}
				v, err := r.Value()
				if err != nil {
					return st, paramError(at, len(*slab)-start, err)
				}
				sortKeys(v)
				*slab = append(*slab, v)
			}
			st.params = (*slab)[start:len(*slab):len(*slab)]
		default:
			return st, notStatements(at >= 0)
		}
	}
	if !query {
		return st, notStatements(at >= 0)
	}
	return st, nil
}

// paramError is the refusal of the i-th parameter of the at-th statement
// of a batch (-1: of a /query), named as the body has it.
func paramError(at, i int, err error) *apiError {
	if at < 0 {
		return badRequest("params[%d]: %v", i, err)
	}
	e := badRequest("statements[%d].params[%d]: %v", at, i, err)
	e.at = &at
	return e
}

// sortKeys sorts the keys of v's objects, at every depth: a parameter
// object is taken with its keys in order, whatever order a client's JSON
// encoder wrote them in (a Go map's has none), as fenecql.FromGo takes a
// Go map.
func sortKeys(v fenecql.Value) {
	switch v.Kind() {
	case fenecql.KindList:
		for _, it := range v.List() {
			sortKeys(it)
		}
	case fenecql.KindObject:
		o := v.Object()
		sort.Sort(byKey{o})
		for _, it := range o.Vals {
			sortKeys(it)
		}
	}
}

type byKey struct{ o *fenecql.Object }

func (b byKey) Len() int           { return len(b.o.Keys) }
func (b byKey) Less(i, j int) bool { return b.o.Keys[i] < b.o.Keys[j] }
func (b byKey) Swap(i, j int) {
	b.o.Keys[i], b.o.Keys[j] = b.o.Keys[j], b.o.Keys[i]
	b.o.Vals[i], b.o.Vals[j] = b.o.Vals[j], b.o.Vals[i]
}

// readHeaders reads Fenec-Wait and Idempotency-Key as the spec has them:
// at most one of each, the wait a whole number from 0 to 30000 written
// plainly, the key 1 to 255 bytes. ok is false for anything else, and for
// a query string, which the full check judges.
func readHeaders(r *http.Request) (held *gen.FenecWait, key *gen.IdempotencyKey, ok bool) {
	if r.URL.RawQuery != "" {
		return nil, nil, false
	}
	if vs, found := r.Header["Fenec-Wait"]; found {
		if len(vs) != 1 {
			return nil, nil, false
		}
		ms, ok := plainMS(vs[0])
		if !ok {
			return nil, nil, false
		}
		held = &ms
	}
	if vs, found := r.Header["Idempotency-Key"]; found {
		if len(vs) != 1 || len(vs[0]) < 1 || len(vs[0]) > 255 {
			return nil, nil, false
		}
		key = &vs[0]
	}
	return held, key, true
}

// plainMS reads 0 to 30000 written in digits, with no sign and no leading
// zero.
func plainMS(s string) (int, bool) {
	if len(s) == 0 || len(s) > 5 || len(s) > 1 && s[0] == '0' {
		return 0, false
	}
	n := 0
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, false
		}
		n = n*10 + int(s[i]-'0')
	}
	return n, n <= 30000
}
