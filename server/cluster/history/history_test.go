package history

import (
	"strings"
	"testing"
)

func TestCheck(t *testing.T) {
	final := Op{Kind: "final", Result: "ok", Jobs: []int64{2}}
	tests := []struct {
		name string
		ops  []Op
		want string // "" for none
	}{
		{"clean", []Op{
			{Kind: "put", Result: "ok", Jobs: []int64{1}},
			{Kind: "put", Result: "ok", Jobs: []int64{2}},
			{Kind: "claim", Result: "ok", Owner: "a", Jobs: []int64{1}, Leases: [][2]int64{{0, 100}}},
			{Kind: "claim", Result: "ok", Owner: "b", Jobs: []int64{1}, Leases: [][2]int64{{100, 200}}},
			{Kind: "ack", Result: "ok", Owner: "b", Jobs: []int64{1}},
			final,
		}, ""},
		{"a put lost", []Op{
			{Kind: "put", Result: "ok", Jobs: []int64{1}},
			{Kind: "put", Result: "ok", Jobs: []int64{2}},
			final,
		}, "job 1: its put was acknowledged"},
		{"an ack of unknown outcome may have taken it", []Op{
			{Kind: "put", Result: "ok", Jobs: []int64{1}},
			{Kind: "claim", Result: "ok", Owner: "a", Jobs: []int64{1}, Leases: [][2]int64{{0, 100}}},
			{Kind: "ack", Result: "info", Owner: "a", Jobs: []int64{1}},
			final,
		}, ""},
		{"two owners at once", []Op{
			{Kind: "claim", Result: "ok", Owner: "a", Jobs: []int64{2}, Leases: [][2]int64{{0, 100}}},
			{Kind: "claim", Result: "ok", Owner: "b", Jobs: []int64{2}, Leases: [][2]int64{{50, 150}}},
			final,
		}, "the leases overlap"},
		{"acked twice", []Op{
			{Kind: "claim", Result: "ok", Owner: "a", Jobs: []int64{1}, Leases: [][2]int64{{0, 100}}},
			{Kind: "claim", Result: "ok", Owner: "b", Jobs: []int64{1}, Leases: [][2]int64{{100, 200}}},
			{Kind: "ack", Result: "ok", Owner: "a", Jobs: []int64{1}},
			{Kind: "ack", Result: "ok", Owner: "b", Jobs: []int64{1}},
			final,
		}, "acked done 2 times"},
		{"acked by a stranger", []Op{
			{Kind: "claim", Result: "ok", Owner: "a", Jobs: []int64{1}, Leases: [][2]int64{{0, 100}}},
			{Kind: "ack", Result: "ok", Owner: "z", Jobs: []int64{1}},
			final,
		}, "which no claim answered it to"},
		{"no final read", []Op{{Kind: "put", Result: "ok", Jobs: []int64{1}}}, "no final read"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			vs := Check(tt.ops)
			if tt.want == "" {
				if len(vs) > 0 {
					t.Fatalf("violations %v, want none", vs)
				}
				return
			}
			for _, v := range vs {
				if strings.Contains(string(v), tt.want) {
					return
				}
			}
			t.Fatalf("violations %v, want one with %q", vs, tt.want)
		})
	}
}

func TestRead(t *testing.T) {
	ops, err := Read(strings.NewReader(`{"client":1,"kind":"put","result":"ok","jobs":[3]}` + "\n\n" + `{"kind":"final","result":"ok","jobs":[3]}` + "\n"))
	if err != nil || len(ops) != 2 || ops[0].Jobs[0] != 3 {
		t.Fatalf("Read: %v %+v", err, ops)
	}
	if _, err := Read(strings.NewReader("{\"kind\":\n")); err == nil || !strings.Contains(err.Error(), "line 1") {
		t.Fatalf("a broken line: %v", err)
	}
}
