package fenecdb_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"os"
	"reflect"
	"strings"
	"testing"

	"github.com/fenecdb/fenec/sdks/go"
)

// goldenFile holds the builder cases every SDK renders alike, generated from
// the reference (JS) builder.
const goldenFile = "../../conformance/builder-golden.json"

// TestGolden renders every case of builder-golden.json through the Go
// builder, without sending it, and checks the text and parameters (or the
// error) the reference builder gave.
func TestGolden(t *testing.T) {
	b, err := os.ReadFile(goldenFile)
	if err != nil {
		t.Fatal(err)
	}
	var file struct {
		Cases []struct {
			Name   string          `json:"name"`
			Chain  json.RawMessage `json:"chain"`
			Query  string          `json:"query"`
			Params json.RawMessage `json:"params"`
			Error  string          `json:"error"`
		} `json:"cases"`
	}
	if err := json.Unmarshal(b, &file); err != nil {
		t.Fatal(err)
	}
	if len(file.Cases) == 0 {
		t.Fatal("no case in " + goldenFile)
	}
	for _, c := range file.Cases {
		t.Run(c.Name, func(t *testing.T) {
			chain, err := decodeOrdered(c.Chain)
			if err != nil {
				t.Fatal(err)
			}
			st, err := renderChain(chain)
			var unexpressed *unexpressible
			switch {
			case c.Error != "" && errors.As(err, &unexpressed):
				t.Logf("refused by Go's types: %v", err)
			case c.Error != "":
				if err == nil {
					t.Fatalf("rendered %q %v, want an error containing %q", st.Query, st.Params, c.Error)
				}
				if !strings.Contains(strings.ToLower(err.Error()), strings.ToLower(c.Error)) {
					t.Fatalf("error %q does not contain %q", err, c.Error)
				}
			case err != nil:
				t.Fatalf("want %q, got error %v", c.Query, err)
			default:
				if st.Query != c.Query {
					t.Errorf("query\n got %s\nwant %s", st.Query, c.Query)
				}
				got, err := json.Marshal(st.Params)
				if err != nil {
					t.Fatal(err)
				}
				if !sameJSON(t, got, c.Params) {
					t.Errorf("params\n got %s\nwant %s", got, c.Params)
				}
			}
		})
	}
}

// unexpressible is a chain Go's types cannot write (limit("10"), a number
// as a field name): where the reference builder throws, Go does not compile.
type unexpressible struct{ what string }

func (u *unexpressible) Error() string { return "not expressible in Go: " + u.what }

func unexpressed(format string, args ...any) error {
	return &unexpressible{fmt.Sprintf(format, args...)}
}

// object is a JSON object with its keys in order.
type object struct {
	keys []string
	vals []any
}

// decodeOrdered decodes JSON keeping objects' key order: objects become
// *object, numbers json.Number.
func decodeOrdered(raw []byte) (any, error) {
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	return decodeValue(d)
}

func decodeValue(d *json.Decoder) (any, error) {
	t, err := d.Token()
	if err != nil {
		return nil, err
	}
	switch t {
	case json.Delim('{'):
		o := &object{}
		for d.More() {
			k, err := d.Token()
			if err != nil {
				return nil, err
			}
			v, err := decodeValue(d)
			if err != nil {
				return nil, err
			}
			o.keys = append(o.keys, k.(string))
			o.vals = append(o.vals, v)
		}
		_, err := d.Token()
		return o, err
	case json.Delim('['):
		list := []any{}
		for d.More() {
			v, err := decodeValue(d)
			if err != nil {
				return nil, err
			}
			list = append(list, v)
		}
		_, err := d.Token()
		return list, err
	}
	return t, nil
}

// renderChain plays a golden chain on the Go builder and renders its
// endpoint.
func renderChain(chain any) (fenecdb.Statement, error) {
	calls, ok := chain.([]any)
	if !ok || len(calls) < 2 {
		return fenecdb.Statement{}, fmt.Errorf("bad chain %v", chain)
	}
	var c fenecdb.Collection
	for i, raw := range calls {
		call := raw.(*object)
		name, _ := field(call, "call").(string)
		args, _ := field(call, "args").([]any)
		if i == 0 {
			if name != "from" && name != "collection" {
				return fenecdb.Statement{}, fmt.Errorf("chain starts with %s", name)
			}
			s, err := str(args, 0, "collection name")
			if err != nil {
				return fenecdb.Statement{}, err
			}
			db, err := fenecdb.New("http://127.0.0.1:1")
			if err != nil {
				return fenecdb.Statement{}, err
			}
			c = db.From(s)
			continue
		}
		if i == len(calls)-1 {
			return endpoint(c, name, args)
		}
		var err error
		if c, err = step(c, name, args); err != nil {
			return fenecdb.Statement{}, err
		}
	}
	panic("unreachable")
}

