package fenecql

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"time"
)

func testObj(kv ...any) Value {
	o := &Object{}
	for i := 0; i < len(kv); i += 2 {
		o.Keys = append(o.Keys, kv[i].(string))
		o.Vals = append(o.Vals, kv[i+1].(Value))
	}
	return ObjectOf(o)
}

func testList(vs ...Value) Value { return List(vs) }

// may3 is 2026-05-03T09:20:00Z, the instant the examples use.
const may3 = int64(1777800000000)

func TestParseJSONRoundTrip(t *testing.T) {
	tests := []struct{ in, out string }{
		{`null`, `null`},
		{` true `, `true`},
		{`false`, `false`},
		{`0`, `0`},
		{`-0`, `0`},
		{`-12`, `-12`},
		{`9223372036854775807`, `9223372036854775807`},
		{`-9223372036854775808`, `-9223372036854775808`},
		{`9223372036854775808`, `9223372036854776000.0`}, // past int64: a float
		{`1.0`, `1.0`},
		{`1.5`, `1.5`},
		{`-0.0`, `-0.0`},
		{`1e3`, `1000.0`},
		{`1E+3`, `1000.0`},
		{`2.5e-7`, `2.5e-7`},
		{`1e21`, `1e+21`},
		{`0e-400`, `0.0`}, // zero, however written
		{`""`, `""`},
		{`"plain"`, `"plain"`},
		{`"\u00e9\ud83d\ude00\n\t\"\\\/\b\f\r"`, `"é😀\n\t\"\\/\b\f\r"`},
		{`"<&>"`, `"<&>"`}, // no HTML escaping
		{`[]`, `[]`},
		{`{}`, `{}`},
		{`[1, [2, [3]], {"a": []}]`, `[1,[2,[3]],{"a":[]}]`},
		{`{"b": 1, "a": [1, 2.5, 3.0, "x"], "c": null}`, `{"b":1,"a":[1,2.5,3.0,"x"],"c":null}`},
		{`{"a": 1, "b": 2, "a": 3}`, `{"a":3,"b":2}`}, // last wins, first's place
	}
	// Many keys switch duplicate detection to a map; the rule must hold.
	var many, manyOut strings.Builder
	many.WriteString("{")
	manyOut.WriteString("{")
	for i := range 40 {
		k := fmt.Sprint("k", i)
		many.WriteString(`"` + k + `":1,`)
		if i > 0 {
			manyOut.WriteString(",")
		}
		v := "1"
		if i == 3 || i == 30 {
			v = "2"
		}
		manyOut.WriteString(`"` + k + `":` + v)
	}
	many.WriteString(`"k3":2,"k30":2}`)
	manyOut.WriteString("}")
	tests = append(tests, struct{ in, out string }{many.String(), manyOut.String()})

	for _, tt := range tests {
		v, err := ParseJSON([]byte(tt.in))
		if err != nil {
			t.Errorf("ParseJSON(%s): %v", tt.in, err)
			continue
		}
		if got := string(AppendJSON(nil, v)); got != tt.out {
			t.Errorf("ParseJSON(%s) wrote %s, want %s", tt.in, got, tt.out)
		}
		// What we write must read back as the same value.
		back, err := ParseJSON([]byte(tt.out))
		if err != nil || !Equal(back, v) || back.Kind() != v.Kind() {
			t.Errorf("%s does not read back: %v, %v", tt.out, back, err)
		}
	}
}

func TestParseJSONKinds(t *testing.T) {
	tests := []struct {
		in   string
		want Kind
	}{
		{`1`, KindInt}, {`1.0`, KindFloat}, {`1e2`, KindFloat}, {`-5`, KindInt},
		{`99999999999999999999`, KindFloat}, {`"x"`, KindText}, {`[1]`, KindList}, {`{}`, KindObject},
	}
	for _, tt := range tests {
		v, err := ParseJSON([]byte(tt.in))
		if err != nil || v.Kind() != tt.want {
			t.Errorf("ParseJSON(%s) = %v %v, want kind %s", tt.in, v.Kind(), err, tt.want)
		}
	}
}

