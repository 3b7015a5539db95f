package fenecql

import (
	"bytes"
	"testing"
)

// FuzzPack holds a packed list or object to the value it was packed from:
// the same kind, order, JSON, rendering, paths and length, so that a
// document's json field reads the same whether it is held packed or not.
func FuzzPack(f *testing.F) {
	for _, s := range []string{`{"to": "u1@example.com", "template": "welcome", "locale": "en"}`, `[1, 2.0, -0.0, 1e300, "x\u00e9\n", null, true]`, `{"a": {"b": [{"c": 1}]}, "a": 2}`, `[]`, `{}`, `[[[]]]`, `{"t": "2026-05-03T09:20:00.000Z"}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		v, err := ParseJSON(data)
		if err != nil || (v.Kind() != KindList && v.Kind() != KindObject) {
			return
		}
		p := Pack(v)
		if p.kind&packed == 0 {
			t.Fatalf("Pack(%s) did not pack", data)
		}
		if p.Kind() != v.Kind() {
			t.Fatalf("Pack(%s).Kind() = %s, want %s", data, p.Kind(), v.Kind())
		}
		if c := Compare(p, v); c != 0 {
			t.Fatalf("Compare(Pack(%s), it) = %d", data, c)
		}
		if c := Compare(v, p); c != 0 {
			t.Fatalf("Compare(it, Pack(%s)) = %d", data, c)
		}
		if got, want := AppendJSON(nil, p), AppendJSON(nil, v); !bytes.Equal(got, want) {
			t.Fatalf("AppendJSON(Pack(%s)) = %s, want %s", data, got, want)
		}
		if got, want := short(p), short(v); got != want {
			t.Fatalf("short(Pack(%s)) = %s, want %s", data, got, want)
		}
		if q := Pack(p); q != p {
			t.Fatalf("Pack of a packed value made a new one")
		}
		if c, err := Coerce(p, TypeJSON); err != nil || c != p {
			t.Fatalf("Coerce(Pack(%s), json) = %v, %v: want it as it was", data, c, err)
		}
		if _, err := Coerce(p, TypeText); err == nil {
			t.Fatalf("Coerce(Pack(%s), text) took a %s", data, p.Kind())
		}
		switch v.Kind() {
		case KindList:
			if len(p.List()) != len(v.List()) || p.Object() != nil {
				t.Fatalf("Pack(%s) reads as another list", data)
			}
			if len(v.List()) > 0 && !Equal(p.Path([]string{"0"}), v.Path([]string{"0"})) {
				t.Fatalf("Pack(%s).Path(0) differs", data)
			}
		case KindObject:
			o := v.Object()
			if po := p.Object(); po == nil || len(po.Keys) != len(o.Keys) || p.List() != nil {
				t.Fatalf("Pack(%s) reads as another object", data)
			}
			for _, k := range o.Keys {
				if !Equal(p.Path([]string{k}), v.Path([]string{k})) {
					t.Fatalf("Pack(%s).Path(%q) differs", data, k)
				}
			}
		}
	})
}

// A packed value costs about its JSON's length: the decoded object of the
// queue page's payload is several allocations, the packed one is one.
func TestPackIsOneAllocation(t *testing.T) {
	v, err := ParseJSON([]byte(`{"to": "u123456@example.com", "template": "welcome", "locale": "en"}`))
	if err != nil {
		t.Fatal(err)
	}
	var p Value
	if n := testing.AllocsPerRun(100, func() { p = Pack(v) }); n != 1 {
		t.Errorf("Pack allocated %v times, want 1", n)
	}
	if p.n != uint64(len(AppendJSON(nil, v))) {
		t.Errorf("packed %d bytes, want the JSON's %d", p.n, len(AppendJSON(nil, v)))
	}
}
