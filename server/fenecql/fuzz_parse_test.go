package fenecql

import (
	"errors"
	"strings"
	"testing"
)

// FuzzParse checks that any text either parses or is refused with a
// bad_request error placed inside it, and that a column is always named by
// text the statement holds.
func FuzzParse(f *testing.F) {
	for _, tc := range seedStatements {
		f.Add(tc.src)
	}
	for _, s := range []string{
		`get t select count_x as n, payload.to, a+ 1 where x in [1, -2.5e3] and y not in $1 count`,
		`create collection if not exists t (a int @hash, b geo @geo)`,
		`explain del t where case when a then 1 else 2 end is not null returning *`,
		`get t where x = "\u00e9\ud83d\ude00" or $jwt.sub = new.owner; drop collection if exists t`,
		`create collection s (k text @unique, seen timestamp @sorted @ttl(1h30m), at timestamp @ttl(250ms))`,
		`put s [{k: "a"}, $1] if absent else set {n: n + new.n, data.x: coalesce(new.data.x, 0)}`,
		`get s select k where a > 1 near home [2.29, 48.86] exact limit 3 offset 1`,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, src string) {
		s, err := Parse(src)
		checkErr(t, src, err)
		if err == nil {
			for _, c := range columnsOf(s) {
				if !strings.Contains(src, c.Name) || c.Name == "" {
					t.Errorf("Parse(%q): column %q is not text of the statement", src, c.Name)
				}
			}
		}
		_, err = ParseAll(src)
		checkErr(t, src, err)
		_, err = ParseExpr(src)
		checkErr(t, src, err)
	})
}

func checkErr(t *testing.T, src string, err error) {
	if err == nil {
		return
	}
	var e *Error
	if !errors.As(err, &e) || e.Code != CodeInvalid || e.Pos < 0 || int(e.Pos) > len(src)+1 {
		t.Errorf("%q: bad error %#v", src, err)
	}
}

func columnsOf(s Stmt) []Column {
	switch s := s.(type) {
	case *Get:
		return s.Columns
	case *Set:
		if s.Returning != nil {
			return s.Returning.Columns
		}
	case *Del:
		if s.Returning != nil {
			return s.Returning.Columns
		}
	case *Explain:
		return columnsOf(s.Stmt)
	}
	return nil
}