func step(c fenecdb.Collection, name string, args []any) (fenecdb.Collection, error) {
	switch name {
	case "where":
		switch len(args) {
		case 1:
			v, err := value(args[0])
			if err != nil {
				return c, err
			}
			cond, ok := v.(fenecdb.Condition)
			if !ok {
				return c, unexpressed("where with one argument, not raw: %v", args[0])
			}
			return c.WhereRaw(cond), nil
		case 2:
			f, err := str(args, 0, "field")
			if err != nil {
				return c, err
			}
			v, err := value(args[1])
			return c.Where(f, v), err
		case 3:
			f, err := str(args, 0, "field")
			if err != nil {
				return c, err
			}
			op, err := str(args, 1, "operator")
			if err != nil {
				return c, err
			}
			v, err := value(args[2])
			return c.WhereOp(f, op, v), err
		}
		return c, unexpressed("where with %d arguments", len(args))
	case "order":
		f, err := str(args, 0, "field")
		if err != nil || len(args) == 1 {
			return c.Order(f), err
		}
		switch args[1] {
		case "asc":
			return c.Order(f), nil
		case "desc":
			return c.OrderDesc(f), nil
		}
		return c, unexpressed("order direction %v", args[1])
	case "limit", "offset":
		n, err := integer(args, name)
		if err != nil {
			return c, err
		}
		if name == "limit" {
			return c.Limit(n), nil
		}
		return c.Offset(n), nil
	case "select":
		cols, err := strs(args, "select")
		return c.Select(cols...), err
	}
	return c, fmt.Errorf("unknown call %s", name)
}

func endpoint(c fenecdb.Collection, name string, args []any) (fenecdb.Statement, error) {
	switch name {
	case "rows":
		return c.RenderRows()
	case "first":
		return c.RenderFirst()
	case "count":
		return c.RenderCount()
	case "insert":
		if len(args) != 1 {
			return fenecdb.Statement{}, unexpressed("insert with %d arguments", len(args))
		}
		if list, ok := args[0].([]any); ok {
			docs := make([]fenecdb.Doc, len(list))
			for i, d := range list {
				var err error
				if docs[i], err = doc(d); err != nil {
					return fenecdb.Statement{}, err
				}
			}
			return c.RenderInsertMany(docs)
		}
		d, err := doc(args[0])
		if err != nil {
			return fenecdb.Statement{}, err
		}
		return c.RenderInsert(d)
	case "update":
		if len(args) < 1 || len(args) > 2 {
			return fenecdb.Statement{}, unexpressed("update with %d arguments", len(args))
		}
		patch, err := doc(args[0])
		if err != nil {
			return fenecdb.Statement{}, err
		}
		opts, err := writeOptions(args[1:])
		if err != nil {
			return fenecdb.Statement{}, err
		}
		return c.RenderUpdate(patch, opts...)
	case "delete":
		opts, err := writeOptions(args)
		if err != nil {
			return fenecdb.Statement{}, err
		}
		return c.RenderDelete(opts...)
	}
	return fenecdb.Statement{}, fmt.Errorf("unknown endpoint %s", name)
}

func writeOptions(args []any) ([]fenecdb.WriteOption, error) {
	if len(args) == 0 {
		return nil, nil
	}
	o, ok := args[0].(*object)
	if !ok || len(args) > 1 {
		return nil, unexpressed("write options %v", args)
	}
	var opts []fenecdb.WriteOption
	for i, k := range o.keys {
		switch v := o.vals[i]; k {
		case "returning":
			switch v := v.(type) {
			case bool:
				if v {
					opts = append(opts, fenecdb.Returning("*"))
				}
			case []any:
				cols, err := strs(v, "returning")
				if err != nil {
					return nil, err
				}
				opts = append(opts, fenecdb.Returning(cols...))
			default:
				return nil, unexpressed("returning %v", v)
			}
		case "require":
			n, err := integer([]any{v}, "require")
			if err != nil {
				return nil, err
			}
			opts = append(opts, fenecdb.Require(n))
		case "wait":
			// A wait changes the request's header, not its text.
		default:
			return nil, fmt.Errorf("unknown write option %s", k)
		}
	}
	return opts, nil
}

