package engine

import (
	"context"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/fenecdb/fenec/server/store"
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

// TestSubscribeTopics: on a file, a Written subscriber is told each
// write's seq and collections before it is answered, and a Stored one each
// group the store made durable, in seq order, up to the last write's seq,
// with the collections its changes touched; a subscriber of both topics
// is told both.
func TestSubscribeTopics(t *testing.T) {
	db, err := Open(Options{File: filepath.Join(t.TempDir(), "s.db"), Sync: store.SyncMode{Kind: store.SyncAlways}})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var mu sync.Mutex
	var written, stored []Write
	var both int
	db.Subscribe(func(w Write) { mu.Lock(); written = append(written, w); mu.Unlock() })
	db.Subscribe(func(w Write) { mu.Lock(); stored = append(stored, w); mu.Unlock() }, Stored)
	db.Subscribe(func(Write) { mu.Lock(); both++; mu.Unlock() }, Written, Stored)
	mustExec(t, db, `create collection jobs (n int)`)
	mustExec(t, db, `create collection other (n int)`)
	r := mustExec(t, db, `put jobs {n: 1}`)
	mustExec(t, db, `put other {n: 1}`)
	last := mustExec(t, db, `put jobs {n: 2}`).Seq
	// A group's waiters are let go before its event is told.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
		mu.Lock()
		n := len(stored)
		told := n > 0 && stored[n-1].Seq >= last && both == len(written)+n
		mu.Unlock()
		if told {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no Stored event of seq %d in 10 s", last)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(written) != 5 || written[2].Topic != Written || written[2].Seq != r.Seq || !slices.Equal(written[2].Colls, []string{"jobs"}) {
		t.Fatalf("Written events %+v: want 5, the third of seq %d on jobs", written, r.Seq)
	}
	var seq uint64
	colls := map[string]bool{}
	for _, w := range stored {
		if w.Topic != Stored || w.Seq <= seq || len(w.Stored.Changes) == 0 {
			t.Fatalf("Stored event %+v after seq %d: want a later seq, with changes", w, seq)
		}
		seq = w.Seq
		for _, c := range w.Colls {
			colls[c] = true
		}
	}
	if seq != last || !colls["jobs"] || !colls["other"] {
		t.Fatalf("Stored events up to seq %d on %v, want up to %d on jobs and other", seq, colls, last)
	}
	if both != len(written)+len(stored) {
		t.Fatalf("a subscriber of both topics was told %d events, want %d", both, len(written)+len(stored))
	}
}
