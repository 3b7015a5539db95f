package fenecdb_test

import (
	"encoding/json"
	"math"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/fenecdb/fenec/sdks/go"
)

// FuzzRawParameters: a Raw condition's ? marks outside string literals
// become the next parameters, numbered after the ones before it, and
// nothing else of its text changes; a count of marks other than the
// arguments', or a $n in the text, is an error, never a statement.
func FuzzRawParameters(f *testing.F) {
	for _, s := range []string{"a = ? and b = ?", "a = '?' or b = ? and c = ?", `s = "it\"s ?" and ? = ?`, "? ?", "x = $1", "a = ?", "'unterminated ? ?", "?$?"} {
		f.Add(s, "text", int64(7))
	}
	db, _ := fenecdb.Connect("http://127.0.0.1:1")
	f.Fuzz(func(t *testing.T, text, a string, b int64) {
		s, err := db.From("t").Where("x", 1).WhereRaw(fenecdb.Raw(text, a, b)).RenderRows()
		if err != nil {
			if !strings.Contains(err.Error(), "raw(") {
				t.Fatalf("the error %q does not name raw and its text", err)
			}
			return
		}
		if len(s.Params) != 3 || s.Params[0] != 1 || s.Params[1] != a || s.Params[2] != b {
			t.Fatalf("params %v, want [1 %q %d]", s.Params, a, b)
		}
		const head, tail = "get t where x = $1 and (", ")"
		if !strings.HasPrefix(s.Query, head) || !strings.HasSuffix(s.Query, tail) {
			t.Fatalf("%q is not the conditions joined with and", s.Query)
		}
		inner := s.Query[len(head) : len(s.Query)-len(tail)]
		if strip(inner) != strip(text) {
			t.Fatalf("Raw(%q) rendered as %q: more than its marks changed", text, inner)
		}
		if strings.Count(inner, "$2") < 1 || strings.Count(inner, "$3") < 1 || strings.Index(inner, "$2") > strings.LastIndex(inner, "$3") {
			t.Fatalf("Raw(%q) rendered as %q: the marks are not $2 then $3", text, inner)
		}
	})
}

// strip removes the marks and what they become.
func strip(s string) string {
	return strings.NewReplacer("$2", "", "$3", "", "?", "").Replace(s)
}

// FuzzDocParameters: a document's values are sent as parameters as they
// are, a time as its UTC instant in milliseconds, a non-finite number
// refused; what is sent is JSON.
func FuzzDocParameters(f *testing.F) {
	f.Add("ada", 1.5, int64(-3), int64(1_700_000_000_123_456_789))
	f.Add("", math.Inf(1), int64(0), int64(0))
	f.Add("\xff", math.NaN(), int64(math.MaxInt64), int64(-1))
	db, _ := fenecdb.Connect("http://127.0.0.1:1")
	stamp := regexp.MustCompile(`^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$`)
	f.Fuzz(func(t *testing.T, s string, x float64, n, ns int64) {
		at := time.Unix(0, ns).In(time.FixedZone("somewhere", 5*3600))
		st, err := db.From("t").RenderInsert(fenecdb.D("s", s, "x", x, "n", n, "at", at))
		if math.IsNaN(x) || math.IsInf(x, 0) {
			if err == nil || !strings.Contains(err.Error(), "finite") {
				t.Fatalf("%v: got %v, want refused as not finite", x, err)
			}
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		if st.Query != "insert t {s: $1, x: $2, n: $3, at: $4}" {
			t.Fatalf("the statement %q", st.Query)
		}
		if st.Params[0] != s || st.Params[1] != x || st.Params[2] != n {
			t.Fatalf("params %v, want %q %v %d", st.Params, s, x, n)
		}
		text, ok := st.Params[3].(string)
		if !ok || !stamp.MatchString(text) && at.Year() >= 0 && at.Year() <= 9999 {
			t.Fatalf("the time %v was sent as %v", at, st.Params[3])
		}
		if back, err := time.Parse(time.RFC3339Nano, text); err == nil && !back.Equal(at.Truncate(time.Millisecond)) {
			t.Fatalf("the time %v was sent as %s, which reads %v", at, text, back)
		}
		if _, err := json.Marshal(st.Params); err != nil {
			t.Fatalf("the params are not JSON: %v", err)
		}
	})
}

// FuzzFieldNames: a field is an identifier or a dotted path of them, sent
// as written; anything else is an error naming it.
func FuzzFieldNames(f *testing.F) {
	for _, s := range []string{"owner", "payload.to", "a b", "1x", "x.", "_", "x--", "é"} {
		f.Add(s)
	}
	db, _ := fenecdb.Connect("http://127.0.0.1:1")
	ident := regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$`)
	f.Fuzz(func(t *testing.T, field string) {
		s, err := db.From("t").Where(field, 1).OrderDesc(field).RenderRows()
		if !ident.MatchString(field) {
			if err == nil {
				t.Fatalf("the field %q was rendered: %q", field, s.Query)
			}
			return
		}
		if err != nil || s.Query != "get t where "+field+" = $1 order "+field+" desc" {
			t.Fatalf("%q: %q %v", field, s.Query, err)
		}
	})
}
