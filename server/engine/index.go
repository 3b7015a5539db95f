package engine

import (
	"math"
	"strconv"

	"github.com/fenecdb/fenec/server/fenecql"
	"github.com/tidwall/btree"
	"github.com/tidwall/rtree"
)

// index is one field's index. Documents enter and leave it whole; a write
// that replaces a document removes the old one and adds the new.
type index interface {
	add(d *Doc)
	remove(d *Doc)
}

// unmoved is an index that can tell when a write leaves a document where
// it was: Collection.set then neither removes nor adds it (a set of other
// fields keeps its place in every index).
type unmoved interface {
	same(old, d *Doc) bool
}

// sameValue reports whether two values of one field hold the same place
// in an index: equal, and of one kind, so the item kept is as good as the
// one that would replace it.
func sameValue(a, b fenecql.Value) bool {
	return a.Kind() == b.Kind() && fenecql.Compare(a, b) == 0
}

// sortedItem is a sorted index's key: the value, then the id, so equal
// values stay in id order.
type sortedItem struct {
	v  fenecql.Value
	id int64
}

func lessSorted(a, b sortedItem) bool {
	if c := fenecql.Compare(a.v, b.v); c != 0 {
		return c < 0
	}
	return a.id < b.id
}

// sortedIndex (@sorted) answers ranges and ordered walks both ways. Nulls
// are kept too (they sort first) so a walk in order sees every document,
// but a range never includes them.
type sortedIndex struct {
	field int
	tr    *btree.BTreeG[sortedItem]
	// Where the last add and the last remove went down the tree: a
	// queue's writes cluster (claims take from the front of run_at, put
	// jobs back near the end, acks remove those), and a search that
	// starts from the hint compares less. Only the writer, under the
	// write lock, uses them.
	addHint, removeHint btree.PathHint
}

func newSortedIndex(field int) *sortedIndex {
	return &sortedIndex{field: field, tr: btree.NewBTreeGOptions(lessSorted, btree.Options{NoLocks: true})}
}

func (x *sortedIndex) add(d *Doc) { x.tr.SetHint(sortedItem{d.Vals[x.field], d.ID}, &x.addHint) }
func (x *sortedIndex) remove(d *Doc) {
	x.tr.DeleteHint(sortedItem{d.Vals[x.field], d.ID}, &x.removeHint)
}
func (x *sortedIndex) same(old, d *Doc) bool { return sameValue(old.Vals[x.field], d.Vals[x.field]) }

// bound is one end of a range over a sorted index.
type bound struct {
	v         fenecql.Value
	inclusive bool
	set       bool
}

// walk calls fn with the ids in [lo, hi] (each end open, closed or
// absent) in ascending or descending value order; equal values come in
// ascending id order either way. Nulls are walked only when neither end
// is set. It stops when fn answers false.
func (x *sortedIndex) walk(lo, hi bound, desc bool, fn func(id int64) bool) {
	inLo := func(v fenecql.Value) bool {
		if !lo.set {
			return true
		}
		c := fenecql.Compare(v, lo.v)
		return c > 0 || c == 0 && lo.inclusive
	}
	inHi := func(v fenecql.Value) bool {
		if !hi.set {
			return true
		}
		c := fenecql.Compare(v, hi.v)
		return c < 0 || c == 0 && hi.inclusive
	}
	ranged := lo.set || hi.set
	if !desc {
		iter := func(it sortedItem) bool {
			if ranged && it.v.IsNull() {
				return true
			}
			if !inHi(it.v) {
				return false
			}
			if !inLo(it.v) {
				return true
			}
			return fn(it.id)
		}
		if lo.set {
			pivot := sortedItem{lo.v, math.MinInt64}
			if !lo.inclusive {
				pivot.id = math.MaxInt64
			}
			x.tr.Ascend(pivot, iter)
		} else {
			x.tr.Scan(iter)
		}
		return
	}
	// Descending: a run of equal values is gathered and handed out in
	// ascending id order, since ties always break by ascending id.
	var run []int64
	var runV fenecql.Value
	stopped := false
	flush := func() bool {
		for i := len(run) - 1; i >= 0; i-- {
			if !fn(run[i]) {
				stopped = true
				return false
			}
		}
		run = run[:0]
		return true
	}
	iter := func(it sortedItem) bool {
		if ranged && it.v.IsNull() {
			return false
		}
		if !inLo(it.v) {
			return false
		}
		if !inHi(it.v) {
			return true
		}
		if len(run) > 0 && fenecql.Compare(runV, it.v) != 0 && !flush() {
			return false
		}
		runV = it.v
		run = append(run, it.id)
		return true
	}
	if hi.set {
		pivot := sortedItem{hi.v, math.MaxInt64}
		if !hi.inclusive {
			pivot.id = math.MinInt64
		}
		x.tr.Descend(pivot, iter)
	} else {
		x.tr.Reverse(iter)
	}
	if !stopped {
		flush()
	}
}