func TestParseJSONErrors(t *testing.T) {
	tests := []struct{ in, want string }{
		{``, "byte 1: expected a value, found the end"},
		{`   `, "byte 4: expected a value, found the end"},
		{`{`, "expected a key in quotes, found the end"},
		{`[1,]`, "byte 4: expected a value, found ']'"},
		{`[1 2]`, "expected , or ], found '2'"},
		{`{"a"}`, "expected : after the key, found '}'"},
		{`{"a":1,}`, "expected a key in quotes, found '}'"},
		{`{a:1}`, "expected a key in quotes, found 'a'"},
		{`{"a":1 "b":2}`, "expected , or }, found '\"'"},
		{`01`, "byte 2: unexpected '1' after the value"},
		{`1.`, "expected a digit after the decimal point"},
		{`1e`, "expected a digit in the exponent"},
		{`-`, "expected a digit, found the end"},
		{`.5`, "expected a value, found '.'"},
		{`1e400`, "byte 1: number 1e400 is out of range"},
		{`"abc`, "unterminated string"},
		{"\"a\x01\"", "control character '\\x01' in a string"},
		{`"\q"`, "invalid escape"},
		{`"\u12"`, "invalid escape"},
		{`"\ud800x"`, `byte 2: lone UTF-16 surrogate \ud800 in a string`},
		{`"\ud800\u0041"`, `byte 2: lone UTF-16 surrogate \ud800 in a string`},
		{`["ok", "\udc00"]`, `byte 9: lone UTF-16 surrogate \udc00 in a string`},
		{"\"\xff\"", "byte 2: a string is not valid UTF-8"},
		{"{\"a\": \"x\xe2\x82\"}", "byte 9: a string is not valid UTF-8"},
		{"{\"\xc3\": 1}", "a string is not valid UTF-8"},
		{`tru`, "expected a value, found 't'"},
		{`nulls`, "unexpected 's' after the value"},
		{`[1] x`, "byte 5: unexpected 'x' after the value"},
		{`NaN`, "expected a value, found 'N'"},
		{strings.Repeat("[", 10001), "nested deeper than 10000"},
	}
	for _, tt := range tests {
		_, err := ParseJSON([]byte(tt.in))
		var fe *Error
		if !errors.As(err, &fe) || fe.Code != CodeInvalid {
			t.Errorf("ParseJSON(%.20q) = %v, want a bad_request *Error", tt.in, err)
			continue
		}
		if !strings.HasPrefix(err.Error(), "invalid JSON at byte ") || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("ParseJSON(%.20q) error %q, want %q", tt.in, err, tt.want)
		}
	}
	// Deep but allowed nesting parses.
	deep := strings.Repeat("[", 10000) + strings.Repeat("]", 10000)
	if _, err := ParseJSON([]byte(deep)); err != nil {
		t.Errorf("10000 levels: %v", err)
	}
}

// Strings must be written exactly as encoding/json writes them (without
// HTML escaping), so clients decoding either see the same text.
func TestAppendJSONStringsMatchEncodingJSON(t *testing.T) {
	for _, s := range []string{
		"", "plain", "quote\" back\\slash", "\x00\x01\x1f\x7f", "\b\f\n\r\t",
		"é ü 日本 😀", "\u2028\u2029", "bad \xff\xfe utf8 \xe2\x82", "<script>&amp;</script>",
	} {
		var want bytes.Buffer
		enc := json.NewEncoder(&want)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(s); err != nil {
			t.Fatal(err)
		}
		if got := string(AppendJSON(nil, Text(s))); got != strings.TrimSuffix(want.String(), "\n") {
			t.Errorf("AppendJSON(%q) = %s, want %s", s, got, want.String())
		}
	}
}

