package engine

import (
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"slices"
	"sort"
	"testing"

	"github.com/tidwall/btree"
)

// numSetModel checks a numSet against the B-tree it replaces, after every
// operation and through every read the engine makes.
type numSetModel struct {
	t    testing.TB
	s    numSet
	tr   *btree.BTreeG[numItem]
	step int
}

func newNumSetModel(t testing.TB) *numSetModel {
	return &numSetModel{t: t, tr: btree.NewBTreeGOptions(lessNum, btree.Options{NoLocks: true})}
}

func (m *numSetModel) set(k numItem) {
	m.step++
	_, had := m.tr.Set(k)
	if got := m.s.Set(k); got == had {
		m.t.Fatalf("step %d: Set(%v) = %v, the tree had it: %v", m.step, k, got, had)
	}
}

func (m *numSetModel) del(k numItem) {
	m.step++
	_, had := m.tr.Delete(k)
	if got := m.s.Delete(k); got != had {
		m.t.Fatalf("step %d: Delete(%v) = %v, the tree had it: %v", m.step, k, got, had)
	}
}

// check compares the shapes (leaves, firsts, packing) and the items.
func (m *numSetModel) check() {
	t, s := m.t, &m.s
	t.Helper()
	if s.Len() != m.tr.Len() {
		t.Fatalf("step %d: Len %d, tree %d", m.step, s.Len(), m.tr.Len())
	}
	if len(s.leaves) != len(s.firsts) {
		t.Fatalf("step %d: %d leaves, %d firsts", m.step, len(s.leaves), len(s.firsts))
	}
	n := 0
	for i, l := range s.leaves {
		if len(l.items) == 0 || len(l.items) > numLeafMax || cap(l.items) > numLeafMax {
			t.Fatalf("step %d: leaf %d has %d items (room %d)", m.step, i, len(l.items), cap(l.items))
		}
		if s.firsts[i] != l.get(0) {
			t.Fatalf("step %d: leaf %d first %v, firsts %v", m.step, i, l.get(0), s.firsts[i])
		}
		for j := range l.items {
			if v, ok := l.pack(l.get(j)); !ok || v != l.items[j] {
				t.Fatalf("step %d: leaf %d item %d does not round-trip", m.step, i, j)
			}
			if j > 0 && l.items[j-1] >= l.items[j] {
				t.Fatalf("step %d: leaf %d out of order at %d", m.step, i, j)
			}
		}
		n += len(l.items)
	}
	if n != s.Len() {
		t.Fatalf("step %d: leaves hold %d, Len %d", m.step, n, s.Len())
	}
	var got, want []numItem
	s.Scan(func(it numItem) bool { got = append(got, it); return true })
	m.tr.Scan(func(it numItem) bool { want = append(want, it); return true })
	if !slices.Equal(got, want) {
		t.Fatalf("step %d: Scan differs from the tree (%d, %d items)", m.step, len(got), len(want))
	}
	got = got[:0]
	s.Reverse(func(it numItem) bool { got = append(got, it); return true })
	slices.Reverse(got)
	if !slices.Equal(got, want) {
		t.Fatalf("step %d: Reverse differs from the tree", m.step)
	}
	if a, aok := s.Min(); len(want) > 0 && (!aok || a != want[0]) || len(want) == 0 && aok {
		t.Fatalf("step %d: Min %v %v", m.step, a, aok)
	}
}

