package httpapi

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
)

// Requests served side by side, whose room (scratch) is reused from one to
// the next, each get their own statements and parameters: each worker's
// writes, of bodies of every size, read back as it sent them, whatever
// the other workers sent meanwhile, and a refused request between them
// leaves nothing behind for the next. Run it with -race.
func TestScratchReuse(t *testing.T) {
	ts := newTestServer(t, ":memory:", nil)
	ts.c.MustQuery("create collection c (w int, i int, s text)")
	const workers, rounds = 6, 40
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range rounds {
				s := strings.Repeat(string(rune('a'+w)), 1+(i*37+w*11)%700)
				switch i % 4 {
				case 0, 1:
					ts.c.MustQuery(`put c {w: $1, i: $2, s: $3}`, w, i, s)
				case 2:
					stmts := []any{}
					for k := range 1 + i%7 {
						stmts = append(stmts, map[string]any{"query": `put c {w: $1, i: $2, s: $3}`, "params": []any{w, i*100 + k, s}})
					}
					if r, err := ts.c.Do("POST", "/batch", map[string]any{"statements": stmts}, nil); err != nil || r.Status != http.StatusOK {
						t.Errorf("batch: %v %v", r, err)
						return
					}
				case 3:
					// A statement that does not parse, then one that runs.
					if r, err := ts.c.Query(`put c {w: $1,`, w); err != nil || r.Status != http.StatusBadRequest {
						t.Errorf("the bad statement: %v %v", r, err)
						return
					}
					ts.c.MustQuery(`put c {w: $1, i: $2, s: $3}`, w, i, s)
				}
				want := i
				if i%4 == 2 {
					want = i * 100
				}
				var rows []struct {
					W, I int
					S    string
				}
				ts.c.MustQuery(`get c where w = $1 and i = $2`, w, want).JSON(t, &rows)
				if len(rows) != 1 || rows[0].W != w || rows[0].I != want || rows[0].S != s {
					got, _ := json.Marshal(rows)
					t.Errorf("worker %d round %d: read back %s", w, i, got)
					return
				}
			}
		}()
	}
	wg.Wait()
	var n []struct{ Count int }
	ts.c.MustQuery(`get c count`).JSON(t, &n)
	want := 0
	for i := range rounds {
		if i%4 == 2 {
			want += 1 + i%7
		} else {
			want++
		}
	}
	if fmt.Sprint(n) != fmt.Sprint([]struct{ Count int }{{want * workers}}) {
		t.Errorf("count %v, want %d", n, want*workers)
	}
}