func TestAppendJSON(t *testing.T) {
	tests := []struct {
		v    Value
		want string
	}{
		{Null, `null`},
		{Int(math.MinInt64), `-9223372036854775808`},
		{Float(3), `3.0`},
		{Float(-2), `-2.0`},
		{Float(0.1), `0.1`},
		{Float(1e20), `100000000000000000000.0`},
		{Float(1e21), `1e+21`},
		{Float(1e-7), `1e-7`},
		{Float(123456.789), `123456.789`},
		{Float(math.Inf(1)), `null`},
		{Time(may3), `"2026-05-03T09:20:00.000Z"`},
		{Time(may3 + 7), `"2026-05-03T09:20:00.007Z"`},
		{Time(-1), `"1969-12-31T23:59:59.999Z"`},
		{testList(Int(1), Float(1), Text("1"), Time(0)), `[1,1.0,"1","1970-01-01T00:00:00.000Z"]`},
		{testObj("z", Int(1), "a", testObj("y", Null, "b", Bool(true))), `{"z":1,"a":{"y":null,"b":true}}`},
		{List(nil), `[]`},
		{ObjectOf(&Object{}), `{}`},
	}
	for _, tt := range tests {
		if got := string(AppendJSON([]byte("x"), tt.v)); got != "x"+tt.want {
			t.Errorf("AppendJSON(%s) = %s, want x%s", tt.want, got, tt.want)
		}
	}
	// MarshalJSON lets encoding/json embed values as they are.
	b, err := json.Marshal(map[string]Value{"row": testObj("b", Int(1), "a", Float(2), "t", Time(may3))})
	if err != nil || string(b) != `{"row":{"b":1,"a":2.0,"t":"2026-05-03T09:20:00.000Z"}}` {
		t.Errorf("json.Marshal = %s, %v", b, err)
	}
}

// Non-integral floats are written in encoding/json's shortest form.
func TestAppendJSONFloatsMatchEncodingJSON(t *testing.T) {
	for _, f := range []float64{0.1, -2.5, 1e-6, 1.5e-6, 9.99e-7, 1.5e20, 1.5e300, -1.5e-300, math.SmallestNonzeroFloat64, math.MaxFloat64, 1 / 3.0} {
		want, _ := json.Marshal(f)
		if got := AppendJSON(nil, Float(f)); string(got) != string(want) && string(got) != string(want)+".0" {
			t.Errorf("AppendJSON(%v) = %s, want %s", f, got, want)
		}
	}
}

func TestFromGo(t *testing.T) {
	dec := json.NewDecoder(strings.NewReader(`{"b": 1, "a": [1.5, "x", true, null, 12345678901234567890], "c": {"z": 1, "y": 2}}`))
	dec.UseNumber()
	var x any
	if err := dec.Decode(&x); err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 5, 3, 9, 20, 0, 0, time.FixedZone("x", 7200))
	tests := []struct {
		in   any
		want string
	}{
		{x, `{"a":[1.5,"x",true,null,12345678901234567000.0],"b":1,"c":{"y":2,"z":1}}`},
		{json.Number("7"), `7`},
		{json.Number("7.0"), `7.0`},
		{3, `3`},
		{int64(-4), `-4`},
		{2.0, `2.0`},
		{at, `"2026-05-03T07:20:00.000Z"`},
		{nil, `null`},
		{Int(9), `9`},
	}
	for _, tt := range tests {
		v, err := FromGo(tt.in)
		if err != nil {
			t.Errorf("FromGo(%v): %v", tt.in, err)
			continue
		}
		if got := string(AppendJSON(nil, v)); got != tt.want {
			t.Errorf("FromGo(%v) = %s, want %s", tt.in, got, tt.want)
		}
	}
	for _, bad := range []any{math.NaN(), math.Inf(-1), json.Number("abc"), json.Number("1e999"), struct{}{}, []any{uint8(1)}, map[string]any{"a": int32(1)}} {
		if v, err := FromGo(bad); err == nil {
			t.Errorf("FromGo(%#v) = %v, want an error", bad, v)
		}
	}
}

