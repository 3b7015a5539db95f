package engine

import (
	"context"
	"sync"
	"testing"

	"github.com/fenecdb/fenec/server/store"
)

// TestSubscribersToldSeqAndChanges: each numbered write is told once with
// its Seq (its Fenec-Seq) and what it wrote, one that writes only a side
// record too (with no collections); a read tells nothing.
func TestSubscribersToldSeqAndChanges(t *testing.T) {
	db, _ := openMem(t)
	var mu sync.Mutex
	var told []Write
	db.Subscribe(func(w Write) {
		mu.Lock()
		defer mu.Unlock()
		w.Changes = append([]store.Change(nil), w.Changes...)
		told = append(told, w)
	})
	mustExec(t, db, `create collection jobs (n int)`)
	r := mustExec(t, db, `put jobs [{n: 1}, {n: 2}]`)
	if _, err := db.Run(context.Background(), nil, RunOptions{Meta: func([]*Result) map[string]Meta {
		return map[string]Meta{"k": {Body: []byte("v")}}
	}}); err != nil {
		t.Fatal(err)
	}
	mustExec(t, db, `get jobs`)
	mu.Lock()
	defer mu.Unlock()
	if len(told) != 3 {
		t.Fatalf("told %d writes, want 3: %+v", len(told), told)
	}
	for i, w := range told {
		if w.Seq != uint64(i+1) {
			t.Errorf("write %d told Seq %d", i+1, w.Seq)
		}
	}
	put := told[1]
	if put.Seq != r.Seq || len(put.Changes) != 2 || put.Changes[0].Op != store.OpPut || put.Changes[1].ID != 2 {
		t.Errorf("the put was told %+v (answered Seq %d)", put, r.Seq)
	}
	if side := told[2]; len(side.Colls) != 0 || len(side.Changes) != 1 || side.Changes[0].Op != store.OpMetaPut {
		t.Errorf("the side record's write was told %+v", side)
	}
}
