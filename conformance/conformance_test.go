package conformance

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func val(s string) *Expect { return &Expect{Value: json.RawMessage(s)} }

func TestExtract(t *testing.T) {
	tests := []struct {
		name string
		md   string
		want []Step
	}{
		{
			name: "statements, expectations, clock moves",
			md: "# Page\n" +
				"```fenecql\n" +
				"create collection jobs (n int)\n" +
				"put jobs {n: 1}   -- → 1: one\n" +
				"-- 20 s later\n" +
				"get jobs select n   -- -> 1\n" +
				"-- 250 ms later\n" +
				"-- 2 min later\n" +
				"-- 1 h later\n" +
				"get jobs where n = 2   -- → no row: none\n" +
				"del jobs require 5   -- → refused: 412, commentary, more\n" +
				"```\n",
			want: []Step{
				{Line: 3, Query: "create collection jobs (n int)"},
				{Line: 4, Query: "put jobs {n: 1}", Expect: val("1")},
				{Line: 5, AdvanceMS: 20000},
				{Line: 6, Query: "get jobs select n", Expect: val("1")},
				{Line: 7, AdvanceMS: 250},
				{Line: 8, AdvanceMS: 120000},
				{Line: 9, AdvanceMS: 3600000},
				{Line: 10, Query: "get jobs where n = 2", Expect: &Expect{NoRow: true}},
				{Line: 11, Query: "del jobs require 5", Expect: &Expect{Refused: 412}},
			},
		},
		{
			name: "values of every kind",
			md: "```fenecql\n" +
				"a   -- → \"x: y\": the string holds a colon\n" +
				"b   -- → -1.5e3\n" +
				"c   -- → true\n" +
				"d   -- → false: no\n" +
				"e   -- → null\n" +
				"f   -- → \"say \\\"hi\\\"\"\n" +
				"g   -- → \"2026-05-03T09:20:00.000Z\"\n" +
				"```\n",
			want: []Step{
				{Line: 2, Query: "a", Expect: val(`"x: y"`)},
				{Line: 3, Query: "b", Expect: val(`-1.5e3`)},
				{Line: 4, Query: "c", Expect: val(`true`)},
				{Line: 5, Query: "d", Expect: val(`false`)},
				{Line: 6, Query: "e", Expect: val(`null`)},
				{Line: 7, Query: "f", Expect: val(`"say \"hi\""`)},
				{Line: 8, Query: "g", Expect: val(`"2026-05-03T09:20:00.000Z"`)},
			},
		},
		{
			name: "continuation lines, comments kept, other fences skipped",
			md: "```sql\nnot replayed\n```\n" +
				"```fenecql-sketch\nset jobs {owner: $1}\n```\n" +
				"- a list item\n\n" +
				"  ```fenecql\n" +
				"  set jobs {n: 2}\n" +
				"    -- why\n" +
				"    where s = \"a -- b\"   -- a comment\n" +
				"    limit 1   -- → 1\n" +
				"  -- a note\n" +
				"  get jobs   -- just a comment\n" +
				"  ```\n" +
				"~~~~ fenecql\nget x   -- → 2\n~~~~\n",
			want: []Step{
				{Line: 10, Query: "set jobs {n: 2}\n  -- why\n  where s = \"a -- b\"   -- a comment\n  limit 1", Expect: val("1")},
				{Line: 15, Query: "get jobs   -- just a comment"},
				{Line: 18, Query: "get x", Expect: val("2")},
			},
		},
		{
			name: "params",
			md: "```fenecql\n" +
				"-- params: [\"w1\", 3, 1.5, null, [1], {\"a\": 9007199254740993}]\n" +
				"get jobs where owner = $1   -- → 1\n" +
				"get jobs\n" +
				"```\n",
			want: []Step{
				{Line: 3, Query: "get jobs where owner = $1", Expect: val("1"), Params: []any{
					"w1", json.Number("3"), json.Number("1.5"), nil, []any{json.Number("1")},
					map[string]any{"a": json.Number("9007199254740993")},
				}},
				{Line: 4, Query: "get jobs"},
			},
		},
		{
			name: "trailing semicolon kept",
			md:   "```fenecql\nget jobs;   -- → 1\n```\n",
			want: []Step{{Line: 2, Query: "get jobs;", Expect: val("1")}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := Extract("docs/x.md", []byte(tt.md))
			if err != nil {
				t.Fatal(err)
			}
			if p.Page != "x" || p.Source != "docs/x.md" {
				t.Errorf("page %q source %q", p.Page, p.Source)
			}
			if !reflect.DeepEqual(p.Steps, tt.want) {
				got, _ := json.MarshalIndent(p.Steps, "", " ")
				want, _ := json.MarshalIndent(tt.want, "", " ")
				t.Errorf("steps:\n%s\nwant:\n%s", got, want)
			}
		})
	}
}

