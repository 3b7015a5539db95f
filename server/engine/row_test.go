package engine

import (
	"bytes"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/fenecdb/fenec/server/fenecql"
)

// TestRowRoundTrip encodes documents of every field type, with values at
// the edges of each encoding (ints of every width and sign, NaN and -0,
// empty and long texts, nested JSON, nulls), and reads each field back
// as it was written: the same kind, the same value, the same JSON.
func TestRowRoundTrip(t *testing.T) {
	fields := []Field{
		{Name: "i", Type: fenecql.TypeInt}, {Name: "f", Type: fenecql.TypeFloat},
		{Name: "s", Type: fenecql.TypeText}, {Name: "b", Type: fenecql.TypeBool},
		{Name: "t", Type: fenecql.TypeTimestamp}, {Name: "j", Type: fenecql.TypeJSON},
		{Name: "g", Type: fenecql.TypeGeo},
	}
	s := newSchema(fields)
	r := rand.New(rand.NewPCG(1, 2))
	ints := []int64{0, 1, -1, 127, 128, -128, -129, 255, 256, 1 << 15, -1 << 15, 1<<31 - 1, -1 << 31, 1 << 40, 1<<53 - 1, math.MaxInt64, math.MinInt64}
	floats := []float64{0, math.Copysign(0, -1), 1.5, -2, math.NaN(), math.Inf(1), math.MaxFloat64, 5e-324}
	texts := []string{"", "a", "é\x00\"\\", strings.Repeat("x", 127), strings.Repeat("y", 128), strings.Repeat("z", 3000)}
	jsons := []string{`[]`, `{}`, `[1,2.0,"x",null,true]`, `{"to":"u1@example.com","n":{"a":[1,{"b":null}]}}`, `3`, `"text"`, `[1.5,2.5]`, `{"k":"` + strings.Repeat("w", 2000) + `"}`}
	pick := func(f Field) fenecql.Value {
		if r.IntN(5) == 0 {
			return fenecql.Null
		}
		switch f.Type {
		case fenecql.TypeInt:
			if r.IntN(2) == 0 {
				return fenecql.Int(ints[r.IntN(len(ints))])
			}
			return fenecql.Int(int64(r.Uint64()) >> r.IntN(64))
		case fenecql.TypeFloat:
			return fenecql.Float(floats[r.IntN(len(floats))])
		case fenecql.TypeText:
			return fenecql.Text(texts[r.IntN(len(texts))])
		case fenecql.TypeBool:
			return fenecql.Bool(r.IntN(2) == 0)
		case fenecql.TypeTimestamp:
			return fenecql.Time(ints[r.IntN(len(ints))])
		case fenecql.TypeJSON:
			v, err := fenecql.ParseJSON([]byte(jsons[r.IntN(len(jsons))]))
			if err != nil {
				t.Fatal(err)
			}
			if r.IntN(2) == 0 {
				v = fenecql.Pack(v)
			}
			return v
		}
		return fenecql.List([]fenecql.Value{fenecql.Float(r.Float64()*360 - 180), fenecql.Float(r.Float64()*180 - 90)})
	}
	for n := range 3000 {
		vals := make([]fenecql.Value, len(fields))
		for f := range fields {
			vals[f] = pick(fields[f])
		}
		d := s.encode(int64(n+1), vals)
		got := d.appendVals(nil)
		if d.ID != int64(n+1) || len(got) != len(vals) {
			t.Fatalf("doc %d: id %d, %d values, want %d", n, d.ID, len(got), len(vals))
		}
		for f, want := range vals {
			for _, v := range []fenecql.Value{got[f], d.val(f), d.Field(fields[f].Name)} {
				if v.Kind() != want.Kind() || !bytes.Equal(fenecql.AppendJSON(nil, v), fenecql.AppendJSON(nil, want)) {
					t.Fatalf("doc %d field %s: read %s (%s), wrote %s (%s)", n, fields[f].Name, fenecql.AppendJSON(nil, v), v.Kind(), fenecql.AppendJSON(nil, want), want.Kind())
				}
				if want.Kind() == fenecql.KindFloat && math.Float64bits(v.Float()) != math.Float64bits(want.Float()) {
					t.Fatalf("doc %d field %s: float bits %x, wrote %x", n, fields[f].Name, math.Float64bits(v.Float()), math.Float64bits(want.Float()))
				}
				if want.Kind() != fenecql.KindFloat && fenecql.Compare(v, want) != 0 {
					t.Fatalf("doc %d field %s: read a value that compares unequal", n, fields[f].Name)
				}
			}
			if d.isNull(f) != want.IsNull() {
				t.Fatalf("doc %d field %s: isNull %v", n, fields[f].Name, d.isNull(f))
			}
		}
		// A patch writes some fields anew and copies the others' bytes.
		written := make([]bool, len(fields))
		patched := make([]fenecql.Value, len(fields))
		for f := range fields {
			if written[f] = r.IntN(3) == 0; written[f] {
				patched[f] = pick(fields[f])
				vals[f] = patched[f]
			}
		}
		nd := s.reencode(d, patched, written)
		if nd.ID != d.ID {
			t.Fatalf("doc %d: reencode changed the id to %d", n, nd.ID)
		}
		for f, want := range vals {
			if v := nd.val(f); v.Kind() != want.Kind() || !bytes.Equal(fenecql.AppendJSON(nil, v), fenecql.AppendJSON(nil, want)) {
				t.Fatalf("doc %d field %s after a patch: read %s, want %s", n, fields[f].Name, fenecql.AppendJSON(nil, v), fenecql.AppendJSON(nil, want))
			}
		}
		if !bytes.Equal(nd.row(), s.encode(d.ID, vals).row()) {
			t.Fatalf("doc %d: a patch's block differs from the block of its values", n)
		}
	}
}

