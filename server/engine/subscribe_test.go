package engine

import (
	"context"
	"slices"
	"sync"
	"testing"
)

// TestSubscribers: every subscriber is told of every committed write, with
// the collections it changed; one that unsubscribes is told no more, and
// the others still are. A refused write tells no one.
func TestSubscribers(t *testing.T) {
	db, _ := openMem(t)
	var mu sync.Mutex
	told := map[string][][]string{}
	subscribe := func(name string) func() {
		return db.Subscribe(func(w Write) {
			mu.Lock()
			defer mu.Unlock()
			told[name] = append(told[name], slices.Clone(w.Colls))
		})
	}
	stopA := subscribe("a")
	subscribe("b")
	mustExec(t, db, `create collection jobs (n int @unique)`)
	mustExec(t, db, `put jobs {n: 1}`)
	if _, err := db.Exec(context.Background(), `insert jobs {n: 1}`, nil); err == nil {
		t.Fatal("a taken @unique value was written")
	}
	stopA()
	mustExec(t, db, `put jobs {n: 2}`)
	mustExec(t, db, `get jobs count`)

	mu.Lock()
	defer mu.Unlock()
	want := map[string][][]string{
		"a": {{"jobs"}, {"jobs"}},
		"b": {{"jobs"}, {"jobs"}, {"jobs"}},
	}
	for name, w := range want {
		if !slices.EqualFunc(told[name], w, slices.Equal) {
			t.Errorf("subscriber %s was told %v, want %v", name, told[name], w)
		}
	}
}