func TestExtractErrors(t *testing.T) {
	tests := []struct {
		name, md, want string
	}{
		{"bad value", "```fenecql\nget a   -- → one\n```\n", "docs/x.md:2: cannot read expectation"},
		{"value then comma", "```fenecql\nget a   -- → 1, no\n```\n", "docs/x.md:2: cannot read expectation"},
		{"unclosed string", "```fenecql\nget a   -- → \"abc\n```\n", "docs/x.md:2: cannot read expectation"},
		{"word after number", "```fenecql\nget a   -- → 12abc\n```\n", "docs/x.md:2: cannot read expectation"},
		{"empty", "```fenecql\nget a   -- →\n```\n", "docs/x.md:2: empty expectation"},
		{"refused without status", "```fenecql\nget a   -- → refused\n```\n", "docs/x.md:2: cannot read expectation"},
		{"refused not an error", "```fenecql\nget a   -- → refused: 200\n```\n", "docs/x.md:2: expectation refused: 200"},
		{"no rows", "```fenecql\nget a   -- → no rows\n```\n", "docs/x.md:2: cannot read expectation"},
		{"own line", "```fenecql\nget a\n-- → 1\n```\n", "docs/x.md:3: expectation on a line of its own"},
		{"own indented line", "```fenecql\nget a\n  -- → 1\n```\n", "docs/x.md:3: expectation on a line of its own"},
		{"not last line", "```fenecql\nget a   -- → 1\n  where b\n```\n", "docs/x.md:2: expectation is not on the statement's last line"},
		{"orphan indent", "```fenecql\n  get a\n```\n", "docs/x.md:2: indented line continues no statement"},
		{"bad clock", "```fenecql\nget a\n-- 20 seconds later\n```\n", "docs/x.md:3: cannot read clock move"},
		{"zero clock", "```fenecql\nget a\n-- 0 s later\n```\n", "docs/x.md:3: clock move"},
		{"bad params", "```fenecql\n-- params: {\"a\": 1}\nget a\n```\n", "docs/x.md:2: cannot read params"},
		{"params twice", "```fenecql\n-- params: [1]\n-- params: [2]\nget a\n```\n", "docs/x.md:3: params given twice"},
		{"params then clock", "```fenecql\n-- params: [1]\n-- 1 s later\nget a\n```\n", "docs/x.md:2: params are followed by a clock move"},
		{"params at end", "```fenecql\nget a\n-- params: [1]\n```\n", "docs/x.md:3: params are followed by no statement"},
		{"two statements", "```fenecql\nget a; get b\n```\n", "docs/x.md:2: one statement a line"},
		{"unclosed", "text\n```fenecql\nget a\n", "docs/x.md:2: code block is never closed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Extract("docs/x.md", []byte(tt.md))
			if err == nil || !strings.HasPrefix(err.Error(), tt.want) {
				t.Fatalf("error %v, want prefix %q", err, tt.want)
			}
		})
	}
}

func TestCheck(t *testing.T) {
	tests := []struct {
		name   string
		exp    *Expect
		answer string
		status int
		ok     bool
	}{
		{"success", nil, `{"affected": 0}`, 200, true},
		{"success refused", nil, `{"error": "x", "code": "bad_request"}`, 400, false},
		{"affected", val("1"), `{"affected": 1}`, 200, true},
		{"affected wrong", val("2"), `{"affected": 1}`, 200, false},
		{"first value", val("3"), `[{"id": 3, "payload.to": "x"}, {"id": 4}]`, 200, true},
		{"first value is by column order", val(`"x"`), `[{"zeta": "x", "alpha": 1}]`, 200, true},
		{"first value wrong column", val("1"), `[{"zeta": "x", "alpha": 1}]`, 200, false},
		{"int equals float", val("1"), `[{"a": 1.0}]`, 200, true},
		{"float equals int", val("5"), `[{"a": 5e0}]`, 200, true},
		{"big ints exact", val("9007199254740993"), `[{"a": 9007199254740992}]`, 200, false},
		{"number is not string", val("1"), `[{"a": "1"}]`, 200, false},
		{"string", val(`"2026-05-03T09:20:00.000Z"`), `[{"t": "2026-05-03T09:20:00.000Z"}]`, 200, true},
		{"null", val("null"), `[{"a": null}]`, 200, true},
		{"null is not false", val("null"), `[{"a": false}]`, 200, false},
		{"bool", val("true"), `[{"a": true}]`, 200, true},
		{"count", val("3"), `[{"count": 3}]`, 200, true},
		{"value but no row", val("1"), `[]`, 200, false},
		{"value but refused", val("1"), `{"error": "x"}`, 412, false},
		{"no row", &Expect{NoRow: true}, `[]`, 200, true},
		{"no row but rows", &Expect{NoRow: true}, `[{"id": 1}]`, 200, false},
		{"no row but affected", &Expect{NoRow: true}, `{"affected": 0}`, 200, false},
		{"refused", &Expect{Refused: 412}, `{"error": "x", "code": "unmet"}`, 412, true},
		{"refused other status", &Expect{Refused: 412}, `{"error": "x"}`, 409, false},
		{"refused but ok", &Expect{Refused: 404}, `[]`, 200, false},
		{"two kinds", &Expect{NoRow: true, Refused: 400}, `[]`, 200, false},
		{"not json", val("1"), `nope`, 200, false},
		{"object without affected", val("1"), `{"rows": 1}`, 200, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := Check(tt.exp, json.RawMessage(tt.answer), tt.status)
			if (err == nil) != tt.ok {
				t.Fatalf("Check(%v, %s, %d) = %v, want ok %v", tt.exp, tt.answer, tt.status, err, tt.ok)
			}
		})
	}
}

