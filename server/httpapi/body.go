package httpapi

import (
	"net/http"
	"sort"

	"github.com/fenecdb/fenec/server/fenecql"
	"github.com/fenecdb/fenec/server/httpapi/gen"
)

// The statements' fast path. A /query or /batch body is read once, by
// fenecql's strict JSON parser, straight into each statement's text and
// FenecQL parameters, and held to what openapi.yaml's QueryRequest and
// BatchRequest say: an object, "query" a non-empty string and required,
// "params" an array of any values, no other key; "statements" a non-empty
// array of those, and no other key. Its headers are held to the spec's
// Fenec-Wait and Idempotency-Key. Whatever it does not accept, it leaves
// to the full check (server.go check: the strict JSON check, then
// kin-openapi's validation) and the handler's own decoding, which say
// what is wrong in the words docs/http.md and the tests give. So the fast
// path accepts only what the spec accepts, and a refusal reads as before;
// TestFastPathAcceptsWhatTheSpecAccepts holds it to that.

// stmtIn is one statement of a body: its text and its parameters. The
// fast path keeps the text as the body's bytes (raw), for the statement
// cache to look up without a copy; the handler's decoding gives a string.
type stmtIn struct {
	query  string
	raw    []byte
	params []fenecql.Value
}

// readStatements reads a /query (batch false) or /batch body, appending
// its statements to stmts and their parameters to *slab; ok is false for a
// body it leaves to the full check.
func readStatements(body []byte, batch bool, stmts []stmtIn, slab *[]fenecql.Value) (_ []stmtIn, ok bool) {
	r := fenecql.NewJSONReader(body)
	if !batch {
		st, ok := readStatement(r, slab)
		if !ok || !r.End() {
			return nil, false
		}
		return append(stmts, st), true
	}
	if !r.Open('{') {
		return nil, false
	}
	if k, ok := r.Key(); !ok || string(k) != "statements" || !r.Open('[') {
		return nil, false
	}
	for first := true; ; first = false {
		more, ok := r.Next(']', first)
		if !ok {
			return nil, false
		}
		if !more {
			break
		}
		st, ok := readStatement(r, slab)
		if !ok {
			return nil, false
		}
		if stmts == nil {
			stmts = make([]stmtIn, 0, 16)
		}
		stmts = append(stmts, st)
	}
	// "statements" is the only key, and holds one statement or more.
	if more, ok := r.Next('}', false); !ok || more || len(stmts) == 0 || !r.End() {
		return nil, false
	}
	return stmts, true
}

// readStatement reads a QueryRequest object. Its parameters are appended
// to *slab, which the body's statements share (a /batch of ten acks
// allocates for its parameters once or twice, not twenty times), and cut
// from it at their length, so no later append writes into them.
func readStatement(r *fenecql.JSONReader, slab *[]fenecql.Value) (stmtIn, bool) {
	var st stmtIn
	if !r.Open('{') {
		return st, false
	}
	query, params := false, false
	for first := true; ; first = false {
		more, ok := r.Next('}', first)
		if !ok {
			return st, false
		}
		if !more {
			break
		}
		k, ok := r.Key()
		if !ok {
			return st, false
		}
		switch string(k) {
		case "query":
			if query {
				return st, false // a key twice
			}
			query = true
			if st.raw, ok = r.Text(); !ok || len(st.raw) == 0 {
				return st, false
			}
		case "params":
			if params || !r.Open('[') {
				return st, false
			}
			params = true
			if *slab == nil {
				*slab = make([]fenecql.Value, 0, 8)
			}
			start := len(*slab)
			for first := true; ; first = false {
				more, ok := r.Next(']', first)
				if !ok {
					return st, false
				}
				if !more {
					break
				}
				v, ok := r.Value()
				if !ok {
					return st, false
				}
				sortKeys(v)
				*slab = append(*slab, v)
			}
			st.params = (*slab)[start:len(*slab):len(*slab)]
		default:
			return st, false
		}
	}
	return st, query
}

// sortKeys sorts the keys of v's objects, at every depth, as
// fenecql.FromGo does for the handler's own decoding (a Go map has lost
// the order they were written in): a parameter reads the same whichever
// path read it.
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
