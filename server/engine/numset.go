package engine

import (
	"math"
	"math/bits"
	"slices"
	"sort"
)

// numSet is an ordered set of (number, id) pairs, packed: the items of an
// int or timestamp @sorted index (sortedIndex.nums) and of a queue's own
// trees (queueIndex). A B-tree of 16-byte items costs about 32 bytes an
// item once writes have split its leaves, 18 just after a compaction; a
// numSet about 8 to 11, whatever the writes (docs/architecture.md,
// "Memory"; bench/results/memory.md). Under --memory every index entry
// stays in memory, evicted rows' too, so an index's bytes per item bound
// how many jobs a limit can hold.
//
// It is a list of leaves in key order, each of up to numLeafMax items.
// A leaf keeps a base number n0 (its least), a base id id0 (its least)
// and a bit split b, and each item as the uint64 (n-n0)<<b | (id-id0):
// within a leaf that packed order is the (n, id) order, so a leaf is
// searched as plain integers. An item that does not fit a leaf's bases
// and split re-packs the leaf; a leaf whose range cannot be packed in 64
// bits is split (one item always fits).
//
// The shapes a queue writes are cheap: a load or a put appends past the
// last item, which fills the last leaf before it starts another (leaves
// stay full); a claim takes from the first leaf, whose items and, once
// empty, itself leave by re-slicing, in O(1). Only the writer, under the
// write lock, changes a numSet; a walk must not change it.
type numSet struct {
	leaves []*numLeaf
	// firsts[i] is leaves[i]'s least item: a search finds its leaf in one
	// array, not a leaf's memory per step.
	firsts []numItem
	n      int
}

// numLeafMax is the most items a leaf holds: an insert moves up to this
// many words, and a leaf's header (about 56 bytes with its place in
// leaves and firsts) is spread over this many.
const numLeafMax = 512

type numLeaf struct {
	n0, id0 int64
	b       uint // the id's bits; the number has the 64-b above them
	items   []uint64
}

func (l *numLeaf) get(i int) numItem {
	v := l.items[i]
	return numItem{n: int64(uint64(l.n0) + v>>l.b), id: int64(uint64(l.id0) + v&(1<<l.b-1))}
}

// pack returns k packed in l, and false when it does not fit l's bases
// and split. Shifts by 64 are 0 in Go, which b == 0 and b == 64 rely on.
func (l *numLeaf) pack(k numItem) (uint64, bool) {
	if k.n < l.n0 || k.id < l.id0 {
		return 0, false
	}
	dn, di := uint64(k.n)-uint64(l.n0), uint64(k.id)-uint64(l.id0)
	if dn>>(64-l.b) != 0 || di>>l.b != 0 {
		return 0, false
	}
	return dn<<l.b | di, true
}

// search returns where k is in l, or would go, and whether it is there.
func (l *numLeaf) search(k numItem) (int, bool) {
	if v, ok := l.pack(k); ok {
		return slices.BinarySearch(l.items, v)
	}
	// k does not pack, so it is not in l: find its place by the values.
	i := sort.Search(len(l.items), func(i int) bool { return !lessNum(l.get(i), k) })
	return i, false
}

// upper returns how many items of l are at most k.
func (l *numLeaf) upper(k numItem) int {
	i, found := l.search(k)
	if found {
		i++
	}
	return i
}

// layout returns the bases and split that pack every item of l and k, and
// false when their range does not fit 64 bits (idBits).
func (l *numLeaf) layout(k numItem, with bool) (n0, id0 int64, b uint, ok bool) {
	n0, n1 := int64(math.MaxInt64), int64(math.MinInt64)
	id0, id1 := int64(math.MaxInt64), int64(math.MinInt64)
	if len(l.items) > 0 {
		n0, n1 = l.get(0).n, l.get(len(l.items)-1).n
		for i := range l.items {
			id := l.get(i).id
			id0, id1 = min(id0, id), max(id1, id)
		}
	}
	if with {
		n0, n1, id0, id1 = min(n0, k.n), max(n1, k.n), min(id0, k.id), max(id1, k.id)
	}
	b, ok = idBits(n0, n1, id0, id1)
	return n0, id0, b, ok
}

