package fenecql

import (
	"fmt"
	"math"
	"strings"
	"unicode/utf8"
)

// EarthRadius is the sphere distance() measures on, in metres: the radius
// Redis's GEODIST uses, so distances agree with what users compare to.
const EarthRadius = 6372797.560856

// function is one built-in. Its arguments arrive evaluated and, unless
// lazy is set, with nulls already answered by null.
type function struct {
	min, max int // arity; max -1 for any number
	fn       func(c *Call, args []Value, env *Env) (Value, *Error)
}

// functions is the table of built-ins. coalesce has no fn: evalCall runs
// it itself, because it must not evaluate every argument.
var functions = map[string]function{
	"now":      {0, 0, fnNow},
	"coalesce": {1, -1, nil},
	"lower":    {1, 1, textFn(strings.ToLower)},
	"upper":    {1, 1, textFn(strings.ToUpper)},
	"len":      {1, 1, fnLen},
	"abs":      {1, 1, fnAbs},
	"floor":    {1, 1, fnFloor},
	"bucket":   {2, 2, fnBucket},
	"distance": {2, 2, fnDistance},
	"within":   {2, 2, fnWithin},
}

func evalCall(c *Call, env *Env) (Value, *Error) {
	f, ok := functions[c.Name]
	if !ok {
		return Null, Errorf(c.Pos, "unknown function %s", c.Name)
	}
	// The parser checks arity; checking again keeps a hand-built tree from
	// indexing past its arguments.
	if len(c.Args) < f.min || (f.max >= 0 && len(c.Args) > f.max) {
		return Null, Errorf(c.Pos, "%s takes %s, given %d", c.Name, arity(f), len(c.Args))
	}
	if c.Name == "coalesce" {
		// Lazy, as in SQL: later arguments are not evaluated once one is
		// not null, so coalesce(x, 1 / 0) is fine when x is set.
		for _, a := range c.Args {
			v, err := eval(a, env)
			if err != nil || !v.IsNull() {
				return v, err
			}
		}
		return Null, nil
	}
	args := make([]Value, len(c.Args))
	null := false
	for i, a := range c.Args {
		v, err := eval(a, env)
		if err != nil {
			return Null, err
		}
		args[i] = v
		null = null || v.IsNull()
	}
	if null {
		return Null, nil
	}
	return f.fn(c, args, env)
}

func arity(f function) string {
	switch {
	case f.max < 0:
		return fmt.Sprintf("at least %d arguments", f.min)
	case f.max == 0:
		return "no arguments"
	case f.min == f.max && f.min == 1:
		return "1 argument"
	case f.min == f.max:
		return fmt.Sprintf("%d arguments", f.min)
	}
	return fmt.Sprintf("%d to %d arguments", f.min, f.max)
}

func fnNow(_ *Call, _ []Value, env *Env) (Value, *Error) { return Time(env.Now), nil }

func textFn(f func(string) string) func(*Call, []Value, *Env) (Value, *Error) {
	return func(c *Call, args []Value, _ *Env) (Value, *Error) {
		if args[0].kind != KindText {
			return Null, argErr(c, "text", args[0])
		}
		return Text(f(args[0].Text())), nil
	}
}

func argErr(c *Call, want string, got Value) *Error {
	return Errorf(c.Pos, "%s takes %s, found %s", c.Name, want, got.Kind())
}

func fnLen(c *Call, args []Value, _ *Env) (Value, *Error) {
	switch v := args[0]; v.Kind() {
	case KindText:
		return Int(int64(utf8.RuneCountInString(v.Text()))), nil
	case KindList:
		return Int(int64(len(v.List()))), nil
	case KindObject:
		return Int(int64(len(v.Object().Keys))), nil
	}
	return Null, argErr(c, "text, list or object", args[0])
}

func fnAbs(c *Call, args []Value, _ *Env) (Value, *Error) {
	switch v := args[0]; v.Kind() {
	case KindInt:
		if v.Int() == math.MinInt64 {
			return Null, Errorf(c.Pos, "integer overflow: abs(%d)", v.Int())
		}
		if v.Int() < 0 {
			return Int(-v.Int()), nil
		}
		return v, nil
	case KindFloat:
		return Float(math.Abs(v.Float())), nil
	}
	return Null, argErr(c, "int or float", args[0])
}

