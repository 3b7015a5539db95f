package fenecql

import (
	"errors"
	"math"
	"strings"
	"testing"
)

// testRow is a Row over a map, for tests.
type testRow map[string]Value

func (r testRow) Field(name string) Value { return r[name] }

func testEnv() *Env {
	return &Env{
		Row: testRow{
			"id":      Int(7),
			"n":       Int(5),
			"zero":    Int(0),
			"big":     Int(math.MaxInt64),
			"small":   Int(math.MinInt64),
			"f":       Float(2.5),
			"s":       Text("Héllo"),
			"t":       Time(may3),
			"ok":      Bool(true),
			"payload": testObj("to", Text("ada@example.com"), "tags", testList(Text("a"), Text("b")), "n", Int(3), "deep", testObj("x", Int(1))),
			"pickup":  testList(Float(29.0100), Float(41.0400)),
			"new":     Text("a field named new"),
		},
		New:    testRow{"n": Int(6), "owner": Text("w1")},
		Params: []Value{Text("w1"), Int(30000), testList(Int(1), Int(5)), Null, Float(1e308)},
		Now:    may3,
		Claims: map[string]Value{"sub": Text("w1"), "queue": Text("mail")},
	}
}

type evalTest struct {
	src     string
	want    Value
	wantErr string // a part of the error; the value is ignored when set
}