// TestRowSizes: a queue page's job is one allocation of 112 bytes, where
// a Value per field made it 160 and its payload 64 more.
func TestRowSizes(t *testing.T) {
	s := newSchema([]Field{{Name: "payload", Type: fenecql.TypeJSON}, {Name: "run_at", Type: fenecql.TypeTimestamp}, {Name: "owner", Type: fenecql.TypeText}, {Name: "attempts", Type: fenecql.TypeInt}, {Name: "error", Type: fenecql.TypeText}})
	payload, err := fenecql.ParseJSON([]byte(`{"locale":"en","template":"welcome","to":"u1234567@example.com"}`))
	if err != nil {
		t.Fatal(err)
	}
	vals := []fenecql.Value{fenecql.Pack(payload), fenecql.Time(1796000000000), fenecql.Null, fenecql.Int(0), fenecql.Null}
	allocs := testing.AllocsPerRun(100, func() { s.encode(1, vals) })
	if allocs != 1 {
		t.Errorf("encode made %v allocations, want 1", allocs)
	}
	if n := docHeader + 1 + len(s.encode(1, vals).row()); n > 112 {
		t.Errorf("the job takes %d bytes, want at most 112", n)
	}
}

// TestRowWide: a schema of more fields than the stack room encode and
// patch use reads back as written too.
func TestRowWide(t *testing.T) {
	var fields []Field
	vals := make([]fenecql.Value, 80)
	for f := range vals {
		if f%2 == 0 {
			fields = append(fields, Field{Name: fmt.Sprint("n", f), Type: fenecql.TypeInt})
			vals[f] = fenecql.Int(int64(f * 1000))
		} else {
			fields = append(fields, Field{Name: fmt.Sprint("s", f), Type: fenecql.TypeText})
			vals[f] = fenecql.Text(fmt.Sprint("text ", f))
		}
	}
	s := newSchema(fields)
	d := s.encode(9, vals)
	written := make([]bool, len(vals))
	patched := make([]fenecql.Value, len(vals))
	written[79], patched[79] = true, fenecql.Text("new")
	nd := s.reencode(d, patched, written)
	vals2 := append([]fenecql.Value(nil), vals...)
	vals2[79] = patched[79]
	for f := range vals {
		if !fenecql.Equal(d.val(f), vals[f]) || !fenecql.Equal(nd.val(f), vals2[f]) {
			t.Fatalf("field %d: read %v and %v", f, d.val(f), nd.val(f))
		}
	}
	var buf fieldBuf
	if got := nd.vals(&buf); len(got) != 80 || !fenecql.Equal(got[79], fenecql.Text("new")) {
		t.Fatalf("vals: %d values", len(got))
	}
}