func fnFloor(c *Call, args []Value, _ *Env) (Value, *Error) {
	switch v := args[0]; v.Kind() {
	case KindInt:
		return v, nil
	case KindFloat:
		return Float(math.Floor(v.Float())), nil
	}
	return Null, argErr(c, "int or float", args[0])
}

// fnBucket floors a timestamp (or an int) to a multiple of a width, so
// rows can be grouped by minute, hour, etc. Flooring rather than
// truncating keeps buckets the same width on both sides of the epoch.
func fnBucket(c *Call, args []Value, _ *Env) (Value, *Error) {
	t, w := args[0], args[1]
	if t.kind != KindTime && t.kind != KindInt {
		return Null, argErr(c, "a timestamp or int first", t)
	}
	if w.kind != KindInt || w.Int() <= 0 {
		return Null, Errorf(c.Pos, "bucket takes a positive int width in milliseconds, found %s %s", w.kind, short(w))
	}
	n, ms := int64(t.n), w.Int()
	r := n % ms
	if r < 0 {
		r += ms
	}
	// n - r only overflows below MinInt64, when n's bucket starts there.
	if n-r > n {
		return Null, Errorf(c.Pos, "integer overflow: bucket(%d, %d)", n, ms)
	}
	if t.kind == KindTime {
		if err := checkTime(c.Pos, n-r); err != nil {
			return Null, err
		}
	}
	return Value{kind: t.kind, n: uint64(n - r)}, nil
}

func fnDistance(c *Call, args []Value, _ *Env) (Value, *Error) {
	lon1, lat1, ok1 := geoPoint(args[0])
	lon2, lat2, ok2 := geoPoint(args[1])
	if !ok1 || !ok2 {
		bad := args[0]
		if ok1 {
			bad = args[1]
		}
		return Null, Errorf(c.Pos, "distance takes points [lon, lat] with lon in -180..180 and lat in -90..90, found %s", short(bad))
	}
	return Float(Haversine(lon1, lat1, lon2, lat2)), nil
}

// Haversine returns the great-circle distance in metres between two
// points given in degrees, on a sphere of EarthRadius.
func Haversine(lon1, lat1, lon2, lat2 float64) float64 {
	const rad = math.Pi / 180
	sinLat := math.Sin((lat2 - lat1) * rad / 2)
	sinLon := math.Sin((lon2 - lon1) * rad / 2)
	a := sinLat*sinLat + math.Cos(lat1*rad)*math.Cos(lat2*rad)*sinLon*sinLon
	// Rounding can push a a hair past 1 for antipodal points.
	return 2 * EarthRadius * math.Asin(math.Sqrt(min(a, 1)))
}

func fnWithin(c *Call, args []Value, _ *Env) (Value, *Error) {
	lon, lat, ok := geoPoint(args[0])
	if !ok {
		return Null, Errorf(c.Pos, "within takes a point [lon, lat] with lon in -180..180 and lat in -90..90, found %s", short(args[0]))
	}
	box := args[1].List()
	ok = args[1].kind == KindList && len(box) == 4
	for i := 0; ok && i < 4; i++ {
		ok = box[i].IsNumber()
	}
	if ok {
		west, south, east, north := box[0].Number(), box[1].Number(), box[2].Number(), box[3].Number()
		ok = south <= north && inRange(west, east, 180) && inRange(south, north, 90)
		if ok {
			inLat := lat >= south && lat <= north
			// west > east: the box crosses the antimeridian, so it is the
			// two strips west..180 and -180..east.
			inLon := (west <= east && lon >= west && lon <= east) ||
				(west > east && (lon >= west || lon <= east))
			return Bool(inLat && inLon), nil
		}
	}
	return Null, Errorf(c.Pos, "within takes a box [west, south, east, north] in degrees with south <= north, found %s", short(args[1]))
}

func inRange(a, b, limit float64) bool {
	return a >= -limit && a <= limit && b >= -limit && b <= limit
}

// geoPoint reads a [lon, lat] list of two in-range numbers.
func geoPoint(v Value) (lon, lat float64, ok bool) {
	l := v.List()
	if v.Kind() != KindList || len(l) != 2 || !l[0].IsNumber() || !l[1].IsNumber() {
		return 0, 0, false
	}
	lon, lat = l[0].Number(), l[1].Number()
	return lon, lat, lon >= -180 && lon <= 180 && lat >= -90 && lat <= 90
}
