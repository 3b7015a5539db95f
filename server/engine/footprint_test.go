package engine

import (
	"fmt"
	"strings"
	"testing"
)

// TestFootprints: a collection's rows are its documents; its index bytes
// grow with its documents and with each index it has, not with the size
// of its rows; its bytes hold the index bytes and grow with its rows'
// size.
func TestFootprints(t *testing.T) {
	db, _ := openMem(t)
	mustExec(t, db, `create collection plain (s text)`)
	mustExec(t, db, `create collection keyed (s text, k text @unique, n int @sorted)`)
	mustExec(t, db, `create collection empty (s text)`)
	put := func(coll, s string, n int) {
		t.Helper()
		for i := range n {
			mustExec(t, db, `put `+coll+` {s: $1, k: $2, n: $3}`, s, coll+strings.Repeat("k", i%3)+string(rune('a'+i%26))+strings.Repeat("z", i), i)
		}
	}
	mustExec(t, db, `drop collection plain`)
	mustExec(t, db, `create collection plain (s text, k text, n int)`)
	put("plain", "short", 100)
	put("keyed", "short", 100)
	byName := func() map[string]Footprint {
		out := map[string]Footprint{}
		var names []string
		for _, f := range db.Footprints() {
			out[f.Name] = f
			names = append(names, f.Name)
		}
		if got := strings.Join(names, " "); got != "keyed empty plain" {
			t.Errorf("footprints in the order %s, want creation order", got)
		}
		return out
	}
	fs := byName()
	plain, keyed, empty := fs["plain"], fs["keyed"], fs["empty"]
	if plain.Rows != 100 || keyed.Rows != 100 || empty.Rows != 0 {
		t.Errorf("rows %d %d %d, want 100 100 0", plain.Rows, keyed.Rows, empty.Rows)
	}
	if empty.Bytes != 0 || empty.IndexBytes != 0 {
		t.Errorf("an empty collection: %+v", empty)
	}
	if plain.IndexBytes <= 0 || keyed.IndexBytes <= plain.IndexBytes {
		t.Errorf("index bytes: plain %d, keyed (two more indexes) %d", plain.IndexBytes, keyed.IndexBytes)
	}
	if plain.Bytes <= plain.IndexBytes || keyed.Bytes <= keyed.IndexBytes {
		t.Errorf("bytes not above the index bytes: %+v %+v", plain, keyed)
	}
	mustExec(t, db, `set plain {s: $1}`, strings.Repeat("long text ", 50))
	mustExec(t, db, `del keyed where n >= 50`)
	fs = byName()
	if got := fs["plain"]; got.IndexBytes != plain.IndexBytes || got.Bytes < plain.Bytes+100*400 {
		t.Errorf("rows 500 bytes longer: %+v, was %+v", got, plain)
	}
	if got := fs["keyed"]; got.Rows != 50 || got.IndexBytes != keyed.IndexBytes/2 {
		t.Errorf("half the documents deleted: %+v, was %+v", got, keyed)
	}
}

// TestFootprintEvicted: under a limit, an evicted row's index bytes are
// its id map entry in a page without slots (idMapEvicted) and its field
// indexes; a resident row's, its slot (idMapEntry) and the same indexes.
// The queue page's jobs, all evicted: 11 bytes a job.
func TestFootprintEvicted(t *testing.T) {
	db, _ := openEvicting(t, 1, nil)
	mustExec(t, db, `create collection jobs (payload json, run_at timestamp @sorted, owner text, attempts int, error text)`)
	const n = 3 * pageMax
	fill(t, db, "jobs", n, func(i int) string { return fmt.Sprintf(`{payload: {"i": %d}, run_at: %d, attempts: 0}`, i, 1000+i) })
	if got, want := db.Footprints()[0].IndexBytes, int64(n*(idMapEntry+numIndexEntry)); got != want {
		t.Fatalf("resident: IndexBytes %d, want %d", got, want)
	}
	if err := db.st.Fold(); err != nil {
		t.Fatal(err)
	}
	for range 10 {
		db.Evict()
	}
	f := db.Footprints()[0]
	if f.Rows != hotHead || f.Evicted != n-hotHead {
		t.Fatalf("%+v: want every row but the head evicted", f)
	}
	if want := int64(hotHead*(idMapEntry+numIndexEntry) + (n-hotHead)*(idMapEvicted+numIndexEntry)); f.IndexBytes != want {
		t.Fatalf("evicted: IndexBytes %d, want %d", f.IndexBytes, want)
	}
	if idMapEvicted+numIndexEntry != 11 {
		t.Fatalf("an evicted job of the queue page: %d bytes", idMapEvicted+numIndexEntry)
	}
}