// next answers the first non-null value after v (strictly, or at or after
// it when inclusive) in ascending order: the next moment a range bound by
// time can change its answer.
func (x *sortedIndex) next(v fenecql.Value, inclusive bool) (fenecql.Value, bool) {
	var out fenecql.Value
	found := false
	pivot := sortedItem{v, math.MaxInt64}
	if inclusive {
		pivot.id = math.MinInt64
	}
	x.tr.Ascend(pivot, func(it sortedItem) bool {
		if it.v.IsNull() {
			return true
		}
		out, found = it.v, true
		return false
	})
	return out, found
}

// hashKey is the equality key of a value: numbers that are equal under
// Compare share a key, whatever their kind.
func hashKey(v fenecql.Value) string {
	switch v.Kind() {
	case fenecql.KindInt, fenecql.KindTime:
		return "n" + strconv.FormatInt(v.Int(), 10)
	case fenecql.KindFloat:
		f := v.Float()
		if f == math.Trunc(f) && math.Abs(f) < 1<<62 {
			return "n" + strconv.FormatInt(int64(f), 10)
		}
		return "f" + strconv.FormatFloat(f, 'g', -1, 64)
	case fenecql.KindText:
		return "t" + v.Text()
	case fenecql.KindBool:
		if v.Bool() {
			return "b1"
		}
		return "b0"
	}
	return "j" + string(fenecql.AppendJSON(nil, v))
}

// hashIndex (@hash, and @unique with unique set) answers equality and in.
// Nulls are not kept: equality with null is never true.
type hashIndex struct {
	field  int
	unique bool
	m      map[string][]int64
}

func newHashIndex(field int, unique bool) *hashIndex {
	return &hashIndex{field: field, unique: unique, m: map[string][]int64{}}
}

func (x *hashIndex) add(d *Doc) {
	v := d.Vals[x.field]
	if v.IsNull() {
		return
	}
	k := hashKey(v)
	x.m[k] = append(x.m[k], d.ID)
}

func (x *hashIndex) remove(d *Doc) {
	v := d.Vals[x.field]
	if v.IsNull() {
		return
	}
	k := hashKey(v)
	ids := x.m[k]
	for i, id := range ids {
		if id == d.ID {
			ids[i] = ids[len(ids)-1]
			ids = ids[:len(ids)-1]
			break
		}
	}
	if len(ids) == 0 {
		delete(x.m, k)
	} else {
		x.m[k] = ids
	}
}

// lookup answers the ids holding v, in no order.
func (x *hashIndex) lookup(v fenecql.Value) []int64 {
	if v.IsNull() {
		return nil
	}
	return x.m[hashKey(v)]
}

// geoIndex (@geo) answers nearest-first walks and boxes over points.
type geoIndex struct {
	field int
	tr    rtree.RTreeG[int64]
	nulls *btree.Map[int64, struct{}]
}

func newGeoIndex(field int) *geoIndex {
	return &geoIndex{field: field, nulls: btree.NewMap[int64, struct{}](32)}
}

func point(v fenecql.Value) ([2]float64, bool) {
	l := v.List()
	if len(l) != 2 || !l[0].IsNumber() || !l[1].IsNumber() {
		return [2]float64{}, false
	}
	return [2]float64{l[0].Number(), l[1].Number()}, true
}

func (x *geoIndex) add(d *Doc) {
	if p, ok := point(d.Vals[x.field]); ok {
		x.tr.Insert(p, p, d.ID)
		return
	}
	x.nulls.Set(d.ID, struct{}{})
}

func (x *geoIndex) remove(d *Doc) {
	if p, ok := point(d.Vals[x.field]); ok {
		x.tr.Delete(p, p, d.ID)
		return
	}
	x.nulls.Delete(d.ID)
}

// nearest walks the ids nearest p first (documents without a point first
// of all, as null sorts first); equal distances come in ascending id order.
func (x *geoIndex) nearest(p [2]float64, fn func(id int64) bool) {
	stopped := false
	x.nulls.Scan(func(id int64, _ struct{}) bool {
		if !fn(id) {
			stopped = true
		}
		return !stopped
	})
	if stopped {
		return
	}
	var run []int64
	runD := -1.0
	flush := func() bool {
		sortIDs(run)
		for _, id := range run {
			if !fn(id) {
				stopped = true
				return false
			}
		}
		run = run[:0]
		return true
	}
	x.tr.Nearby(func(min, max [2]float64, _ int64, _ bool) float64 {
		return boxDistance(p, min, max)
	}, func(_, _ [2]float64, id int64, d float64) bool {
		if len(run) > 0 && d != runD && !flush() {
			return false
		}
		runD = d
		run = append(run, id)
		return true
	})
	if !stopped {
		flush()
	}
}

// box walks the ids whose point lies in [min, max] (lon, lat), in no order.
func (x *geoIndex) box(min, max [2]float64, fn func(id int64) bool) {
	x.tr.Search(min, max, func(_, _ [2]float64, id int64) bool { return fn(id) })
}