// idBits returns the split that packs numbers n0..n1 and ids id0..id1 in
// 64 bits, and false when their ranges do not fit. The spare bits are
// shared between the number and the id, so that items a little past the
// range (the next job's later run_at, its higher id) still pack.
func idBits(n0, n1, id0, id1 int64) (uint, bool) {
	ln, li := uint(bits.Len64(uint64(n1)-uint64(n0))), uint(bits.Len64(uint64(id1)-uint64(id0)))
	if ln+li > 64 {
		return 0, false
	}
	return li + (64-ln-li)/2, true
}

// repack packs l's items anew with these bases and split, which fit them.
func (l *numLeaf) repack(n0, id0 int64, b uint) {
	old := *l
	l.n0, l.id0, l.b = n0, id0, b
	for i := range l.items {
		v, _ := l.pack(old.get(i))
		l.items[i] = v
	}
}

// grow makes room for one more item: the room grows by a quarter (by
// double while small), never past numLeafMax, so a full leaf holds no
// spare room.
func (l *numLeaf) grow() {
	if len(l.items) < cap(l.items) {
		return
	}
	c := cap(l.items)
	if c < 64 {
		c = max(2*c, 4)
	} else {
		c += c / 4
	}
	l.items = append(make([]uint64, 0, min(c, numLeafMax)), l.items...)
}

func newLeaf(k numItem) *numLeaf {
	l := &numLeaf{n0: k.n, id0: k.id, b: 32, items: make([]uint64, 1, 4)}
	return l
}

// Len returns the number of items.
func (s *numSet) Len() int { return s.n }