// probe compares the reads from a pivot: Ascend, Descend (first few and
// stopping), GetAt, CountTo.
func (m *numSetModel) probe(p numItem, i int) {
	t, s := m.t, &m.s
	t.Helper()
	walk := func(f func(numItem, func(numItem) bool), limit int) []numItem {
		var out []numItem
		f(p, func(it numItem) bool { out = append(out, it); return len(out) < limit })
		return out
	}
	for _, limit := range []int{1, 10, 700} {
		if g, w := walk(s.Ascend, limit), walk(m.tr.Ascend, limit); !slices.Equal(g, w) {
			t.Fatalf("step %d: Ascend(%v) limit %d: %v, tree %v", m.step, p, limit, head(g), head(w))
		}
		if g, w := walk(s.Descend, limit), walk(m.tr.Descend, limit); !slices.Equal(g, w) {
			t.Fatalf("step %d: Descend(%v) limit %d: %v, tree %v", m.step, p, limit, head(g), head(w))
		}
	}
	g, gok := s.GetAt(i)
	w, wok := m.tr.GetAt(i)
	if g != w || gok != wok {
		t.Fatalf("step %d: GetAt(%d) %v %v, tree %v %v", m.step, i, g, gok, w, wok)
	}
	wc := sort.Search(m.tr.Len(), func(i int) bool {
		it, _ := m.tr.GetAt(i)
		return it.n > p.n
	})
	if gc := s.CountTo(p.n); gc != wc {
		t.Fatalf("step %d: CountTo(%d) %d, want %d", m.step, p.n, gc, wc)
	}
}

func head(x []numItem) []numItem { return x[:min(len(x), 4)] }

// numSetExtremes are values and ids a key may take at the ends of int64.
var numSetExtremes = []int64{math.MinInt64, math.MinInt64 + 1, -1 << 40, -1, 0, 1, 1 << 40, math.MaxInt64 - 1, math.MaxInt64}

// randomKey draws a key from one of several shapes: small ranges (many
// duplicates), a queue's times and ids, and the extremes.
func randomKey(r *rand.Rand, shape int) numItem {
	pick := func() int64 {
		switch r.IntN(4) {
		case 0:
			return numSetExtremes[r.IntN(len(numSetExtremes))]
		case 1:
			return r.Int64N(50) - 25
		case 2:
			return int64(r.Uint64())
		}
		return 1_700_000_000_000 + r.Int64N(1_000_000)
	}
	switch shape {
	case 0: // small: duplicates, re-packs
		return numItem{r.Int64N(20) - 10, r.Int64N(200)}
	case 1: // anything
		return numItem{pick(), pick()}
	}
	return numItem{1_700_000_000_000 + r.Int64N(100_000), r.Int64N(1 << 26)}
}

// TestNumSetModel runs random operations against the B-tree, with many
// seeds: sets (new and again), deletes (there and not), long runs up and
// down, a claim's delete at the head and set at the tail, compactions.
func TestNumSetModel(t *testing.T) {
	seeds := 12
	if testing.Short() || raceEnabled {
		seeds = 3 // the model's checks walk every item: slow under -race
	}
	for seed := range seeds {
		r := rand.New(rand.NewPCG(uint64(seed), 7))
		m := newNumSetModel(t)
		shape := seed % 3
		steps := 1500 + r.IntN(1500)
		for range steps {
			switch op := r.IntN(20); {
			case op < 8:
				m.set(randomKey(r, shape))
			case op < 12:
				if it, ok := m.tr.GetAt(r.IntN(m.tr.Len() + 1)); ok && r.IntN(2) == 0 {
					m.del(it)
				} else {
					m.del(randomKey(r, shape))
				}
			case op == 12: // a run up, from a random start
				k := randomKey(r, shape)
				for j := range r.IntN(1500) {
					m.set(numItem{k.n + int64(j/3), k.id + int64(j)})
				}
			case op == 13: // a run down
				k := randomKey(r, shape)
				for j := range r.IntN(1500) {
					m.set(numItem{k.n - int64(j/2), k.id - int64(j)})
				}
			case op == 14: // claims: the head out, a later time in
				for range r.IntN(600) {
					it, ok := m.tr.Min()
					if !ok {
						break
					}
					m.del(it)
					last, _ := m.tr.Max()
					m.set(numItem{last.n + r.Int64N(3), it.id})
				}
			case op == 15: // a run of deletes from the middle
				i := r.IntN(m.tr.Len() + 1)
				for range r.IntN(700) {
					it, ok := m.tr.GetAt(i)
					if !ok {
						break
					}
					m.del(it)
				}
			case op == 16:
				m.s.compact()
			default:
				var p numItem
				if it, ok := m.tr.GetAt(r.IntN(m.tr.Len() + 1)); ok && r.IntN(2) == 0 {
					p = it
					if r.IntN(2) == 0 {
						p.id += int64(r.IntN(3)) - 1
					}
				} else {
					p = randomKey(r, shape)
				}
				m.probe(p, r.IntN(m.tr.Len()+2)-1)
			}
			if r.IntN(150) == 0 {
				m.check()
			}
		}
		m.check()
		for m.tr.Len() > 0 { // all out, in random order
			it, _ := m.tr.GetAt(r.IntN(m.tr.Len()))
			m.del(it)
		}
		m.check()
	}
}

