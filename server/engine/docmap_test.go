package engine

import (
	"math"
	"math/rand/v2"
	"runtime"
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

// TestDocMapSlotlessPages: a page whose rows are all evicted drops its
// slots (dense: a count; sparse: its keys kept) and answers evictedDoc for
// them; a page with one row resident keeps them; a write, a delete or a
// new id into a slotless page gives it its slots back, the others still
// evictedDoc.
func TestDocMapSlotlessPages(t *testing.T) {
	for _, sparse := range []bool{false, true} {
		var m docMap
		id := func(i int) int64 {
			if sparse {
				return int64(3*i + 1)
			}
			return int64(i + 1)
		}
		const n = 4 * pageMax
		for i := range n {
			m.Set(id(i), &Doc{ID: id(i)})
		}
		for i := range n {
			if i != pageMax+5 { // page 1 keeps one row resident
				m.Set(id(i), evictedDoc)
			}
		}
		for _, p := range m.pages {
			p.dropSlots()
		}
		for k, p := range m.pages {
			if want := k != 1; (p.docs == nil) != want || p.len() != pageMax || (p.keys != nil) != sparse {
				t.Fatalf("sparse %v: page %d: slots %v, %d rows, keys %v", sparse, k, p.docs != nil, p.len(), p.keys != nil)
			}
		}
		check := func(step string, want func(i int) *Doc) {
			t.Helper()
			if m.Len() != n {
				t.Fatalf("%s: Len %d", step, m.Len())
			}
			for i := range n {
				if d, ok := m.Get(id(i)); !ok || d != want(i) {
					t.Fatalf("sparse %v, %s: Get(%d) = %v %v", sparse, step, id(i), d, ok)
				}
			}
			if sparse {
				if _, ok := m.Get(id(7) + 1); ok {
					t.Fatalf("%s: an id between two found", step)
				}
			}
			i := 0
			m.Scan(func(k int64, d *Doc) bool {
				if k != id(i) || d != want(i) {
					t.Fatalf("sparse %v, %s: Scan's %d-th: %d %v", sparse, step, i, k, d)
				}
				i++
				return true
			})
			if i != n {
				t.Fatalf("%s: Scan saw %d", step, i)
			}
		}
		resident := map[int64]*Doc{}
		want := func(i int) *Doc {
			if d, ok := resident[id(i)]; ok {
				return d
			}
			return evictedDoc
		}
		first, _ := m.Get(id(pageMax + 5))
		resident[id(pageMax+5)] = first
		check("dropped", want)
		d := &Doc{ID: id(2*pageMax + 9)}
		if old, ok := m.Set(d.ID, d); !ok || old != evictedDoc {
			t.Fatalf("a write into a page without slots replaced %v %v", old, ok)
		}
		resident[d.ID] = d
		if m.pages[2].docs == nil {
			t.Fatal("a page written keeps no slots")
		}
		check("written", want)
		if old, ok := m.Delete(id(3*pageMax + 20)); !ok || old != evictedDoc {
			t.Fatalf("a delete from a page without slots: %v %v", old, ok)
		}
		m.Set(id(3*pageMax+20), evictedDoc) // back, for check's n
		check("deleted", want)
		if !sparse {
			continue
		}
		// A new id between two of a page without slots (sparse): the
		// page gets its slots back and takes it.
		for _, p := range m.pages {
			p.dropSlots()
		}
		nd := &Doc{ID: id(10) + 1}
		m.Set(nd.ID, nd)
		if got, _ := m.Get(nd.ID); got != nd || m.Len() != n+1 {
			t.Fatalf("a new id into a sparse page without slots: %v, Len %d", got, m.Len())
		}
		if got, _ := m.Get(id(10)); got != evictedDoc {
			t.Fatalf("its neighbour: %v", got)
		}
	}
}

// BenchmarkDocMapEvictedBytes measures the id map's heap per row of ten
// million ids given in order, every row evicted: pages with their slots
// (each evictedDoc), then without (docPage.dropSlots).
//
//	cd server && go test ./engine -run '^$' -bench BenchmarkDocMapEvictedBytes -benchtime 1x
func BenchmarkDocMapEvictedBytes(b *testing.B) {
	const n = 10_000_000
	before := heapLive()
	var m docMap
	for i := range n {
		m.Set(int64(i+1), evictedDoc)
	}
	b.ReportMetric(float64(heapLive()-before)/n, "slots-bytes/row")
	for _, p := range m.pages {
		p.dropSlots()
	}
	b.ReportMetric(float64(heapLive()-before)/n, "slotless-bytes/row")
	runtime.KeepAlive(&m)
}
