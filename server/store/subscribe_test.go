package store

import (
	"path/filepath"
	"slices"
	"sync"
	"testing"
)

// TestSubscribe checks what a subscriber is told of each durable group:
// its position, the collections it touched, its changes, the syncs; and
// that nothing more once it unsubscribed, while another subscriber is
// still told.
func TestSubscribe(t *testing.T) {
	t.Parallel()
	_, _, _, s := load(t, filepath.Join(t.TempDir(), "f.db"), Options{}, noFoldTuning)
	defer s.Close()
	var mu sync.Mutex
	var got, other []Event
	unsubscribe := s.Subscribe(func(e Event) {
		mu.Lock()
		got = append(got, Event{Seq: e.Seq, Changes: slices.Clone(e.Changes), Fsync: e.Fsync})
		mu.Unlock()
	})
	s.Subscribe(func(e Event) {
		mu.Lock()
		other = append(other, e)
		mu.Unlock()
	})
	units := [][]Change{
		{{Op: OpCreate, Coll: "a", ID: 1}, {Op: OpCreate, Coll: "b", ID: 1}},
		{{Op: OpPut, Coll: "b", ID: 1, Body: []byte("{}")}, {Op: OpMetaPut, Key: "k", Body: []byte("v")}, {Op: OpPut, Coll: "a", ID: 1, Body: []byte("{}")}, {Op: OpPut, Coll: "b", ID: 2, Body: []byte("{}")}},
		{{Op: OpMetaDelete, Key: "k"}},
	}
	for i, u := range units {
		if err := s.Commit(uint64(i+1), u)(); err != nil {
			t.Fatal(err)
		}
	}
	mu.Lock()
	if len(got) != 3 {
		t.Fatalf("told of %d commits, want 3 (one a unit, each waited for)", len(got))
	}
	wantColls := [][]string{{"a", "b"}, {"b", "a"}, nil}
	for i, e := range got {
		if e.Seq != uint64(i+1) || !e.Fsync || len(e.Changes) != len(units[i]) || !slices.Equal(e.Colls(), wantColls[i]) {
			t.Errorf("event %d: seq %d, fsync %v, %d changes, colls %q; want seq %d, synced, %d changes, colls %q",
				i, e.Seq, e.Fsync, len(e.Changes), e.Colls(), i+1, len(units[i]), wantColls[i])
		}
	}
	mu.Unlock()
	unsubscribe()
	unsubscribe() // a second call changes nothing
	if err := s.Commit(4, []Change{{Op: OpMetaPut, Key: "k", Body: []byte("w")}})(); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(got) != 3 || len(other) != 4 || other[3].Seq != 4 {
		t.Fatalf("after unsubscribe: %d events told to it (want 3), %d to the other (want 4)", len(got), len(other))
	}
}