// TestNumSetExtremes: every pair of the extremes, set, probed, deleted.
func TestNumSetExtremes(t *testing.T) {
	m := newNumSetModel(t)
	for _, n := range numSetExtremes {
		for _, id := range numSetExtremes {
			m.set(numItem{n, id})
			m.set(numItem{n, id}) // again: a no-op
		}
	}
	m.check()
	for _, n := range numSetExtremes {
		for _, id := range numSetExtremes {
			m.probe(numItem{n, id}, int(id&63))
		}
	}
	m.s.compact()
	m.check()
	for _, n := range slices.Backward(numSetExtremes) {
		for _, id := range numSetExtremes {
			m.del(numItem{n, id})
			m.del(numItem{n, id}) // missing now
		}
		m.check()
	}
}

// TestNumSetFills: keys set in order fill every leaf; compact fills them
// after random sets; claims at the head drop leaves from the front.
func TestNumSetFills(t *testing.T) {
	var s numSet
	const n = 10 * numLeafMax
	for i := range n {
		s.Set(numItem{1_700_000_000_000 + int64(i)*7, int64(i + 1)})
	}
	if len(s.leaves) != n/numLeafMax {
		t.Fatalf("%d leaves for %d keys in order", len(s.leaves), n)
	}
	for i, l := range s.leaves {
		if len(l.items) != numLeafMax || cap(l.items) != numLeafMax {
			t.Fatalf("leaf %d: %d items, room %d", i, len(l.items), cap(l.items))
		}
	}
	r := rand.New(rand.NewPCG(1, 2))
	var u numSet
	for range n {
		u.Set(numItem{r.Int64N(1 << 40), r.Int64N(1 << 20)})
	}
	u.compact()
	for i, l := range u.leaves[:len(u.leaves)-1] {
		if len(l.items) != numLeafMax || cap(l.items) != numLeafMax {
			t.Fatalf("compacted leaf %d: %d items, room %d", i, len(l.items), cap(l.items))
		}
	}
	for range numLeafMax {
		it, _ := s.Min()
		s.Delete(it)
	}
	if len(s.leaves) != n/numLeafMax-1 {
		t.Fatalf("%d leaves after a leaf's worth of claims", len(s.leaves))
	}
}

// FuzzNumSet runs the operations a byte string spells against the tree.
func FuzzNumSet(f *testing.F) {
	f.Add([]byte{0, 1, 2, 3, 4, 5, 6, 7, 8, 9})
	f.Add([]byte{255, 0, 255, 0, 128, 127, 1, 254})
	f.Fuzz(func(t *testing.T, data []byte) {
		m := newNumSetModel(t)
		val := func(b byte) int64 {
			if b < 18 {
				return numSetExtremes[b%9]
			}
			return int64(b) - 128
		}
		for i := 0; i+2 < len(data); i += 3 {
			k := numItem{val(data[i+1]), val(data[i+2])}
			switch data[i] % 8 {
			case 0, 1, 2:
				m.set(k)
			case 3, 4:
				m.del(k)
			case 5: // a run up from k
				for j := range int64(data[i] >> 2) {
					m.set(numItem{k.n + j, k.id + j*int64(data[i+1]&7)})
				}
			case 6:
				m.s.compact()
			case 7:
				m.probe(k, int(data[i+2]))
			}
		}
		m.check()
	})
}

