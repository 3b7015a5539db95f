package engine

import "github.com/tidwall/btree"

// A B-tree filled in key order (ids as a collection hands them out, a
// @sorted text field's values as they come) keeps its leaves half empty:
// a full leaf splits in two, the left half is never written again, and it
// keeps the whole node's array, twice the room its items need. A load
// fills every index that way, so once the file is loaded each tree is
// copied node by node (compactTree). The btree package copies a node into
// an array of the node's capacity, and a split leaves each half a
// capacity of its length: the copies of the halves are full, and the
// tree costs about half (docs/architecture.md, "Memory"). Later writes
// split and grow nodes as before. An int or timestamp index (a queue's
// run_at) is a numSet, which fills its leaves in key order already; its
// compaction packs leaves split by writes in other orders full again.

// compactTree returns tr with every node copied anew. It is the btree
// package's copy on write: a copy of the tree, then a scan that may write
// (ScanMut) takes each node as its own, copying it. tr is not used after.
func compactTree[T any](tr *btree.BTreeG[T]) *btree.BTreeG[T] {
	if tr == nil || tr.Len() == 0 {
		return tr
	}
	c := tr.IsoCopy()
	c.ScanMut(func(T) bool { return true })
	return c
}

// compacter is an index whose trees compact copies.
type compacter interface{ compact() }

func (x *sortedIndex) compact() {
	x.tr, x.nulls = compactTree(x.tr), compactTree(x.nulls)
	x.addHint, x.removeHint = btree.PathHint{}, btree.PathHint{}
	if x.nums != nil {
		x.nums.compact() // numSet's own: full leaves (numset.go)
	}
}

func (q *queueIndex) compact() {
	q.timed.compact()
	q.owned.compact()
}

// compact copies c's index trees anew (compactTree), once it is loaded.
func (c *Collection) compact() {
	for _, x := range c.indexes {
		if t, ok := x.(compacter); ok {
			t.compact()
		}
	}
}