func runEval(t *testing.T, env *Env, tests []evalTest) {
	t.Helper()
	for _, tt := range tests {
		e, err := ParseExpr(tt.src)
		if err != nil {
			t.Errorf("ParseExpr(%s): %v", tt.src, err)
			continue
		}
		got, err := Eval(e, env)
		if tt.wantErr != "" {
			var fe *Error
			switch {
			case err == nil:
				t.Errorf("%s = %s, want error %q", tt.src, kindJSON(got), tt.wantErr)
			case !errors.As(err, &fe) || fe.Code != CodeInvalid || fe.Pos < 1:
				t.Errorf("%s: error %#v is not a placed bad_request *Error", tt.src, err)
			case !strings.Contains(fe.Msg, tt.wantErr):
				t.Errorf("%s: error %q, want %q", tt.src, fe.Msg, tt.wantErr)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", tt.src, err)
		} else if got.Kind() != tt.want.Kind() || !Equal(got, tt.want) {
			t.Errorf("%s = %s, want %s", tt.src, kindJSON(got), kindJSON(tt.want))
		}
	}
}

// kindJSON renders a value with its kind, since JSON alone does not tell a
// timestamp from text.
func kindJSON(v Value) string { return v.Kind().String() + " " + string(AppendJSON(nil, v)) }

func TestEvalRefsParamsClaims(t *testing.T) {
	runEval(t, testEnv(), []evalTest{
		{src: `n`, want: Int(5)},
		{src: `id`, want: Int(7)},
		{src: `missing`, want: Null},
		{src: `payload.to`, want: Text("ada@example.com")},
		{src: `payload.deep.x`, want: Int(1)},
		{src: `payload.nope`, want: Null},
		{src: `payload.to.x`, want: Null},
		{src: `n.x`, want: Null},
		{src: `missing.x`, want: Null},
		{src: `new.n`, want: Int(6)},
		{src: `new.owner`, want: Text("w1")},
		{src: `new.missing`, want: Null},
		{src: `new`, want: Text("a field named new")},
		{src: `new.owner = $jwt.sub and new.n = n + 1`, want: Bool(true)},
		{src: `$1`, want: Text("w1")},
		{src: `$3`, want: testList(Int(1), Int(5))},
		{src: `$4`, want: Null},
		{src: `$6`, wantErr: "$6 given no value (5 parameters)"},
		{src: `$jwt.sub`, want: Text("w1")},
		{src: `$jwt.nope`, want: Null},
		{src: `[1, "a", null, [true], n]`, want: testList(Int(1), Text("a"), Null, testList(Bool(true)), Int(5))},
		{src: `{b: 1, a: n, "c d": [s]}`, want: testObj("b", Int(1), "a", Int(5), "c d", testList(Text("Héllo")))},
		{src: `{}`, want: testObj()},
	})
	// Without a row, or without a new row, every field reads null.
	runEval(t, &Env{Params: []Value{Int(1)}}, []evalTest{
		{src: `n`, want: Null},
		{src: `new.n`, want: Null},
		{src: `n + $1`, want: Null},
		{src: `$jwt.sub`, want: Null},
		{src: `$2`, wantErr: "$2 given no value (1 parameters)"},
	})
	// A nil env is an empty one.
	if v, err := Eval(&Ref{Pos: 1, Path: []string{"n"}}, nil); err != nil || !v.IsNull() {
		t.Errorf("Eval with nil env = %v, %v", v, err)
	}
}

func TestEvalArithmetic(t *testing.T) {
	runEval(t, testEnv(), []evalTest{
		{src: `n + 1`, want: Int(6)},
		{src: `n - 7`, want: Int(-2)},
		{src: `n * 3`, want: Int(15)},
		{src: `7 / 2`, want: Int(3)},
		{src: `-7 / 2`, want: Int(-3)},
		{src: `7 / -2`, want: Int(-3)},
		{src: `7 % 3`, want: Int(1)},
		{src: `-7 % 3`, want: Int(-1)},
		{src: `2 + 3 * 4 - 6 / 2`, want: Int(11)},
		{src: `-n`, want: Int(-5)},
		{src: `- -n`, want: Int(5)},
		{src: `n + f`, want: Float(7.5)},
		{src: `f * 2`, want: Float(5)},
		{src: `1 / 2.0`, want: Float(0.5)},
		{src: `n / 2.0`, want: Float(2.5)},
		{src: `7.5 % 2`, want: Float(1.5)},
		{src: `-f`, want: Float(-2.5)},
		{src: `0.1 + 0.2 > 0.3`, want: Bool(true)},
		{src: `-9223372036854775808`, want: Int(math.MinInt64)},
		{src: `small % -1`, want: Int(0)},
		{src: `big + 1`, wantErr: "integer overflow: 9223372036854775807 + 1"},
		{src: `small - 1`, wantErr: "integer overflow: -9223372036854775808 - 1"},
		{src: `big * 2`, wantErr: "integer overflow: 9223372036854775807 * 2"},
		{src: `small * -1`, wantErr: "integer overflow: -9223372036854775808 * -1"},
		{src: `-1 * small`, wantErr: "integer overflow: -1 * -9223372036854775808"},
		{src: `small / -1`, wantErr: "integer overflow: -9223372036854775808 / -1"},
		{src: `-small`, wantErr: "integer overflow: -(-9223372036854775808)"},
		{src: `big + small`, want: Int(-1)},
		{src: `big * 1`, want: Int(math.MaxInt64)},
		{src: `n / 0`, wantErr: "division by zero"},
		{src: `n % zero`, wantErr: "modulo by zero"},
		{src: `f / 0`, wantErr: "division by zero"},
		{src: `f / 0.0`, wantErr: "division by zero"},
		{src: `f % 0`, wantErr: "modulo by zero"},
		{src: `$5 * 10`, wantErr: "float overflow: 1e+308 * 10.0"},
		{src: `-$5 - $5`, wantErr: "float overflow"},
		{src: `n + null`, want: Null},
		{src: `null * 2`, want: Null},
		{src: `missing - 1`, want: Null},
		{src: `missing / 0`, want: Null},
		{src: `-null`, want: Null},
		{src: `-missing`, want: Null},
		{src: `s + 1`, wantErr: "cannot add text and int"},
		{src: `s + s`, wantErr: "cannot add text and text"},
		{src: `1 - s`, wantErr: "cannot subtract text from int"},
		{src: `ok * 2`, wantErr: "cannot multiply bool by int"},
		{src: `s / 2`, wantErr: "cannot divide text by int"},
		{src: `s % 2`, wantErr: "cannot take text modulo int"},
		{src: `payload + 1`, wantErr: "cannot add object and int"},
		{src: `[1] + [2]`, wantErr: "cannot add list and list"},
		{src: `-s`, wantErr: "cannot negate text"},
		{src: `-ok`, wantErr: "cannot negate bool"},
	})
}

func TestEvalTimestamps(t *testing.T) {
	runEval(t, testEnv(), []evalTest{
		{src: `t + 1000`, want: Time(may3 + 1000)},
		{src: `1000 + t`, want: Time(may3 + 1000)},
		{src: `t - 1000`, want: Time(may3 - 1000)},
		{src: `t - t`, want: Int(0)},
		{src: `now() - (t - 5)`, want: Int(5)},
		{src: `t - now() - 30000`, want: Int(-30000)},
		{src: `now() + 30000`, want: Time(may3 + 30000)},
		{src: `now() + 1000 * n * n`, want: Time(may3 + 25000)},
		{src: `t + null`, want: Null},
		{src: `t + f`, wantErr: "cannot add timestamp and float"},
		{src: `t * 2`, wantErr: "cannot multiply timestamp by int"},
		{src: `1000 - t`, wantErr: "cannot subtract timestamp from int"},
		{src: `t + t`, wantErr: "cannot add timestamp and timestamp"},
		{src: `t / 2`, wantErr: "cannot divide timestamp by int"},
		{src: `t + "1"`, wantErr: "cannot add timestamp and text"},
		{src: `-t`, wantErr: "cannot negate timestamp"},
		{src: `t + big`, wantErr: "integer overflow: 1777800000000 + 9223372036854775807"},
	})
}

func TestEvalComparisons(t *testing.T) {
	T, F := Bool(true), Bool(false)
	runEval(t, testEnv(), []evalTest{
		{src: `n = 5`, want: T},
		{src: `n != 5`, want: F},
		{src: `n < 6`, want: T},
		{src: `n <= 5`, want: T},
		{src: `n > 5`, want: F},
		{src: `n >= 5`, want: T},
		{src: `n = 5.0`, want: T},
		{src: `f > 2`, want: T},
		{src: `f < n`, want: T},
		{src: `big > 9223372036854775806`, want: T},
		{src: `t = 1777800000000`, want: T},
		{src: `t > 0`, want: T},
		{src: `t < now() + 1`, want: T},
		{src: `t <= now()`, want: T},
		{src: `t = "2026-05-03T09:20:00Z"`, want: T},
		{src: `t = "2026-05-03T11:20:00+02:00"`, want: T},
		{src: `t < "2026-05-03T09:20:00.001Z"`, want: T},
		{src: `"2026-05-03" < t`, want: T},
		{src: `t != "2026-05-03"`, want: T},
		{src: `t = "soon"`, wantErr: `cannot compare text "soon" with timestamp`},
		{src: `"soon" > t`, wantErr: `cannot compare text "soon" with timestamp`},
		{src: `s = "Héllo"`, want: T},
		{src: `"a" < "b"`, want: T},
		{src: `"B" < "a"`, want: T},
		{src: `"é" > "z"`, want: T},
		{src: `"ab" > "a"`, want: T},
		{src: `ok = true`, want: T},
		{src: `false < true`, want: T},
		{src: `ok != false`, want: T},
		{src: `s = 1`, want: F},
		{src: `s != 1`, want: T},
		{src: `ok = 1`, want: F},
		{src: `payload = 1`, want: F},
		{src: `"5" = 5`, want: F},
		{src: `t = true`, want: F},
		{src: `s < 1`, wantErr: "cannot compare text with int"},
		{src: `ok > 0`, wantErr: "cannot compare bool with int"},
		{src: `t >= ok`, wantErr: "cannot compare timestamp with bool"},
		{src: `[1] < 1`, wantErr: "cannot compare list with int"},
		{src: `[1, 2] = [1, 2]`, want: T},
		{src: `[1, 2] = [1, 2.0]`, want: T},
		{src: `[1, 2] != [2, 1]`, want: T},
		{src: `[1, [2]] = [1, [2, 3]]`, want: F},
		{src: `{a: 1, b: [2]} = {a: 1, b: [2]}`, want: T},
		{src: `payload.deep = {x: 1}`, want: T},
		{src: `payload = {to: "x"}`, want: F},
		{src: `[1] = {a: 1}`, want: F},
		{src: `[1] < [2]`, wantErr: "cannot order lists with <: only = and != compare them"},
		{src: `{a: 1} >= {a: 2}`, wantErr: "cannot order objects with >="},
		{src: `n = null`, want: Null},
		{src: `null = null`, want: Null},
		{src: `missing != 1`, want: Null},
		{src: `null < 1`, want: Null},
		{src: `s > missing`, want: Null},
		{src: `null < "soon"`, want: Null},
	})
}

func TestEvalLogic(t *testing.T) {
	T, F := Bool(true), Bool(false)
	runEval(t, testEnv(), []evalTest{
		{src: `true and true`, want: T},
		{src: `true and false`, want: F},
		{src: `false and true`, want: F},
		{src: `false and null`, want: F},
		{src: `null and false`, want: F},
		{src: `true and null`, want: Null},
		{src: `null and true`, want: Null},
		{src: `null and null`, want: Null},
		{src: `true or null`, want: T},
		{src: `null or true`, want: T},
		{src: `false or null`, want: Null},
		{src: `null or false`, want: Null},
		{src: `null or null`, want: Null},
		{src: `false or false`, want: F},
		{src: `false or true`, want: T},
		{src: `not true`, want: F},
		{src: `not false`, want: T},
		{src: `not null`, want: Null},
		{src: `not missing = 1`, want: Null},
		{src: `not n = 5`, want: F},
		{src: `n > 1 and n < 9 or false`, want: T},
		{src: `not n`, wantErr: "not takes bool, found int"},
		{src: `n and true`, wantErr: "and takes bool, found int"},
		{src: `true and n`, wantErr: "and takes bool, found int"},
		{src: `null and s`, wantErr: "and takes bool, found text"},
		{src: `false or s`, wantErr: "or takes bool, found text"},
		{src: `payload or true`, wantErr: "or takes bool, found object"},
		// The right side runs only when it decides the answer.
		{src: `false and 1 / 0 = 1`, want: F},
		{src: `zero != 0 and 10 / zero > 1`, want: F},
		{src: `true or 1 / 0 = 1`, want: T},
		{src: `true and 1 / 0 = 1`, wantErr: "division by zero"},
		{src: `n is null`, want: F},
		{src: `missing is null`, want: T},
		{src: `n is not null`, want: T},
		{src: `null is not null`, want: F},
		{src: `payload.nope is null`, want: T},
		{src: `n + null is null`, want: T},
		{src: `1 / 0 is null`, wantErr: "division by zero"},
	})
	for _, tt := range []struct {
		v    Value
		want bool
	}{{Bool(true), true}, {Bool(false), false}, {Null, false}, {Int(1), false}, {Text("true"), false}, {testList(Bool(true)), false}} {
		if Truthy(tt.v) != tt.want {
			t.Errorf("Truthy(%s) = %v", kindJSON(tt.v), !tt.want)
		}
	}
}

func TestEvalInAndCase(t *testing.T) {
	T, F := Bool(true), Bool(false)
	runEval(t, testEnv(), []evalTest{
		{src: `n in [1, 5]`, want: T},
		{src: `n in [1, 2]`, want: F},
		{src: `n not in [1, 2]`, want: T},
		{src: `n not in [5]`, want: F},
		{src: `n in $3`, want: T},
		{src: `n in []`, want: F},
		{src: `n not in []`, want: T},
		{src: `n in [null, 5]`, want: T},
		{src: `n in [null]`, want: Null},
		{src: `n in [null, 1]`, want: Null},
		{src: `n not in [null, 2]`, want: Null},
		{src: `5.0 in [5]`, want: T},
		{src: `"x" in [1, "x"]`, want: T},
		{src: `"5" in [5]`, want: F},
		{src: `[1] in [[1], 2]`, want: T},
		{src: `t in ["2026-05-03T09:20:00Z"]`, want: T},
		{src: `t in [0, now()]`, want: T},
		{src: `null in [1]`, want: Null},
		{src: `missing not in [1]`, want: Null},
		{src: `t in ["nope"]`, wantErr: `cannot compare text "nope" with timestamp`},
		{src: `n in $2`, wantErr: "in takes a list, found int"},
		{src: `n in $4`, wantErr: "in takes a list, found null"},
		{src: `null in $1`, wantErr: "in takes a list, found text"},
		{src: `case when n > 3 then "big" else "small" end`, want: Text("big")},
		{src: `case when n > 9 then "big" else "small" end`, want: Text("small")},
		{src: `case when n > 9 then 1 end`, want: Null},
		{src: `case when null then 1 else 2 end`, want: Int(2)},
		{src: `case when missing = 1 then 1 else 2 end`, want: Int(2)},
		{src: `case when false then 1 when true then 2 when true then 3 end`, want: Int(2)},
		{src: `case when true then 1 else 1 / 0 end`, want: Int(1)},
		{src: `case when n >= 5 then null else now() + 1000 * n * n end`, want: Null},
		{src: `case when n >= 9 then null else now() + 1000 * n * n end`, want: Time(may3 + 25000)},
		{src: `case when n then 1 end`, wantErr: "case when takes bool, found int"},
		{src: `case when 1 / 0 = 1 then 1 end`, wantErr: "division by zero"},
	})
}

func TestEvalFunctions(t *testing.T) {
	runEval(t, testEnv(), []evalTest{
		{src: `now()`, want: Time(may3)},
		{src: `NOW()`, want: Time(may3)},
		{src: `coalesce(missing, null, n, 1 / 0)`, want: Int(5)},
		{src: `coalesce(null, missing)`, want: Null},
		{src: `coalesce(n)`, want: Int(5)},
		{src: `coalesce(missing, 1 / 0)`, wantErr: "division by zero"},
		{src: `lower("ÀB")`, want: Text("àb")},
		{src: `upper(s)`, want: Text("HÉLLO")},
		{src: `upper(null)`, want: Null},
		{src: `lower(n)`, wantErr: "lower takes text, found int"},
		{src: `upper(t)`, wantErr: "upper takes text, found timestamp"},
		{src: `len(s)`, want: Int(5)},
		{src: `len("")`, want: Int(0)},
		{src: `len([1, 2, 3])`, want: Int(3)},
		{src: `len(payload)`, want: Int(4)},
		{src: `len(payload.tags)`, want: Int(2)},
		{src: `len(missing)`, want: Null},
		{src: `len(n)`, wantErr: "len takes text, list or object, found int"},
		{src: `abs(-3)`, want: Int(3)},
		{src: `abs(3)`, want: Int(3)},
		{src: `abs(-2.5)`, want: Float(2.5)},
		{src: `abs(null)`, want: Null},
		{src: `abs(small)`, wantErr: "integer overflow: abs(-9223372036854775808)"},
		{src: `abs(s)`, wantErr: "abs takes int or float, found text"},
		{src: `floor(2.7)`, want: Float(2)},
		{src: `floor(-2.5)`, want: Float(-3)},
		{src: `floor(n)`, want: Int(5)},
		{src: `floor(missing)`, want: Null},
		{src: `floor(s)`, wantErr: "floor takes int or float, found text"},
		{src: `bucket(t, 60000)`, want: Time(may3)},
		{src: `bucket(t + 59999, 60000)`, want: Time(may3)},
		{src: `bucket(t + 60000, 60000)`, want: Time(may3 + 60000)},
		{src: `bucket(now(), 3600000)`, want: Time(may3 - 20*60000)},
		{src: `bucket(125, 60)`, want: Int(120)},
		{src: `bucket(-1, 60)`, want: Int(-60)},
		{src: `bucket(-60, 60)`, want: Int(-60)},
		{src: `bucket(-61, 60)`, want: Int(-120)},
		{src: `bucket(small, 2)`, want: Int(math.MinInt64)},
		{src: `bucket(big, 1)`, want: Int(math.MaxInt64)},
		{src: `bucket(null, 5)`, want: Null},
		{src: `bucket(t, null)`, want: Null},
		{src: `bucket(small, 3)`, wantErr: "integer overflow: bucket(-9223372036854775808, 3)"},
		{src: `bucket(t, 0)`, wantErr: "bucket takes a positive int width in milliseconds, found int 0"},
		{src: `bucket(t, -5)`, wantErr: "found int -5"},
		{src: `bucket(t, 1.5)`, wantErr: "found float 1.5"},
		{src: `bucket(s, 5)`, wantErr: "bucket takes a timestamp or int first, found text"},
		{src: `bucket(2.5, 5)`, wantErr: "bucket takes a timestamp or int first, found float"},
	})
}

// haversineByAtan2 is the same great-circle distance by the atan2 form,
// written independently of the code under test.
func haversineByAtan2(lon1, lat1, lon2, lat2 float64) float64 {
	φ1, φ2 := lat1*math.Pi/180, lat2*math.Pi/180
	Δφ, Δλ := φ2-φ1, (lon2-lon1)*math.Pi/180
	a := math.Pow(math.Sin(Δφ/2), 2) + math.Cos(φ1)*math.Cos(φ2)*math.Pow(math.Sin(Δλ/2), 2)
	return 6372797.560856 * 2 * math.Atan2(math.Sqrt(a), math.Sqrt(1-a))
}

func TestEvalGeo(t *testing.T) {
	near := func(want float64) Value { return Float(want) }
	T, F := Bool(true), Bool(false)
	env := testEnv()
	runEval(t, env, []evalTest{
		{src: `distance(pickup, pickup)`, want: near(0)},
		{src: `distance(null, pickup)`, want: Null},
		{src: `distance(pickup, missing)`, want: Null},
		{src: `distance([200, 0], pickup)`, wantErr: "distance takes points [lon, lat] with lon in -180..180 and lat in -90..90, found [200, 0]"},
		{src: `distance(pickup, [0, 91])`, wantErr: "found [0, 91]"},
		{src: `distance("x", pickup)`, wantErr: `found "x"`},
		{src: `distance([1], pickup)`, wantErr: "found [1]"},
		{src: `distance(["1", 2], pickup)`, wantErr: `found ["1", 2]`},
		{src: `within([29.02, 41.045], [29, 41, 29.1, 41.1])`, want: T},
		{src: `within(pickup, [29.02, 41, 29.1, 41.1])`, want: F},
		{src: `within(pickup, [29.01, 41.04, 29.01, 41.04])`, want: T}, // edges are inside
		{src: `within([179.5, 0], [170, -10, -170, 10])`, want: T},     // across the antimeridian
		{src: `within([-175, 0], [170, -10, -170, 10])`, want: T},
		{src: `within([-170, 10], [170, -10, -170, 10])`, want: T},
		{src: `within([0, 0], [170, -10, -170, 10])`, want: F},
		{src: `within([175, 20], [170, -10, -170, 10])`, want: F},
		{src: `within(null, [0, 0, 1, 1])`, want: Null},
		{src: `within(pickup, null)`, want: Null},
		{src: `within(pickup, [0, 10, 1, 5])`, wantErr: "within takes a box [west, south, east, north] in degrees with south <= north, found [0, 10, 1, 5]"},
		{src: `within(pickup, [0, 0, 1])`, wantErr: "found [0, 0, 1]"},
		{src: `within(pickup, [0, 0, 181, 1])`, wantErr: "found [0, 0, 181, 1]"},
		{src: `within(pickup, [0, "0", 1, 1])`, wantErr: `found [0, "0", 1, 1]`},
		{src: `within([200, 0], [0, 0, 1, 1])`, wantErr: "within takes a point [lon, lat]"},
	})
	distances := []struct {
		src  string
		want float64
	}{
		{`distance(pickup, [29.0290, 41.0490])`, haversineByAtan2(29.0100, 41.0400, 29.0290, 41.0490)},
		{`distance([29.0300, 41.0500], [29.0290, 41.0490])`, haversineByAtan2(29.0300, 41.0500, 29.0290, 41.0490)},
		{`distance([0, 0], [0, 1])`, 6372797.560856 * math.Pi / 180}, // a degree of latitude
		{`distance([10, 45], [10, 46])`, 6372797.560856 * math.Pi / 180},
		{`distance([0, 0], [180, 0])`, 6372797.560856 * math.Pi}, // antipodes
		{`distance([179.9, 0], [-179.9, 0])`, 6372797.560856 * math.Pi / 180 * 0.2},
	}
	for _, d := range distances {
		e, err := ParseExpr(d.src)
		if err != nil {
			t.Fatal(err)
		}
		v, err := Eval(e, env)
		if err != nil || v.Kind() != KindFloat || math.Abs(v.Float()-d.want) > 1e-6 {
			t.Errorf("%s = %s, %v, want %.6f", d.src, kindJSON(v), err, d.want)
		}
	}
	// The rides example of the queue page: about 1.9 km, and ~111.2 km a
	// degree of latitude.
	if d := Haversine(29.0100, 41.0400, 29.0290, 41.0490); d < 1850 || d > 1900 {
		t.Errorf("rides example distance %.1f m", d)
	}
	if d := Haversine(0, 0, 0, 1); math.Round(d/100) != 1112 {
		t.Errorf("a degree of latitude is %.1f m", d)
	}
}

// Trees the parser would refuse still evaluate to errors, not panics.
func TestEvalHandBuilt(t *testing.T) {
	tests := []struct {
		e       Expr
		wantErr string
	}{
		{&Call{Pos: 3, Name: "nope"}, "position 3: unknown function nope"},
		{&Call{Pos: 3, Name: "lower"}, "position 3: lower takes 1 argument, given 0"},
		{&Call{Pos: 3, Name: "coalesce"}, "coalesce takes at least 1 arguments, given 0"},
		{&ObjectLit{Pos: 2, Keys: []string{"a", "a"}, Vals: []Expr{&Lit{Val: Int(1)}, &Lit{Val: Int(2)}}}, `position 2: duplicate key "a" in object`},
		{&Param{Pos: 4, N: 0}, "position 4: $0 given no value"},
		{&Binary{Pos: 1, Op: OpNot, L: &Lit{}, R: &Lit{}}, "unknown operator not"},
		{nil, "missing expression"},
	}
	for _, tt := range tests {
		_, err := Eval(tt.e, testEnv())
		if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
			t.Errorf("Eval(%#v) = %v, want %q", tt.e, err, tt.wantErr)
		}
	}
	// A Ref reads list indexes too (payload.tags.1).
	v, err := Eval(&Ref{Pos: 1, Path: []string{"payload", "tags", "1"}}, testEnv())
	if err != nil || v.Text() != "b" {
		t.Errorf("payload.tags.1 = %v, %v", v, err)
	}
}
