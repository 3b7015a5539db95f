package fenecql

import "testing"

func TestFormat(t *testing.T) {
	tests := []struct{ a, b string }{
		{`run_at <= now()`, `run_at<=NOW( )`},
		{`a = 1 and b in [1, 2] or not c is null`, `((a = 1) AND (b IN [1,2])) OR (NOT (c IS NULL))`},
		{`case when x > 1 then "a" else 'b' end`, `CASE WHEN x>1 THEN 'a' ELSE "b" END`},
		{`distance(pickup, $1) * -2`, `distance( pickup , $1 )*-2`},
		{`{"k": [1, 2.5]}.x`, ``},
	}
	for _, tc := range tests {
		ea, err := ParseExpr(tc.a)
		if tc.b == "" {
			if err == nil {
				t.Errorf("%s: parsed", tc.a)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%s: %v", tc.a, err)
		}
		eb, err := ParseExpr(tc.b)
		if err != nil {
			t.Fatalf("%s: %v", tc.b, err)
		}
		fa, fb := Format(ea), Format(eb)
		if fa != fb {
			t.Errorf("%q and %q format apart: %q, %q", tc.a, tc.b, fa, fb)
		}
		again, err := ParseExpr(fa)
		if err != nil {
			t.Fatalf("formatted %q does not parse: %v", fa, err)
		}
		if Format(again) != fa {
			t.Errorf("format is not stable: %q then %q", fa, Format(again))
		}
	}
	if Format(mustExpr(t, `a < 1`)) == Format(mustExpr(t, `a <= 1`)) {
		t.Error("different filters format alike")
	}
}

func mustExpr(t *testing.T, s string) Expr {
	t.Helper()
	e, err := ParseExpr(s)
	if err != nil {
		t.Fatal(err)
	}
	return e
}
