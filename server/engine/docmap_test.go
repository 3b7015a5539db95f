package engine

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// TestDocMapMatchesAMap runs random sets and deletes, of ids given in
// order, in runs, scattered and from the front as a queue's acks take
// them, against a Go map, and checks every read and the pages' shape.
func TestDocMapMatchesAMap(t *testing.T) {
	for _, pattern := range []string{"inorder", "runs", "scattered", "queue"} {
		t.Run(pattern, func(t *testing.T) {
			r := rand.New(rand.NewPCG(7, uint64(len(pattern))))
			var m docMap
			want := map[int64]*Doc{}
			next := int64(1)
			pick := func() int64 {
				switch pattern {
				case "inorder":
					next++
					return next - 1
				case "runs":
					if r.IntN(50) == 0 {
						next = r.Int64N(20000)
					}
					next++
					return next
				case "scattered":
					return r.Int64N(5000) - 100
				}
				if r.IntN(3) == 0 && len(want) > 0 {
					return next - int64(len(want)) // near the front
				}
				next++
				return next
			}
			check := func(step int) {
				t.Helper()
				if m.Len() != len(want) {
					t.Fatalf("step %d: Len %d, want %d", step, m.Len(), len(want))
				}
				var ids []int64
				m.Scan(func(id int64, d *Doc) bool {
					if want[id] != d {
						t.Fatalf("step %d: Scan gave id %d a document not its own", step, id)
					}
					ids = append(ids, id)
					return true
				})
				if len(ids) != len(want) || !slices.IsSorted(ids) || len(slices.Compact(slices.Clone(ids))) != len(ids) {
					t.Fatalf("step %d: Scan gave %d ids, sorted %v, want %d distinct", step, len(ids), slices.IsSorted(ids), len(want))
				}
				for k, p := range m.pages {
					if len(p.docs) == 0 || len(p.docs) > pageMax || p.base != p.key(0) {
						t.Fatalf("step %d: page %d has %d docs, base %d, first %d", step, k, len(p.docs), p.base, p.key(0))
					}
					if p.keys != nil && len(p.keys) != len(p.docs) {
						t.Fatalf("step %d: page %d has %d keys for %d docs", step, k, len(p.keys), len(p.docs))
					}
				}
			}
			for step := range 60000 {
				id := pick()
				if r.IntN(3) == 0 || pattern == "queue" && r.IntN(2) == 0 {
					wd, had := want[id]
					got, ok := m.Delete(id)
					if ok != had || got != wd {
						t.Fatalf("step %d: Delete(%d) = %v, want %v", step, id, ok, had)
					}
					delete(want, id)
				} else {
					d := &Doc{ID: id}
					wd, had := want[id]
					old, ok := m.Set(id, d)
					if ok != had || old != wd {
						t.Fatalf("step %d: Set(%d) replaced %v, want %v", step, id, ok, had)
					}
					want[id] = d
				}
				for range 3 {
					q := r.Int64N(next+200) - 150
					got, ok := m.Get(q)
					if wd, had := want[q]; ok != had || got != wd {
						t.Fatalf("step %d: Get(%d) = %v, want %v", step, q, ok, had)
					}
				}
				if step%997 == 0 {
					check(step)
				}
			}
			check(-1)
			// Everything deleted, in random order: no page is left.
			ids := make([]int64, 0, len(want))
			for id := range want {
				ids = append(ids, id)
			}
			r.Shuffle(len(ids), func(i, j int) { ids[i], ids[j] = ids[j], ids[i] })
			for k, id := range ids {
				if _, ok := m.Delete(id); !ok {
					t.Fatalf("final delete %d of id %d: not found", k, id)
				}
				delete(want, id)
				if k%500 == 0 {
					check(k)
				}
			}
			if m.Len() != 0 || len(m.pages) != 0 {
				t.Fatalf("all deleted: Len %d, %d pages", m.Len(), len(m.pages))
			}
		})
	}
}

// TestDocMapInOrderIsDense: ids given in order fill their pages and keep
// no keys, the 8 bytes a document the map is for.
func TestDocMapInOrderIsDense(t *testing.T) {
	var m docMap
	for id := int64(1); id <= 10*pageMax; id++ {
		m.Set(id, &Doc{ID: id})
	}
	if len(m.pages) != 10 {
		t.Fatalf("%d pages for %d ids, want 10", len(m.pages), 10*pageMax)
	}
	for k, p := range m.pages {
		if p.keys != nil || len(p.docs) != pageMax {
			t.Fatalf("page %d: %d docs, keys %v", k, len(p.docs), p.keys != nil)
		}
	}
}

// TestDocMapExtremeIDs: ids at both ends of int64, as a file written
// before ids were held to 1..MaxID may hold, are kept apart.
func TestDocMapExtremeIDs(t *testing.T) {
	var m docMap
	ids := []int64{math.MaxInt64, math.MinInt64, math.MaxInt64 - 1, math.MinInt64 + 1, 0, 1}
	for _, id := range ids {
		m.Set(id, &Doc{ID: id})
	}
	var got []int64
	m.Scan(func(id int64, d *Doc) bool {
		if d.ID != id {
			t.Fatalf("id %d holds document %d", id, d.ID)
		}
		got = append(got, id)
		return true
	})
	want := slices.Sorted(slices.Values(ids))
	if !slices.Equal(got, want) {
		t.Fatalf("Scan: %v, want %v", got, want)
	}
	for _, id := range ids {
		if d, ok := m.Get(id); !ok || d.ID != id {
			t.Fatalf("Get(%d): %v", id, ok)
		}
	}
}