func TestParseTime(t *testing.T) {
	tests := []struct {
		in   string
		want int64
	}{
		{"2026-05-03T09:20:00Z", may3},
		{"2026-05-03T09:20:00.000Z", may3},
		{"2026-05-03T09:20:00.5Z", may3 + 500},
		{"2026-05-03T09:20:00.1239Z", may3 + 123}, // sub-may3 digits dropped
		{"2026-05-03T11:20:00+02:00", may3},
		{"2026-05-03T08:50:00.250-00:30", may3 + 250},
		{"2026-05-03T09:20:00", may3},
		{"2026-05-03T09:20:00.042", may3 + 42},
		{"2026-05-03", may3 - (9*60+20)*60000},
		{"1970-01-01T00:00:00Z", 0},
		{"1969-12-31T23:59:59.9995Z", -1}, // rounds toward the past
		{"0001-01-01", -62135596800000},
	}
	for _, tt := range tests {
		got, err := ParseTime(tt.in)
		if err != nil || got != tt.want {
			t.Errorf("ParseTime(%q) = %d, %v, want %d", tt.in, got, err, tt.want)
		}
	}
	for _, bad := range []string{"", "yesterday", "2026-13-01", "2026-05-03T25:00:00Z", "2026-05-03 09:20:00", "20260503", "1777800000000"} {
		if got, err := ParseTime(bad); err == nil {
			t.Errorf("ParseTime(%q) = %d, want an error", bad, got)
		} else if !strings.Contains(err.Error(), "expected ISO-8601") {
			t.Errorf("ParseTime(%q) error %q does not say what is expected", bad, err)
		}
	}
	for _, m := range []int64{0, -1, may3, may3 + 999, 253402300799999} {
		if back, err := ParseTime(FormatTime(m)); err != nil || back != m {
			t.Errorf("FormatTime(%d) = %s reads back as %d, %v", m, FormatTime(m), back, err)
		}
	}
}

// TestNumberUnderflow: a number too small for a float is refused, not
// read as the 0 the client did not write.
func TestNumberUnderflow(t *testing.T) {
	for _, in := range []string{`1e-400`, `-1e-400`, `0.000e-999999`, `[1e-400]`} {
		_, err := ParseJSON([]byte(in))
		if (in == `0.000e-999999`) != (err == nil) {
			t.Errorf("ParseJSON(%s): %v", in, err)
		}
	}
}

func TestCoerce(t *testing.T) {
	tests := []struct {
		v       Value
		typ     Type
		want    string // JSON of the result; empty when an error is expected
		wantErr string
	}{
		{Null, TypeInt, `null`, ""},
		{Null, TypeGeo, `null`, ""},
		{Int(5), TypeInt, `5`, ""},
		{Float(5), TypeInt, `5`, ""},
		{Float(1e3), TypeInt, `1000`, ""},
		{Float(1<<53 - 1), TypeInt, `9007199254740991`, ""},
		{Float(-(1<<53 - 1)), TypeInt, `-9007199254740991`, ""},
		// From 2^53 a whole float may be a rounded integer: -2^63-1 reads
		// as the float -2^63, and is not stored as -2^63.
		{Float(1 << 53), TypeInt, "", "int expected, found float 9007199254740992.0: from 2^53"},
		{Float(-9223372036854775808), TypeInt, "", "int expected, found float -9223372036854776000.0: from 2^53"},
		{Float(9223372036854775808), TypeInt, "", "int expected, found float 9223372036854776000.0"},
		{Float(5.5), TypeInt, "", "int expected, found float 5.5"},
		{Text("x"), TypeInt, "", `int expected, found text "x"`},
		{Text("5"), TypeInt, "", `int expected, found text "5"`},
		{Bool(true), TypeInt, "", "int expected, found bool true"},
		{Time(may3), TypeInt, "", `int expected, found timestamp "2026-05-03T09:20:00.000Z"`},
		{Int(5), TypeFloat, `5.0`, ""},
		{Float(0.5), TypeFloat, `0.5`, ""},
		{Text("0.5"), TypeFloat, "", `float expected, found text "0.5"`},
		{Text("a"), TypeText, `"a"`, ""},
		{Int(1), TypeText, "", "text expected, found int 1"},
		{Text(strings.Repeat("long ", 20)), TypeBool, "", `bool expected, found text "long long long long long long long long…`},
		{Bool(false), TypeBool, `false`, ""},
		{Int(1), TypeBool, "", "bool expected, found int 1"},
		{Time(may3), TypeTimestamp, `"2026-05-03T09:20:00.000Z"`, ""},
		{Int(may3), TypeTimestamp, `"2026-05-03T09:20:00.000Z"`, ""},
		{Text("2026-05-03T11:20:00+02:00"), TypeTimestamp, `"2026-05-03T09:20:00.000Z"`, ""},
		{Text("2026-05-03"), TypeTimestamp, `"2026-05-03T00:00:00.000Z"`, ""},
		{Text("soon"), TypeTimestamp, "", `timestamp expected as epoch milliseconds or ISO-8601 text (2026-05-03T09:20:00Z), found text "soon"`},
		{Float(1.5), TypeTimestamp, "", "timestamp expected, found float 1.5"},
		{testObj("b", Int(1), "a", testList(Time(may3), Float(2))), TypeJSON, `{"b":1,"a":["2026-05-03T09:20:00.000Z",2.0]}`, ""},
		{Time(0), TypeJSON, `"1970-01-01T00:00:00.000Z"`, ""},
		{Int(3), TypeJSON, `3`, ""},
		{testList(Int(29), Float(41.04)), TypeGeo, `[29.0,41.04]`, ""},
		{testList(Int(-180), Int(-90)), TypeGeo, `[-180.0,-90.0]`, ""},
		{testList(Int(180), Int(90)), TypeGeo, `[180.0,90.0]`, ""},
		{testList(Int(200), Int(0)), TypeGeo, "", "geo point expected as [lon, lat] with lon in -180..180 and lat in -90..90, found [200, 0]"},
		{testList(Int(0), Float(90.5)), TypeGeo, "", "found [0, 90.5]"},
		{testList(Int(0)), TypeGeo, "", "found [0]"},
		{testList(Int(0), Int(0), Int(0)), TypeGeo, "", "found [0, 0, 0]"},
		{testList(Text("0"), Int(0)), TypeGeo, "", `found ["0", 0]`},
		{testObj("lon", Int(0), "lat", Int(0)), TypeGeo, "", `found {"lon": 0, "lat": 0}`},
	}
	for _, tt := range tests {
		got, err := Coerce(tt.v, tt.typ)
		if tt.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("Coerce(%s, %s) = %s, %v, want error %q", AppendJSON(nil, tt.v), tt.typ, AppendJSON(nil, got), err, tt.wantErr)
			}
			continue
		}
		if err != nil || string(AppendJSON(nil, got)) != tt.want {
			t.Errorf("Coerce(%s, %s) = %s, %v, want %s", AppendJSON(nil, tt.v), tt.typ, AppendJSON(nil, got), err, tt.want)
		}
	}
	// Coercing to timestamp makes a time, not an int that looks like one.
	if v, _ := Coerce(Int(may3), TypeTimestamp); v.Kind() != KindTime {
		t.Errorf("Coerce(int, timestamp) kind %s", v.Kind())
	}
	// json coercion copies nothing it does not change.
	in := testList(testObj("a", Int(1)))
	if v, _ := Coerce(in, TypeJSON); &v.List()[0] != &in.List()[0] {
		t.Error("Coerce(json) copied a list without timestamps")
	}
}