// doc turns a golden object into a Doc in its key order.
func doc(v any) (fenecdb.Doc, error) {
	o, ok := v.(*object)
	if !ok || isHelper(o) {
		return fenecdb.Doc{}, unexpressed("a document that is not an object: %v", v)
	}
	kv := make([]any, 0, 2*len(o.keys))
	for i, k := range o.keys {
		v, err := value(o.vals[i])
		if err != nil {
			return fenecdb.Doc{}, err
		}
		kv = append(kv, k, v)
	}
	return fenecdb.D(kv...), nil
}

func isHelper(o *object) bool {
	return len(o.keys) == 1 && (o.keys[0] == "$raw" || o.keys[0] == "$expr" || o.keys[0] == "$inc")
}

// value turns a golden value into what a Go caller passes: the helpers
// for {"$raw"}, {"$expr"} and {"$inc"}, nil, numbers, strings, lists and
// nested objects (in order).
func value(v any) (any, error) {
	switch v := v.(type) {
	case *object:
		if isHelper(v) {
			return helper(v)
		}
		kv := make([]any, 0, 2*len(v.keys))
		for i, k := range v.keys {
			x, err := value(v.vals[i])
			if err != nil {
				return nil, err
			}
			kv = append(kv, k, x)
		}
		return fenecdb.D(kv...), nil
	case []any:
		out := make([]any, len(v))
		for i, x := range v {
			var err error
			if out[i], err = value(x); err != nil {
				return nil, err
			}
		}
		return out, nil
	}
	return v, nil
}

// helper turns {"$raw": [text, args…]}, {"$expr": […]} or {"$inc": n}
// into Raw, Expr or Inc.
func helper(o *object) (any, error) {
	if o.keys[0] == "$inc" {
		n, ok := o.vals[0].(json.Number)
		if !ok {
			return nil, unexpressed("inc of %v", o.vals[0])
		}
		if i, err := n.Int64(); err == nil {
			return fenecdb.Inc(i), nil
		}
		f, _ := n.Float64()
		return fenecdb.Inc(f), nil
	}
	list, _ := o.vals[0].([]any)
	text, err := str(list, 0, o.keys[0]+" text")
	if err != nil {
		return nil, err
	}
	args := make([]any, len(list)-1)
	for i, a := range list[1:] {
		if args[i], err = value(a); err != nil {
			return nil, err
		}
	}
	if o.keys[0] == "$raw" {
		return fenecdb.Raw(text, args...), nil
	}
	return fenecdb.Expr(text, args...), nil
}

func field(o *object, key string) any {
	for i, k := range o.keys {
		if k == key {
			return o.vals[i]
		}
	}
	return nil
}

func str(args []any, i int, what string) (string, error) {
	if i >= len(args) {
		return "", unexpressed("%s missing", what)
	}
	s, ok := args[i].(string)
	if !ok {
		return "", unexpressed("%s %v is not a string", what, args[i])
	}
	return s, nil
}

func strs(args []any, what string) ([]string, error) {
	out := make([]string, len(args))
	for i := range args {
		var err error
		if out[i], err = str(args, i, what); err != nil {
			return nil, err
		}
	}
	return out, nil
}

func integer(args []any, what string) (int, error) {
	if len(args) != 1 {
		return 0, unexpressed("%s with %d arguments", what, len(args))
	}
	n, ok := args[0].(json.Number)
	if !ok {
		return 0, unexpressed("%s %v is not a number", what, args[0])
	}
	i, err := n.Int64()
	if err != nil {
		return 0, unexpressed("%s %v is not an integer", what, n)
	}
	return int(i), nil
}

// sameJSON compares two JSON texts, numbers by value.
func sameJSON(t *testing.T, a, b []byte) bool {
	t.Helper()
	norm := func(raw []byte) any {
		d := json.NewDecoder(bytes.NewReader(raw))
		d.UseNumber()
		var v any
		if err := d.Decode(&v); err != nil {
			t.Fatalf("%s: %v", raw, err)
		}
		return normNumbers(v)
	}
	return reflect.DeepEqual(norm(a), norm(b))
}

func normNumbers(v any) any {
	switch v := v.(type) {
	case json.Number:
		r, _ := new(big.Rat).SetString(string(v))
		return r.RatString()
	case []any:
		for i := range v {
			v[i] = normNumbers(v[i])
		}
	case map[string]any:
		for k := range v {
			v[k] = normNumbers(v[k])
		}
	}
	return v
}
