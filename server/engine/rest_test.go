package engine

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"testing"
)

var rowValue = regexp.MustCompile(`text "[^"]*"`)

// TestReducedWhereAnswersAsTheFilter holds statements whose access holds
// part of their where (plan.restOf: an id lookup, a @sorted walk) to the
// same statements over the same documents with no index, where every row
// goes through the whole where: the same rows, or the same refusal, word
// for word. The wheres mix terms the access holds with ones it does not,
// constants the field's kind and ones brought to it (text for a
// timestamp, an int for a float), nulls, and terms that fail on a row.
func TestReducedWhereAnswersAsTheFilter(t *testing.T) {
	db, _ := openMem(t)
	// ix and sc have names of one length, so a refusal's position is the
	// same in both.
	mustExec(t, db, `create collection ix (at timestamp @sorted, n int @sorted, f float @sorted, s text @sorted, owner text, j json)`)
	mustExec(t, db, `create collection sc (at timestamp, n int, f float, s text, owner text, j json)`)
	var docs []string
	for i := 1; i <= 40; i++ {
		d := fmt.Sprintf(`{at: %d, n: %d, f: %d.5, s: "s%02d", owner: "w%d", j: {"k": %d}}`, 1000+i%7*100, i%9-4, i%5, i%11, i%3, i%4)
		switch i % 10 {
		case 0:
			d = fmt.Sprintf(`{owner: "w%d"}`, i%3) // nulls in every indexed field
		case 5:
			d = fmt.Sprintf(`{at: %d, owner: "1970-01-01T00:00:01Z", s: "x"}`, 1000+i)
		}
		docs = append(docs, d)
	}
	for _, c := range []string{"ix", "sc"} {
		mustExec(t, db, "put "+c+" ["+strings.Join(docs, ",")+"]")
	}
	wheres := []string{
		`id = 3`, `id = 3.0`, `id = "3"`, `id = null`, `id in [1, 2.0, null, "4", 40]`,
		`id = 7 and owner = "w1"`, `id = 7 and owner = "w2"`, `owner = "w1" and id = 7`,
		`id = 7 and n > 1`, `id in [1, 5, 7] and owner != "w0"`, `id in [5, 6] and owner in ["w1", null]`,
		`id = 7 and (owner = "w1" or n = 0)`, `id = 7 and 5`, `5 and id = 7`, `id = 7 and n`,
		`id = 5 and owner < now()`, `id = 5 and owner = now()`, `id = 6 and owner = now()`,
		`id = 7 and j.k = 3`, `id = 7 and id = 8`, `id = 7 and n / 0 = 1`,
		`at <= 1300`, `at < 1300 and at >= 1100`, `at <= "1970-01-01T00:00:01.3Z"`, `at >= null`, `at <= null`, `at != 1300`,
		`at = 1300 and owner = "w1"`, `owner = "w1" and at = 1300`, `at > 1000 and at < 1500 and owner = "w2"`,
		`at <= 1300 and n > 0 and owner = "w1"`, `at <= 1300 and s`, `1300 >= at`, `at <= 1300 and at <= 1200`,
		`n >= 0`, `n >= 0.5`, `n < 2.5 and n > -1`, `n = 2 and owner = "w2"`, `n >= 0 and n <= "x"`, `n > true`,
		`f >= 2`, `f >= 2.5 and f < 4`, `s >= "s05" and s < "s09"`, `s > "s03" and owner = "1970-01-01T00:00:01Z"`,
		`s > "s03" and owner <= now()`, `at <= 1300 and owner <= now()`,
	}
	orders := []string{"", " order at", " order n desc", " order s", " order f limit 3", " order at limit 2 offset 1"}
	ctx := context.Background()
	for _, w := range wheres {
		for _, o := range orders {
			for _, verb := range []string{"get %s where %s%s", "explain get %s where %s%s"} {
				var got [2]string
				for k, c := range []string{"ix", "sc"} {
					q := fmt.Sprintf(verb, c, w, o)
					r, err := db.Exec(ctx, q, nil)
					if err != nil {
						got[k] = "error: " + err.Error()
					} else if strings.HasPrefix(verb, "explain") {
						got[k] = fmt.Sprint(r.Rows[0][2]) // rows picked: the rest is the plan's
					} else {
						got[k] = answer(r)
					}
				}
				// Which row a where fails on first is the access path's
				// order: the row's value in the refusal is left out.
				if strings.HasPrefix(got[0], "error: ") && strings.HasPrefix(got[1], "error: ") {
					got[0], got[1] = rowValue.ReplaceAllString(got[0], "text …"), rowValue.ReplaceAllString(got[1], "text …")
				}
				if got[0] != got[1] {
					t.Errorf("%s\n indexed:   %s\n unindexed: %s", fmt.Sprintf(verb, "ix", w, o), got[0], got[1])
				}
			}
		}
	}
	// Writes: a set and a del through the index hit the rows the same
	// where picks by the filter, and refuse alike.
	for _, w := range []string{`id = 7 and owner = "w1"`, `at <= 1300 and owner = "w2"`, `at <= 1300`, `id in [2, 3] and n > 0`, `id = 7 and 5`} {
		var got [2]string
		for k, c := range []string{"ix", "sc"} {
			r, err := db.Exec(ctx, fmt.Sprintf(`set %s {owner: "done"} where %s returning id, owner`, c, w), nil)
			if err != nil {
				got[k] = "error: " + err.Error()
			} else {
				got[k] = answer(r)
			}
			if r, err = db.Exec(ctx, fmt.Sprintf(`del %s where %s and owner = "done" returning id`, c, w), nil); err != nil {
				got[k] += " error: " + err.Error()
			} else {
				got[k] += " " + answer(r)
			}
		}
		if got[0] != got[1] {
			t.Errorf("set and del where %s\n indexed:   %s\n unindexed: %s", w, got[0], got[1])
		}
	}
}