// FuzzParseJSON holds the hand-written parser to encoding/json: it takes
// exactly the valid documents (less numbers too big for a float), and
// what it writes back decodes to what the input decodes to.
func FuzzParseJSON(f *testing.F) {
	for _, s := range []string{`{"b": 1, "a": [1, 2.5, -0, 1e3, "x\u00e9\n"], "c": {"d": null, "d": true}}`, `"\ud83d\ude00\ud800"`, "\"\xff\"", `[[[]]]`, `1e400`, `01`, `{"a":1,}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		v, err := ParseJSON(data)
		if err != nil {
			// encoding/json reads invalid UTF-8 and lone surrogates as
			// U+FFFD; ParseJSON refuses them.
			if json.Valid(data) && !strings.Contains(err.Error(), "out of range") && !strings.Contains(err.Error(), "not valid UTF-8") && !strings.Contains(err.Error(), "lone UTF-16 surrogate") {
				t.Fatalf("ParseJSON(%q) refused valid JSON: %v", data, err)
			}
			return
		}
		if !json.Valid(data) {
			t.Fatalf("ParseJSON(%q) took invalid JSON", data)
		}
		out := AppendJSON(nil, v)
		var want, got any
		if err := json.Unmarshal(data, &want); err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(out, &got); err != nil {
			t.Fatalf("wrote invalid JSON %s: %v", out, err)
		}
		if !reflect.DeepEqual(want, got) {
			t.Fatalf("ParseJSON(%q) wrote %s", data, out)
		}
	})
}

// Request bodies: what JSON allows but may mean two things is refused;
// what is not JSON at all is left to the decoder.
func TestCheckStrictJSON(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{`{"a": 1, "b": {"a": 2}}`, ""},
		{`{"a": "\ud83d\ude00 é"}`, ""},
		{`{"a": 1, `, ""}, // not JSON: the decoder's to say
		{`{"a": 1, "a": 2}`, `invalid JSON at byte 10: key "a" appears twice in one object`},
		{`[{"x": [{"k": 1, "k": 1}]}]`, `key "k" appears twice`},
		{"[\"a\xffb\"]", "a string is not valid UTF-8"},
		{`["\udc00"]`, `lone UTF-16 surrogate \udc00 in a string`},
		{`["\ud800x"]`, `lone UTF-16 surrogate \ud800 in a string`},
	} {
		err := CheckStrictJSON([]byte(c.in))
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s: %v", c.in, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%s: %v, want %q", c.in, err, c.want)
		}
	}
	// Many keys are checked in linear time, not by a scan per key.
	var b strings.Builder
	b.WriteString("{")
	for i := range 100000 {
		if i > 0 {
			b.WriteString(",")
		}
		fmt.Fprintf(&b, `"k%d": %d`, i, i)
	}
	b.WriteString(`, "k5": 0}`)
	start := time.Now()
	if err := CheckStrictJSON([]byte(b.String())); err == nil || !strings.Contains(err.Error(), `key "k5" appears twice`) {
		t.Errorf("100 000 keys: %v", err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("100 000 keys took %v", d)
	}
}

// TestAppendTimeIsTheLayout holds the written-out appendTime to what
// time's AppendFormat makes of timeLayout, across the years a timestamp
// may hold and either side of them.
func TestAppendTimeIsTheLayout(t *testing.T) {
	lo := time.Date(-2, 1, 1, 0, 0, 0, 0, time.UTC).UnixMilli()
	hi := time.Date(10001, 12, 31, 23, 59, 59, 999e6, time.UTC).UnixMilli()
	rng := rand.New(rand.NewPCG(1, 2))
	check := func(ms int64) {
		want := time.UnixMilli(ms).UTC().AppendFormat(nil, timeLayout)
		if got := appendTime([]byte("x"), ms); string(got) != "x"+string(want) {
			t.Fatalf("appendTime(%d) = %q, want %q", ms, got[1:], want)
		}
	}
	for _, ms := range []int64{0, -1, 1, 999, -999, -1000, 1777800000000, lo, hi,
		time.Date(0, 1, 1, 0, 0, 0, 0, time.UTC).UnixMilli(), time.Date(9999, 12, 31, 23, 59, 59, 999e6, time.UTC).UnixMilli()} {
		check(ms)
	}
	for range 200000 {
		check(lo + rng.Int64N(hi-lo))
	}
}

// TestJSONReader: the reader takes a key however it is written (escaped
// or not), says of a number a value cannot hold only what is wrong, and
// of anything else what and where.
func TestJSONReader(t *testing.T) {
	r := NewJSONReader([]byte(`{"qu\u0065ry": "get t", "plain": 1, "big": 1e999}`))
	if !r.Open('{') {
		t.Fatal("no object")
	}
	for i, want := range []string{"query", "plain"} {
		if more, ok := r.Next('}', i == 0); !more || !ok {
			t.Fatalf("key %d: more %v ok %v", i, more, ok)
		}
		k, ok := r.Key()
		if !ok || string(k) != want {
			t.Fatalf("key %d: %q %v, want %q", i, k, ok, want)
		}
		if _, err := r.Value(); err != nil {
			t.Fatalf("value %d: %v", i, err)
		}
	}
	r.Next('}', false)
	if k, ok := r.Key(); !ok || string(k) != "big" {
		t.Fatalf("key big: %q %v", k, ok)
	}
	if _, err := r.Value(); err == nil || err.Error() != "number 1e999 is out of range" {
		t.Fatalf("1e999: %v", err)
	}
	r = NewJSONReader([]byte(`[1, tru]`))
	r.Open('[')
	r.Next(']', true)
	r.Value()
	r.Next(']', false)
	if _, err := r.Value(); err == nil || !strings.Contains(err.Error(), "invalid JSON at byte 5") {
		t.Fatalf("tru: %v", err)
	}
	r = NewJSONReader([]byte("{\"a\x01\": 1}"))
	if !r.Open('{') {
		t.Fatal("no object")
	}
	if _, ok := r.Key(); ok {
		t.Fatal("a control character in a key: taken")
	}
}