type fakeRunner struct {
	clock   int64
	answers map[string]string // query → answer; status 200
	log     []string
}

func (f *fakeRunner) Query(q string, params []any) (json.RawMessage, int, error) {
	f.log = append(f.log, q)
	a, ok := f.answers[q]
	if !ok {
		return json.RawMessage(`{"error": "no", "code": "bad_request"}`), 400, nil
	}
	return json.RawMessage(a), 200, nil
}

func (f *fakeRunner) Advance(ms int64) error { f.clock += ms; return nil }

func TestReplay(t *testing.T) {
	p, err := Extract("docs/r.md", []byte("```fenecql\nput a {}   -- → 1\n-- 2 s later\nget a   -- → 1\nget b   -- → refused: 400\n```\n"))
	if err != nil {
		t.Fatal(err)
	}
	r := &fakeRunner{clock: ClockStartMS, answers: map[string]string{"put a {}": `{"affected": 1}`, "get a": `[{"id": 1}]`}}
	if err := p.Replay(r); err != nil {
		t.Fatal(err)
	}
	if r.clock != ClockStartMS+2000 || len(r.log) != 3 {
		t.Fatalf("clock %d, log %v", r.clock, r.log)
	}
	r.answers["get a"] = `[{"id": 2}]`
	err = p.Replay(r)
	if err == nil || !strings.HasPrefix(err.Error(), "docs/r.md:4: get a: want 1, got 2") {
		t.Fatalf("error %v", err)
	}
}

// TestCasesRoundTrip checks that the JSON form keeps every expectation
// exactly, null included.
func TestCasesRoundTrip(t *testing.T) {
	p := Page{Page: "x", Source: "docs/x.md", Steps: []Step{
		{Line: 1, Query: "a", Expect: val("null")},
		{Line: 2, Query: "b", Expect: val("1.0")},
		{Line: 3, AdvanceMS: 5},
		{Line: 4, Query: "c", Params: []any{json.Number("12345678901234567890")}, Expect: &Expect{NoRow: true}},
		{Line: 5, Query: "d <= e", Expect: &Expect{Refused: 409}},
	}}
	b, err := Encode(p)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(b, []byte(`"value": null`)) || !bytes.Contains(b, []byte(`"d <= e"`)) || !bytes.Contains(b, []byte(`12345678901234567890`)) {
		t.Fatalf("encoded:\n%s", b)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "x.json"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := ReadCases(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || !reflect.DeepEqual(got[0], p) {
		t.Fatalf("read back %+v", got)
	}
}

// TestCasesUpToDate fails when cases/ is not what the docs make: run
// `make generate` (go generate in this module).
func TestCasesUpToDate(t *testing.T) {
	files, err := CaseFiles("../docs")
	if errors.Is(err, os.ErrNotExist) {
		t.Skip("no ../docs")
	}
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatal("the docs hold no fenecql block")
	}
	have, _ := filepath.Glob("cases/*.json")
	if len(have) != len(files) {
		t.Errorf("cases/ holds %d files, the docs make %d: run make generate", len(have), len(files))
	}
	for name, want := range files {
		got, err := os.ReadFile(filepath.Join("cases", name))
		if err != nil || !bytes.Equal(got, want) {
			t.Errorf("cases/%s is stale: run make generate", name)
		}
	}
	pages, err := ReadCases("cases")
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pages {
		for _, s := range p.Steps {
			if s.IsClock() == (s.Query != "") {
				t.Errorf("%s:%d: a step is a query or a clock move", p.Source, s.Line)
			}
		}
	}
}

// TestQueuesPage holds the queue page to the seed's statements: the count of
// statements and checks, and the claims it must keep.
func TestQueuesPage(t *testing.T) {
	b, err := os.ReadFile("../docs/queues.md")
	if errors.Is(err, os.ErrNotExist) {
		t.Skip("no ../docs/queues.md")
	}
	p, err := Extract("docs/queues.md", b)
	if err != nil {
		t.Fatal(err)
	}
	var stmts, checks, clocks int
	all := ""
	for _, s := range p.Steps {
		if s.IsClock() {
			clocks++
			continue
		}
		stmts++
		if s.Expect != nil {
			checks++
		}
		all += s.Query + "\n"
	}
	if stmts < 22 || checks < 16 || clocks != 3 {
		t.Errorf("%d statements, %d checks, %d clock moves", stmts, checks, clocks)
	}
	for _, must := range []string{
		"del tasks where run_at <= now() order priority desc limit 10 returning id, payload",
		"order distance(pickup, [29.0290, 41.0490]) limit 1 returning id",
		"order priority desc limit 1 returning payload.n",
	} {
		if !strings.Contains(all, must) {
			t.Errorf("queues.md lacks %q", must)
		}
	}
}