// leafFor returns the leaf k is in or would go in: the last whose first
// item is at most k, or the first. There is at least one leaf.
func (s *numSet) leafFor(k numItem) int {
	lo, hi := 0, len(s.firsts)
	for lo < hi {
		mid := int(uint(lo+hi) >> 1)
		if !lessNum(k, s.firsts[mid]) {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	return max(lo-1, 0)
}

func (s *numSet) insertLeaf(i int, l *numLeaf) {
	s.leaves = slices.Insert(s.leaves, i, l)
	s.firsts = slices.Insert(s.firsts, i, l.get(0))
}

func (s *numSet) removeLeaf(i int) {
	if i == 0 {
		// The first leaf goes by re-slicing: a queue's claims empty its
		// leaves from the front.
		s.leaves[0] = nil
		s.leaves, s.firsts = s.leaves[1:], s.firsts[1:]
		return
	}
	s.leaves = slices.Delete(s.leaves, i, i+1)
	s.firsts = slices.Delete(s.firsts, i, i+1)
}

// Set adds k; it reports false when k was there already (nothing changes).
func (s *numSet) Set(k numItem) bool {
	if len(s.leaves) == 0 {
		s.leaves, s.firsts, s.n = []*numLeaf{newLeaf(k)}, []numItem{k}, 1
		return true
	}
	li := s.leafFor(k)
	l := s.leaves[li]
	pos, found := l.search(k)
	if found {
		return false
	}
	s.n++
	if pos == len(l.items) && li == len(s.leaves)-1 {
		// Past the last item: the last leaf fills before another starts.
		if len(l.items) < numLeafMax && s.insertFits(li, pos, k) {
			return true
		}
		s.insertLeaf(li+1, newLeaf(k))
		return true
	}
	if len(l.items) >= numLeafMax {
		li, pos = s.split(li, pos)
	}
	for !s.insertFits(li, pos, k) {
		if len(s.leaves[li].items) == 1 {
			// Alone, k fits.
			s.insertLeaf(li+pos, newLeaf(k))
			return true
		}
		li, pos = s.split(li, pos)
	}
	return true
}

// insertFits puts k at pos of leaf li, re-packing the leaf if k needs it,
// and reports false (nothing changed) when k and the leaf's items cannot
// be packed together.
func (s *numSet) insertFits(li, pos int, k numItem) bool {
	l := s.leaves[li]
	v, ok := l.pack(k)
	if !ok {
		n0, id0, b, fits := l.layout(k, true)
		if !fits {
			return false
		}
		l.repack(n0, id0, b)
		v, _ = l.pack(k)
	}
	l.grow()
	l.items = slices.Insert(l.items, pos, v)
	if pos == 0 {
		s.firsts[li] = k
	}
	return true
}

// split moves the upper half of leaf li to a new leaf after it, each half
// packed anew in room of its own length, and returns where pos of leaf li
// now is.
func (s *numSet) split(li, pos int) (int, int) {
	l := s.leaves[li]
	h := len(l.items) / 2
	r := &numLeaf{n0: l.n0, id0: l.id0, b: l.b, items: slices.Clone(l.items[h:])}
	l.items = slices.Clone(l.items[:h])
	for _, x := range []*numLeaf{l, r} {
		if n0, id0, b, ok := x.layout(numItem{}, false); ok {
			x.repack(n0, id0, b)
		}
	}
	s.insertLeaf(li+1, r)
	if pos > h {
		return li + 1, pos - h
	}
	return li, pos
}

// Delete removes k; it reports false when k was not there.
func (s *numSet) Delete(k numItem) bool {
	if len(s.leaves) == 0 {
		return false
	}
	li := s.leafFor(k)
	l := s.leaves[li]
	pos, found := l.search(k)
	if !found {
		return false
	}
	s.n--
	if len(l.items) == 1 {
		s.removeLeaf(li)
		return true
	}
	if pos == 0 {
		l.items = l.items[1:] // a claim's: the front moves, no item does
		s.firsts[li] = l.get(0)
	} else {
		l.items = slices.Delete(l.items, pos, pos+1)
	}
	if len(l.items) < numLeafMax/4 {
		// A leaf mostly emptied joins a neighbour that has room (when
		// they pack together), so that scattered deletes leave no trail
		// of near-empty leaves. The first leaf, which claims empty from
		// the front, is left to empty.
		switch {
		case li > 0 && li+1 < len(s.leaves) && len(l.items)+len(s.leaves[li+1].items) <= numLeafMax/2:
			s.merge(li)
		case li > 1 && len(l.items)+len(s.leaves[li-1].items) <= numLeafMax/2:
			s.merge(li - 1)
		}
	}
	return true
}

// merge moves leaf li+1's items to the end of leaf li, when the two pack
// together.
func (s *numSet) merge(li int) {
	l, r := s.leaves[li], s.leaves[li+1]
	m := &numLeaf{items: make([]uint64, 0, len(l.items)+len(r.items))}
	m.n0, m.id0 = l.get(0).n, min(l.id0, r.id0)
	n1 := r.get(len(r.items) - 1).n
	id1 := int64(math.MinInt64)
	for _, x := range []*numLeaf{l, r} {
		for i := range x.items {
			id1 = max(id1, x.get(i).id)
		}
	}
	b, ok := idBits(m.n0, n1, m.id0, id1)
	if !ok {
		return
	}
	m.b = b
	for _, x := range []*numLeaf{l, r} {
		for i := range x.items {
			v, _ := m.pack(x.get(i))
			m.items = append(m.items, v)
		}
	}
	s.leaves[li] = m
	s.leaves = slices.Delete(s.leaves, li+1, li+2)
	s.firsts = slices.Delete(s.firsts, li+1, li+2)
}

// Min returns the least item.
func (s *numSet) Min() (numItem, bool) {
	if s.n == 0 {
		return numItem{}, false
	}
	return s.firsts[0], true
}

// GetAt returns the i-th item in ascending order, walking the leaves'
// lengths from the nearer end: the engine asks near the front (a queue's
// head, eviction's hot head).
func (s *numSet) GetAt(i int) (numItem, bool) {
	if i < 0 || i >= s.n {
		return numItem{}, false
	}
	if i < s.n/2 {
		for _, l := range s.leaves {
			if i < len(l.items) {
				return l.get(i), true
			}
			i -= len(l.items)
		}
	}
	j := s.n - 1 - i // from the back
	for k := len(s.leaves) - 1; k >= 0; k-- {
		l := s.leaves[k]
		if j < len(l.items) {
			return l.get(len(l.items) - 1 - j), true
		}
		j -= len(l.items)
	}
	return numItem{}, false
}

// CountTo returns how many items have a number of at most n: a queue's
// due jobs, n being now.
func (s *numSet) CountTo(n int64) int {
	if s.n == 0 {
		return 0
	}
	k := numItem{n, math.MaxInt64}
	li := s.leafFor(k)
	in := s.leaves[li].upper(k)
	if li < len(s.leaves)/2 {
		c := in
		for _, l := range s.leaves[:li] {
			c += len(l.items)
		}
		return c
	}
	c := s.n - (len(s.leaves[li].items) - in)
	for _, l := range s.leaves[li+1:] {
		c -= len(l.items)
	}
	return c
}

// Scan calls fn with every item in ascending order until it returns false.
func (s *numSet) Scan(fn func(numItem) bool) { s.ascendFrom(0, 0, fn) }

// Ascend calls fn with the items at or after p in ascending order until it
// returns false.
func (s *numSet) Ascend(p numItem, fn func(numItem) bool) {
	if s.n == 0 {
		return
	}
	li := s.leafFor(p)
	pos, _ := s.leaves[li].search(p)
	s.ascendFrom(li, pos, fn)
}

func (s *numSet) ascendFrom(li, pos int, fn func(numItem) bool) {
	for ; li < len(s.leaves); li, pos = li+1, 0 {
		l := s.leaves[li]
		for ; pos < len(l.items); pos++ {
			if !fn(l.get(pos)) {
				return
			}
		}
	}
}

// Reverse calls fn with every item in descending order until it returns
// false.
func (s *numSet) Reverse(fn func(numItem) bool) {
	if s.n == 0 {
		return
	}
	li := len(s.leaves) - 1
	s.descendFrom(li, len(s.leaves[li].items)-1, fn)
}

// Descend calls fn with the items at or before p in descending order
// until it returns false.
func (s *numSet) Descend(p numItem, fn func(numItem) bool) {
	if s.n == 0 {
		return
	}
	li := s.leafFor(p)
	s.descendFrom(li, s.leaves[li].upper(p)-1, fn)
}

func (s *numSet) descendFrom(li, pos int, fn func(numItem) bool) {
	for ; li >= 0; li-- {
		l := s.leaves[li]
		if pos >= len(l.items) {
			pos = len(l.items) - 1
		}
		for ; pos >= 0; pos-- {
			if !fn(l.get(pos)) {
				return
			}
		}
		pos = math.MaxInt
	}
}

// compact packs every item anew into full leaves, each in room of its own
// length: after a load (compact.go), and wherever leaves were split.
func (s *numSet) compact() {
	if s.n == 0 {
		*s = numSet{}
		return
	}
	if s.packed() {
		return // filled in key order: a copy would cost as much again, for nothing
	}
	var c numSet
	c.leaves = make([]*numLeaf, 0, (s.n+numLeafMax-1)/numLeafMax)
	c.firsts = make([]numItem, 0, cap(c.leaves))
	var buf []numItem
	flush := func() {
		// buf's items pack together (checked as they came): one leaf.
		l := &numLeaf{items: make([]uint64, len(buf))}
		l.n0, l.id0 = buf[0].n, buf[0].id
		n1, id1 := buf[len(buf)-1].n, buf[0].id
		for _, it := range buf {
			l.id0, id1 = min(l.id0, it.id), max(id1, it.id)
		}
		l.b, _ = idBits(l.n0, n1, l.id0, id1)
		for i, it := range buf {
			l.items[i], _ = l.pack(it)
		}
		c.leaves = append(c.leaves, l)
		c.firsts = append(c.firsts, buf[0])
		buf = buf[:0]
	}
	var id0, id1 int64
	for i, l := range s.leaves {
		for j := range l.items {
			it := l.get(j)
			if len(buf) > 0 {
				lo, hi := min(id0, it.id), max(id1, it.id)
				ln := bits.Len64(uint64(it.n) - uint64(buf[0].n))
				if len(buf) == numLeafMax || ln+bits.Len64(uint64(hi)-uint64(lo)) > 64 {
					flush()
				}
			}
			if len(buf) == 0 {
				id0, id1 = it.id, it.id
			}
			id0, id1 = min(id0, it.id), max(id1, it.id)
			buf = append(buf, it)
		}
		s.leaves[i] = nil // copied: the collector may take it while the rest are
	}
	flush()
	c.n = s.n
	*s = c
}

// packed reports whether every leaf but the last is full, in room of its
// own length: as a load or puts in key order leave them.
func (s *numSet) packed() bool {
	for _, l := range s.leaves[:len(s.leaves)-1] {
		if len(l.items) != numLeafMax || cap(l.items) != numLeafMax {
			return false
		}
	}
	return true
}
