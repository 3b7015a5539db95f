package fenecql

import (
	"errors"
	"fmt"
	"testing"
	"time"
)

// FuzzEval checks that any expression the parser accepts evaluates,
// against a fixed row, to a value or to a placed bad_request error —
// never a panic or a hang — and that every value it makes writes
// as JSON that reads back to the same JSON, and coerces without panic.
func FuzzEval(f *testing.F) {
	for _, s := range []string{
		`n + 1`, `big + 1`, `small / -1`, `-small`, `n / zero`, `f % 0`, `$5 * 10`,
		`now() + 1000 * n * n`, `t - now()`, `bucket(t, 60000)`, `bucket(small, 3)`,
		`t = "2026-05-03T09:20:00Z"`, `t < "soon"`, `s < 1`, `[1, 2] = [1, 2.0]`, `[1] < [2]`,
		`n in $3`, `null not in [1]`, `x in $4`, `not null and n > 1 or false`,
		`case when n >= 5 then null else now() + 1000 * n * n end`,
		`coalesce(missing, lower(s), 1 / 0)`, `len(payload) + abs(-3) + floor(2.5)`,
		`distance(pickup, [29.0290, 41.0490])`, `within(pickup, [170, -10, -170, 10])`,
		`{a: new.n, b: $jwt.sub, c: payload.deep.x, d: [t, f, ok]}`, `-9223372036854775808 - 1e308 * 1e308`,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, src string) {
		// The fuzzer has no per-input timeout: a hang would only stall it.
		// Panicking off the test goroutine crashes the worker instead, and
		// the fuzzer then reports the input as a failure.
		watchdog := time.AfterFunc(5*time.Second, func() { panic(fmt.Sprintf("Eval(%q) hangs", src)) })
		defer watchdog.Stop()
		e, err := ParseExpr(src)
		if err != nil {
			return // FuzzParse checks what the parser refuses
		}
		v, err := Eval(e, testEnv())
		if err != nil {
			var fe *Error
			if !errors.As(err, &fe) || fe.Code != CodeInvalid || fe.Pos < 1 || int(fe.Pos) > len(src)+1 {
				t.Errorf("Eval(%q): bad error %#v", src, err)
			}
			return
		}
		out := AppendJSON(nil, v)
		back, err := ParseJSON(out)
		if err != nil {
			t.Fatalf("Eval(%q) wrote %s, which does not read back: %v", src, out, err)
		}
		if again := AppendJSON(nil, back); string(again) != string(out) {
			t.Errorf("Eval(%q): %s reads back as %s", src, out, again)
		}
		for typ := TypeInt; typ <= TypeGeo; typ++ {
			if _, err := Coerce(v, typ); err != nil {
				var fe *Error
				if !errors.As(err, &fe) || fe.Code != CodeInvalid {
					t.Errorf("Coerce(%s, %s): bad error %#v", out, typ, err)
				}
			}
		}
	})
}