// numSetOps is the operations the micro-benchmarks time, on a numSet or on
// the B-tree it replaced.
type numSetOps struct {
	set, del func(numItem)
	ascend   func(numItem, func(numItem) bool)
	min      func() numItem
}

func benchSets() map[string]func() numSetOps {
	return map[string]func() numSetOps{
		"numSet": func() numSetOps {
			s := &numSet{}
			return numSetOps{func(k numItem) { s.Set(k) }, func(k numItem) { s.Delete(k) }, s.Ascend, func() numItem { k, _ := s.Min(); return k }}
		},
		"btree": func() numSetOps {
			tr := btree.NewBTreeGOptions(lessNum, btree.Options{NoLocks: true})
			var add, rm btree.PathHint // as the engine used them
			return numSetOps{func(k numItem) { tr.SetHint(k, &add) }, func(k numItem) { tr.DeleteHint(k, &rm) }, tr.Ascend, func() numItem { k, _ := tr.Min(); return k }}
		},
	}
}

// BenchmarkNumSet times, against the B-tree: sets in key order (a load, a
// put), sets at random, a claim (the head out, a later key in) over a
// million items, and a walk of ten from a pivot.
//
//	cd server && go test ./engine -run '^$' -bench BenchmarkNumSet
func BenchmarkNumSet(b *testing.B) {
	const size = 1_000_000
	for _, name := range []string{"btree", "numSet"} {
		mk := benchSets()[name]
		b.Run("set-in-order/"+name, func(b *testing.B) {
			s := mk()
			for i := range b.N {
				s.set(numItem{1_700_000_000_000 + int64(i), int64(i)})
			}
		})
		b.Run("set-random/"+name, func(b *testing.B) {
			s, r := mk(), rand.New(rand.NewPCG(1, 1))
			for range b.N {
				s.set(numItem{1_700_000_000_000 + r.Int64N(1<<30), r.Int64N(1 << 26)})
			}
		})
		b.Run("claim/"+name, func(b *testing.B) {
			s := mk()
			for i := range size {
				s.set(numItem{1_700_000_000_000 + int64(i), int64(i)})
			}
			b.ResetTimer()
			for i := range b.N {
				k := s.min()
				s.del(k)
				s.set(numItem{1_700_000_000_000 + int64(size+i), k.id})
			}
		})
		b.Run("ascend-10/"+name, func(b *testing.B) {
			s, r := mk(), rand.New(rand.NewPCG(2, 2))
			for i := range size {
				s.set(numItem{1_700_000_000_000 + int64(i)*3, int64(i)})
			}
			b.ResetTimer()
			for range b.N {
				k, seen := numItem{1_700_000_000_000 + r.Int64N(3*size), 0}, 0
				s.ascend(k, func(numItem) bool { seen++; return seen < 10 })
			}
		})
	}
}

// BenchmarkNumSetBytes measures the heap an item takes, in key order and
// at random, at a million and ten million items, against the B-tree (one
// op: the figure is bytes/item).
//
//	cd server && go test ./engine -run '^$' -bench BenchmarkNumSetBytes -benchtime 1x
func BenchmarkNumSetBytes(b *testing.B) {
	for _, n := range []int{1_000_000, 10_000_000} {
		for _, order := range []string{"in-order", "random"} {
			for _, name := range []string{"btree", "numSet"} {
				b.Run(fmt.Sprintf("%s/%d/%s", order, n, name), func(b *testing.B) {
					r := rand.New(rand.NewPCG(3, 3))
					before := heapLive()
					s := benchSets()[name]()
					for i := range n {
						if order == "in-order" {
							s.set(numItem{1_700_000_000_000 + int64(i), int64(i)})
						} else {
							s.set(numItem{1_700_000_000_000 + r.Int64N(1<<40), r.Int64N(1 << 26)})
						}
					}
					b.ReportMetric(float64(heapLive()-before)/float64(n), "bytes/item")
					runtime.KeepAlive(s)
				})
			}
		}
	}
}
