package engine

import (
	"slices"
	"sync/atomic"
)

// docMap is a collection's documents by id, in id order: a sorted list of
// pages of up to pageMax documents each. It costs about 8 bytes a
// document where ids run without gaps, as those a collection hands out
// do, and 16 where they do not; a B-tree map costs 32 (bench/results/
// memory.md): its items are an id and a pointer, and ids given in order
// leave its nodes half full, where they fill docMap's pages.
type docMap struct {
	pages []*docPage // in id order; none empty
	n     int
	// track: Get marks the page it reads (docPage.ref) for eviction's
	// clock (evict.go); set only under a memory limit.
	track bool
}

// pageMax is the most documents a page holds: a page's insert moves up to
// this many pointers, and the list of pages is a page per pageMax docs.
const pageMax = 256

// docPage holds documents of ascending ids, base the first. A dense page
// (keys nil) holds the ids base, base+1, … with no gap: a document's place
// is its id less base. Another keeps each document's id in keys.
//
// A page whose every row is evicted (evict.go) keeps no slots: docs is nil
// and cold is how many rows it has, each evictedDoc. Under --memory most
// pages end so, and an evicted row then costs its page's share of the
// header (a dense page: about a quarter of a byte) where its slot cost 8
// bytes (docs/operations.md, "Memory"). A write into such a page gives it
// its slots back first (thaw); eviction's clock and the load's eviction
// drop them again (dropSlots).
type docPage struct {
	base int64
	keys []int64
	docs []*Doc
	// ref is set by a point read (docMap.Get, when tracked) and cleared
	// by eviction's clock hand: a page read since the hand last passed
	// gets a second chance (evict.go).
	ref  atomic.Bool
	cold int32 // the rows of a page without slots (docs nil); else 0
}

// len returns the number of documents of p.
func (p *docPage) len() int {
	if p.docs == nil {
		return int(p.cold)
	}
	return len(p.docs)
}

// doc returns p's i-th document: evictedDoc in a page without slots.
func (p *docPage) doc(i int) *Doc {
	if p.docs == nil {
		return evictedDoc
	}
	return p.docs[i]
}

// dropSlots drops p's slots when every row of it is evicted, and reports
// whether p is now without them.
func (p *docPage) dropSlots() bool {
	if p.docs == nil {
		return true
	}
	for _, d := range p.docs {
		if d != evictedDoc {
			return false
		}
	}
	p.cold = int32(len(p.docs))
	p.docs = nil
	if p.keys != nil && cap(p.keys) > len(p.keys) {
		p.keys = slices.Clip(slices.Clone(p.keys))
	}
	return true
}

// dropSlotsAt drops the slots of the page holding id when id is the last
// of a full page and every row of it is evicted (docPage.dropSlots).
func (m *docMap) dropSlotsAt(id int64) {
	if len(m.pages) == 0 {
		return
	}
	if p := m.pages[m.page(id)]; p.len() == pageMax && p.key(pageMax-1) == id {
		p.dropSlots()
	}
}

// thaw gives a page without slots its slots back, each evictedDoc, before
// a write changes it.
func (p *docPage) thaw() {
	if p.docs != nil {
		return
	}
	p.docs = make([]*Doc, p.cold)
	for i := range p.docs {
		p.docs[i] = evictedDoc
	}
	p.cold = 0
}

func (p *docPage) key(i int) int64 {
	if p.keys == nil {
		return p.base + int64(i)
	}
	return p.keys[i]
}

// find returns where id is in p, or would go, and whether it is there.
func (p *docPage) find(id int64) (int, bool) {
	if p.keys == nil {
		if id < p.base {
			return 0, false
		}
		// Unsigned: ids span the whole int64 range (a file written
		// before ids were held to 1..MaxID), and id - base may not fit.
		if i := uint64(id) - uint64(p.base); i < uint64(p.len()) {
			return int(i), true
		}
		return p.len(), false
	}
	return slices.BinarySearch(p.keys, id)
}

// sparse gives p keys, when it has none.
func (p *docPage) sparse() {
	if p.keys != nil {
		return
	}
	p.keys = make([]int64, len(p.docs), cap(p.docs))
	for i := range p.keys {
		p.keys[i] = p.base + int64(i)
	}
}

// grow makes room in p for one more document.
func (p *docPage) grow() {
	if len(p.docs) < cap(p.docs) {
		return
	}
	c := min(max(2*cap(p.docs), 4), pageMax)
	p.docs = append(make([]*Doc, 0, c), p.docs...)
	if p.keys != nil {
		p.keys = append(make([]int64, 0, c), p.keys...)
	}
}

// shrink returns the room of a page that lost most of its documents.
func (p *docPage) shrink() {
	if cap(p.docs) <= 8 || len(p.docs) >= cap(p.docs)/4 {
		return
	}
	c := max(2*len(p.docs), 4)
	p.docs = append(make([]*Doc, 0, c), p.docs...)
	if p.keys != nil {
		p.keys = append(make([]int64, 0, c), p.keys...)
	}
}

func (p *docPage) insert(i int, id int64, d *Doc) {
	// The page stays dense for the id after its last or before its first
	// (each written so as not to overflow: id is past the last, or before
	// the first).
	if p.keys == nil && !(i == len(p.docs) && id-1 == p.key(i-1)) && !(i == 0 && id+1 == p.base) {
		p.sparse()
	}
	p.grow()
	p.docs = slices.Insert(p.docs, i, d)
	if p.keys != nil {
		p.keys = slices.Insert(p.keys, i, id)
	}
	if i == 0 {
		p.base = id
	}
}

