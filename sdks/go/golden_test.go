package fenecdb_test

import (
	"bytes"
	"encoding/json"
	"math"
	"os"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/fenecdb/fenec/sdks/go"
)

// TestGolden renders every case of conformance/builder-golden.json (format
// 2, docs/sdks.md) through the builder, without sending it: the text and
// parameters, or the refusal, every SDK answers alike.
func TestGolden(t *testing.T) {
	b, err := os.ReadFile("../../conformance/builder-golden.json")
	if err != nil {
		t.Fatal(err)
	}
	var file struct {
		Format int
		Cases  []struct {
			Name, From, Query, Refuse string
			Steps                     []map[string]json.RawMessage
			End                       map[string]json.RawMessage
			Params                    json.RawMessage
		}
	}
	if err := json.Unmarshal(b, &file); err != nil || file.Format != 2 || len(file.Cases) == 0 {
		t.Fatalf("not a golden file of format 2 with cases: %v", err)
	}
	jobs := connect(t, "http://127.0.0.1:1")
	for _, c := range file.Cases {
		t.Run(c.Name, func(t *testing.T) {
			defer func() {
				// A case Go's types cannot write (Inc takes a number) is
				// refused by the compiler: it must be a refusal.
				if p, ok := recover().(unwritable); ok {
					if c.Refuse == "" {
						t.Fatalf("Go cannot write %s, which the case renders", p)
					}
					t.Logf("refused by Go's types: %s", p)
				}
			}()
			q := jobs.From(c.From)
			for _, s := range c.Steps {
				q = step(t, q, s)
			}
			st, err := end(t, q, c.End)
			if c.Refuse != "" {
				if err == nil || !strings.Contains(strings.ToLower(err.Error()), strings.ToLower(c.Refuse)) {
					t.Fatalf("got %q %v, %v; want a refusal saying %q", st.Query, st.Params, err, c.Refuse)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got, _ := json.Marshal(st.Params)
			if st.Query != c.Query || !sameJSON(got, c.Params) {
				t.Fatalf("got  %s %s\nwant %s %s", st.Query, got, c.Query, c.Params)
			}
		})
	}
}

// unwritable is a typed value Go's types refuse at compile time.
type unwritable string

func step(t *testing.T, q fenecdb.Collection, s map[string]json.RawMessage) fenecdb.Collection {
	str := func(k string) (v string) { json.Unmarshal(s[k], &v); return }
	n := func() (v int) { json.Unmarshal(s["n"], &v); return }
	switch op := str("op"); {
	case op == "where" && s["raw"] != nil:
		text, args := fragment(t, s["raw"])
		return q.WhereRaw(fenecdb.Raw(text, args...))
	case op == "where" && s["cmp"] != nil:
		return q.WhereOp(str("field"), str("cmp"), value(t, s["value"]))
	case op == "where":
		return q.Where(str("field"), value(t, s["value"]))
	case op == "order" && s["dir"] != nil:
		return q.OrderBy(str("field"), str("dir"))
	case op == "order":
		return q.Order(str("field"))
	case op == "limit":
		return q.Limit(n())
	case op == "offset":
		return q.Offset(n())
	case op == "select":
		var fields []string
		json.Unmarshal(s["fields"], &fields)
		return q.Select(fields...)
	}
	t.Fatalf("unknown step %v", s)
	return q
}

func end(t *testing.T, q fenecdb.Collection, e map[string]json.RawMessage) (fenecdb.Statement, error) {
	var op string
	json.Unmarshal(e["op"], &op)
	var opts []fenecdb.CallOption
	if e["require"] != nil {
		var n int
		json.Unmarshal(e["require"], &n)
		opts = append(opts, fenecdb.Require(n))
	}
	if e["returning"] != nil {
		var cols []string
		json.Unmarshal(e["returning"], &cols)
		opts = append(opts, fenecdb.Returning(cols...))
	}
	switch op {
	case "rows":
		return q.RenderRows()
	case "first":
		return q.RenderFirst()
	case "count":
		return q.RenderCount()
	case "insert":
		if e["docs"] != nil {
			var docs []json.RawMessage
			json.Unmarshal(e["docs"], &docs)
			ds := make([]fenecdb.Doc, len(docs))
			for i, d := range docs {
				ds[i] = doc(t, d)
			}
			return q.RenderInsertMany(ds)
		}
		return q.RenderInsert(doc(t, e["doc"]))
	case "update":
		return q.RenderUpdate(doc(t, e["patch"]), opts...)
	case "delete":
		return q.RenderDelete(opts...)
	}
	t.Fatalf("unknown end %v", e)
	return fenecdb.Statement{}, nil
}

// doc reads {K: V…} keeping the keys' order.
func doc(t *testing.T, raw json.RawMessage) fenecdb.Doc {
	d := json.NewDecoder(bytes.NewReader(raw))
	d.Token() // {
	var kv []any
	for d.More() {
		k, _ := d.Token()
		var v json.RawMessage
		if err := d.Decode(&v); err != nil {
			t.Fatal(err)
		}
		kv = append(kv, k, value(t, v))
	}
	return fenecdb.D(kv...)
}

// fragment reads {"text": T, "args": [V…]}.
func fragment(t *testing.T, raw json.RawMessage) (string, []any) {
	var f struct {
		Text string
		Args []json.RawMessage
	}
	json.Unmarshal(raw, &f)
	args := make([]any, len(f.Args))
	for i, a := range f.Args {
		args[i] = value(t, a)
	}
	return f.Text, args
}

// value reads a typed value: {"null"|"bool"|"int"|"float"|"string"|
// "timestamp"|"json"|"list"|"expr"|"inc": …}.
func value(t *testing.T, raw json.RawMessage) any {
	var v map[string]json.RawMessage
	if err := json.Unmarshal(raw, &v); err != nil || len(v) != 1 {
		t.Fatalf("not a typed value: %s", raw)
	}
	for k, x := range v {
		var s string
		json.Unmarshal(x, &s)
		switch k {
		case "null":
			return nil
		case "bool":
			return string(x) == "true"
		case "int":
			n, err := strconv.ParseInt(s, 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return n
		case "float":
			if f, ok := map[string]float64{"NaN": math.NaN(), "Infinity": math.Inf(1), "-Infinity": math.Inf(-1)}[s]; ok {
				return f
			}
			f, _ := strconv.ParseFloat(string(x), 64)
			return f
		case "string":
			return s
		case "timestamp":
			ts, err := time.Parse(time.RFC3339Nano, s)
			if err != nil {
				t.Fatal(err)
			}
			return ts
		case "json":
			var j any
			d := json.NewDecoder(bytes.NewReader(x))
			d.UseNumber()
			d.Decode(&j)
			return j
		case "list":
			var items []json.RawMessage
			json.Unmarshal(x, &items)
			list := make([]any, len(items))
			for i, item := range items {
				list[i] = value(t, item)
			}
			return list
		case "expr":
			text, args := fragment(t, x)
			return fenecdb.Expr(text, args...)
		case "inc":
			switch n := value(t, x).(type) {
			case int64:
				return fenecdb.Inc(n)
			case float64:
				return fenecdb.Inc(n)
			default:
				panic(unwritable("inc of " + string(x)))
			}
		}
	}
	t.Fatalf("unknown typed value %s", raw)
	return nil
}

// sameJSON compares two JSON texts as values, numbers by their text.
func sameJSON(a, b []byte) bool {
	var va, vb any
	da, db := json.NewDecoder(bytes.NewReader(a)), json.NewDecoder(bytes.NewReader(b))
	da.UseNumber()
	db.UseNumber()
	return da.Decode(&va) == nil && db.Decode(&vb) == nil && reflect.DeepEqual(va, vb)
}
