package engine

import "github.com/tidwall/btree"

// A B-tree filled in key order (a queue's run_at as jobs are put, ids as
// a collection hands them out) keeps its leaves half empty: a full leaf
// splits in two, the left half is never written again, and it keeps the
// whole node's array, twice the room its items need. A load fills every
// index that way, so once the file is loaded each tree is copied node by
// node (compactTree). The btree package copies a node into an array of
// the node's capacity, and a split leaves each half a capacity of its
// length: the copies of the halves are full, and the tree costs about
// half (docs/architecture.md, "Memory"). Later writes split and grow
// nodes as before.

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
	x.tr, x.nums, x.nulls = compactTree(x.tr), compactTree(x.nums), compactTree(x.nulls)
	x.addHint, x.removeHint = btree.PathHint{}, btree.PathHint{}
}

func (q *queueIndex) compact() {
	q.timed, q.owned = compactTree(q.timed), compactTree(q.owned)
	q.timedAdd, q.timedRemove, q.ownedAdd, q.ownedRemove = btree.PathHint{}, btree.PathHint{}, btree.PathHint{}, btree.PathHint{}
}

// compact copies c's index trees anew (compactTree), once it is loaded.
func (c *Collection) compact() {
	for _, x := range c.indexes {
		if t, ok := x.(compacter); ok {
			t.compact()
		}
	}
}