func (p *docPage) remove(i int) {
	if p.keys == nil && i != 0 && i != len(p.docs)-1 {
		p.sparse()
	}
	if i == 0 {
		// The first goes by moving the page's start, not its documents:
		// a queue's acks delete its oldest jobs, the pages' fronts.
		p.docs[0] = nil
		p.docs = p.docs[1:]
		if p.keys != nil {
			p.keys = p.keys[1:]
		}
	} else {
		p.docs = slices.Delete(p.docs, i, i+1)
		if p.keys != nil {
			p.keys = slices.Delete(p.keys, i, i+1)
		}
	}
	if p.keys != nil {
		p.base = p.keys[0]
	} else if i == 0 {
		p.base++
	}
	p.shrink()
}

// page returns the page that holds id or would: the last whose base is at
// most id, or the first. There is at least one page.
func (m *docMap) page(id int64) int {
	lo, hi := 0, len(m.pages)
	for lo < hi {
		mid := int(uint(lo+hi) >> 1)
		if m.pages[mid].base <= id {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	return max(lo-1, 0)
}

// Len returns the number of documents.
func (m *docMap) Len() int { return m.n }

// Get returns the document of id.
func (m *docMap) Get(id int64) (*Doc, bool) {
	if len(m.pages) == 0 {
		return nil, false
	}
	p := m.pages[m.page(id)]
	if i, ok := p.find(id); ok {
		if m.track && !p.ref.Load() {
			p.ref.Store(true)
		}
		return p.doc(i), true
	}
	return nil, false
}

// peek is Get without marking the page read.
func (m *docMap) peek(id int64) (*Doc, bool) {
	if len(m.pages) == 0 {
		return nil, false
	}
	p := m.pages[m.page(id)]
	if i, ok := p.find(id); ok {
		return p.doc(i), true
	}
	return nil, false
}

// Set stores d under id and returns the document it replaced.
func (m *docMap) Set(id int64, d *Doc) (*Doc, bool) {
	if len(m.pages) == 0 {
		m.pages = append(m.pages, &docPage{base: id, docs: []*Doc{d}})
		m.n++
		return nil, false
	}
	pi := m.page(id)
	p := m.pages[pi]
	i, ok := p.find(id)
	if ok {
		p.thaw()
		old := p.docs[i]
		p.docs[i] = d
		return old, true
	}
	m.n++
	if p.len() == pageMax && i == pageMax && pi == len(m.pages)-1 {
		// Past the last id: a new page, so that ids given in order
		// leave every page full.
		m.pages = append(m.pages, &docPage{base: id, docs: append(make([]*Doc, 0, pageMax), d)})
		return nil, false
	}
	p.thaw()
	if len(p.docs) == pageMax {
		q := p.split()
		m.pages = slices.Insert(m.pages, pi+1, q)
		if id >= q.base {
			p = q
		}
		i, _ = p.find(id)
	}
	p.insert(i, id, d)
	return nil, false
}

// split moves the upper half of p's documents to a new page and returns it.
func (p *docPage) split() *docPage {
	h := len(p.docs) / 2
	q := &docPage{base: p.key(h), docs: append(make([]*Doc, 0, pageMax), p.docs[h:]...)}
	if p.keys != nil {
		q.keys = append(make([]int64, 0, pageMax), p.keys[h:]...)
		clear(p.keys[h:])
		p.keys = p.keys[:h]
	}
	clear(p.docs[h:])
	p.docs = p.docs[:h]
	return q
}

// Delete removes the document of id and returns it.
func (m *docMap) Delete(id int64) (*Doc, bool) {
	if len(m.pages) == 0 {
		return nil, false
	}
	pi := m.page(id)
	p := m.pages[pi]
	i, ok := p.find(id)
	if !ok {
		return nil, false
	}
	p.thaw()
	old := p.docs[i]
	m.n--
	if len(p.docs) == 1 {
		m.pages = slices.Delete(m.pages, pi, pi+1)
		return old, true
	}
	p.remove(i)
	if len(p.docs) < pageMax/4 {
		// A page mostly emptied joins a neighbour that has room, so that
		// scattered deletes leave no trail of near-empty pages.
		switch {
		case pi+1 < len(m.pages) && len(p.docs)+m.pages[pi+1].len() <= pageMax/2:
			m.merge(pi)
		case pi > 0 && len(p.docs)+m.pages[pi-1].len() <= pageMax/2:
			m.merge(pi - 1)
		}
	}
	return old, true
}

// merge moves page pi+1's documents to the end of page pi.
func (m *docMap) merge(pi int) {
	p, q := m.pages[pi], m.pages[pi+1]
	p.thaw()
	q.thaw()
	n := len(p.docs) + len(q.docs)
	dense := p.keys == nil && q.keys == nil && q.base-1 == p.key(len(p.docs)-1)
	docs := append(append(make([]*Doc, 0, max(2*n, 4)), p.docs...), q.docs...)
	if !dense {
		p.sparse()
		q.sparse()
		p.keys = append(append(make([]int64, 0, cap(docs)), p.keys...), q.keys...)
	}
	p.docs = docs
	m.pages = slices.Delete(m.pages, pi+1, pi+2)
}

// Scan calls fn with each document in id order until it returns false.
func (m *docMap) Scan(fn func(id int64, d *Doc) bool) {
	for _, p := range m.pages {
		for i := range p.len() {
			if !fn(p.key(i), p.doc(i)) {
				return
			}
		}
	}
}
