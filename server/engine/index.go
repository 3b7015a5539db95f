package engine

import (
	"math"
	"strconv"
	"strings"

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
//
// An int or timestamp field's index (nums) holds the number itself rather
// than the value: its items hold no pointer, so a node's items shift
// without write barriers and the collector has nothing in them to scan,
// and they compare as integers. A queue's run_at is one: each claimed job
// leaves it and comes back, each acked job leaves it. Its nulls are kept
// apart, in nulls (ids), so that an item is the number and the id, 16
// bytes, and no flag that would round it up to 24; numSet packs them
// further, to about 8 (numset.go).
type sortedIndex struct {
	field int
	tr    *btree.BTreeG[sortedItem] // nil when nums is used
	nums  *numSet                   // nil when tr is used
	nulls *btree.BTreeG[int64]      // the ids whose value is null, beside nums
	kind  fenecql.Kind              // the kind of nums' values: KindInt or KindTime
	// Where the last add and the last remove went down tr: a
	// queue's writes cluster (claims take from the front of run_at, put
	// jobs back near the end, acks remove those), and a search that
	// starts from the hint compares less. Only the writer, under the
	// write lock, uses them.
	addHint, removeHint btree.PathHint
}

// numItem is an int or timestamp index's key: the number, then the id,
// as lessSorted orders them.
type numItem struct{ n, id int64 }

func lessNum(a, b numItem) bool {
	if a.n != b.n {
		return a.n < b.n
	}
	return a.id < b.id
}

func lessID(a, b int64) bool { return a < b }

func newSortedIndex(field int, t fenecql.Type) *sortedIndex {
	opts := btree.Options{NoLocks: true}
	x := &sortedIndex{field: field}
	switch t {
	case fenecql.TypeInt:
		x.nums, x.kind = &numSet{}, fenecql.KindInt
		x.nulls = btree.NewBTreeGOptions(lessID, opts)
	case fenecql.TypeTimestamp:
		x.nums, x.kind = &numSet{}, fenecql.KindTime
		x.nulls = btree.NewBTreeGOptions(lessID, opts)
	default:
		x.tr = btree.NewBTreeGOptions(lessSorted, opts)
	}
	return x
}

// num is v's key in nums, v not null (the schema holds an int field to
// ints and a timestamp field to timestamps).
func num(v fenecql.Value, id int64) numItem { return numItem{n: v.Int(), id: id} }

// item is nums' key as the value it stands for.
func (x *sortedIndex) item(it numItem) sortedItem {
	if x.kind == fenecql.KindTime {
		return sortedItem{fenecql.Time(it.n), it.id}
	}
	return sortedItem{fenecql.Int(it.n), it.id}
}

func nullItem(id int64) sortedItem { return sortedItem{fenecql.Null, id} }

// pivot is a walk's starting key in nums: p itself, or for a float the
// nearest key on the walk's side of it. null is true for a null p (the
// walk starts among the nulls, at p's id); ok is false for a value of
// another kind: the walk then starts at its end, and its own bounds skip
// what lies before p.
func pivot(p sortedItem, desc bool) (k numItem, null, ok bool) {
	switch p.v.Kind() {
	case fenecql.KindNull:
		return numItem{id: p.id}, true, true
	case fenecql.KindInt, fenecql.KindTime:
		return num(p.v, p.id), false, true
	case fenecql.KindFloat:
		f := p.v.Float()
		if math.IsNaN(f) || f <= math.MinInt64 || f >= math.MaxInt64 {
			return numItem{}, false, false
		}
		if f == math.Trunc(f) {
			return numItem{n: int64(f), id: p.id}, false, true
		}
		if desc {
			return numItem{n: int64(math.Floor(f)), id: math.MaxInt64}, false, true
		}
		return numItem{n: int64(math.Ceil(f)), id: math.MinInt64}, false, true
	}
	return numItem{}, false, false
}

// ascend calls iter with the items from p on (every item when p is nil),
// in ascending order, until it returns false.
func (x *sortedIndex) ascend(p *sortedItem, iter func(sortedItem) bool) {
	if x.tr != nil {
		if p == nil {
			x.tr.Scan(iter)
		} else {
			x.tr.Ascend(*p, iter)
		}
		return
	}
	stopped := false
	eachNull := func(id int64) bool {
		stopped = !iter(nullItem(id))
		return !stopped
	}
	each := func(it numItem) bool { return iter(x.item(it)) }
	if p != nil {
		k, null, ok := pivot(*p, false)
		switch {
		case ok && null:
			if x.nulls.Ascend(k.id, eachNull); !stopped {
				x.nums.Scan(each)
			}
			return
		case ok:
			x.nums.Ascend(k, each)
			return
		}
	}
	if x.nulls.Scan(eachNull); !stopped {
		x.nums.Scan(each)
	}
}

// ascendValues is ascend from the first item that is not null.
func (x *sortedIndex) ascendValues(iter func(sortedItem) bool) {
	if x.tr != nil {
		// false is the least value that is not null (fenecql.Compare).
		x.tr.Ascend(sortedItem{fenecql.Bool(false), math.MinInt64}, iter)
		return
	}
	x.nums.Scan(func(it numItem) bool { return iter(x.item(it)) })
}

// descend is ascend the other way: from p down.
func (x *sortedIndex) descend(p *sortedItem, iter func(sortedItem) bool) {
	if x.tr != nil {
		if p == nil {
			x.tr.Reverse(iter)
		} else {
			x.tr.Descend(*p, iter)
		}
		return
	}
	stopped := false
	eachNull := func(id int64) bool { return iter(nullItem(id)) }
	each := func(it numItem) bool {
		stopped = !iter(x.item(it))
		return !stopped
	}
	if p != nil {
		k, null, ok := pivot(*p, true)
		switch {
		case ok && null:
			x.nulls.Descend(k.id, eachNull)
			return
		case ok:
			if x.nums.Descend(k, each); !stopped {
				x.nulls.Reverse(eachNull)
			}
			return
		}
	}
	if x.nums.Reverse(each); !stopped {
		x.nulls.Reverse(eachNull)
	}
}

// len returns the number of items; at the i-th in ascending order.
func (x *sortedIndex) len() int {
	if x.tr != nil {
		return x.tr.Len()
	}
	return x.nulls.Len() + x.nums.Len()
}

func (x *sortedIndex) at(i int) (sortedItem, bool) {
	if x.tr != nil {
		return x.tr.GetAt(i)
	}
	nn := x.nulls.Len()
	if i < nn {
		id, ok := x.nulls.GetAt(i)
		return nullItem(id), ok
	}
	it, ok := x.nums.GetAt(i - nn)
	return x.item(it), ok
}

func (x *sortedIndex) add(d *Doc) {
	v := d.val(x.field)
	switch {
	case x.tr != nil:
		x.tr.SetHint(sortedItem{own(v), d.ID}, &x.addHint)
	case v.IsNull():
		x.nulls.Set(d.ID)
	default:
		x.nums.Set(num(v, d.ID))
	}
}

func (x *sortedIndex) remove(d *Doc) {
	v := d.val(x.field)
	switch {
	case x.tr != nil:
		x.tr.DeleteHint(sortedItem{v, d.ID}, &x.removeHint)
	case v.IsNull():
		x.nulls.Delete(d.ID)
	default:
		x.nums.Delete(num(v, d.ID))
	}
}

func (x *sortedIndex) same(old, d *Doc) bool { return sameValue(old.val(x.field), d.val(x.field)) }

// own returns v holding bytes of its own. A document's text and JSON
// values share its block (row.go); an index item that outlives the
// document (a later write that leaves the value in place keeps the item)
// would keep the whole block alive, so the item copies what it keeps.
func own(v fenecql.Value) fenecql.Value {
	switch v.Kind() {
	case fenecql.KindText:
		return fenecql.Text(strings.Clone(v.Text()))
	case fenecql.KindList, fenecql.KindObject:
		return fenecql.Packed(v.Kind(), fenecql.AppendJSON(nil, v))
	}
	return v
}

// bound is one end of a range over a sorted index.
type bound struct {
	v         fenecql.Value
	inclusive bool
	set       bool
}

// walk calls fn with the ids in [lo, hi] (each end open, closed or
// absent) in ascending or descending value order; equal values come in
// ascending id order either way. Nulls are walked only when neither end
// is set. It stops when fn returns false.
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
		switch {
		case lo.set:
			from := sortedItem{lo.v, math.MinInt64}
			if !lo.inclusive {
				from.id = math.MaxInt64
			}
			x.ascend(&from, iter)
		case ranged:
			// The nulls, first, are no part of a range: the walk starts
			// past them rather than stepping over each. A queue's dead and
			// kept jobs are nulls of run_at, and a claim is this walk.
			x.ascendValues(iter)
		default:
			x.ascend(nil, iter)
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
		from := sortedItem{hi.v, math.MaxInt64}
		if !hi.inclusive {
			from.id = math.MinInt64
		}
		x.descend(&from, iter)
	} else {
		x.descend(nil, iter)
	}
	if !stopped {
		flush()
	}
}

// next returns the first non-null value after v (strictly, or at or after
// it when inclusive) in ascending order: the next moment a range bound by
// time can change its answer.
func (x *sortedIndex) next(v fenecql.Value, inclusive bool) (fenecql.Value, bool) {
	var out fenecql.Value
	found := false
	from := sortedItem{v, math.MaxInt64}
	if inclusive {
		from.id = math.MinInt64
	}
	x.ascend(&from, func(it sortedItem) bool {
		if it.v.IsNull() {
			return true
		}
		// The walk may have started before v (ascend's pivot): what
		// lies before it is not next.
		if c := fenecql.Compare(it.v, v); c < 0 || c == 0 && !inclusive {
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
//
// A text field's keys are its texts themselves (a text field holds only
// texts, so no kind need be told apart), copied once, not led by hashKey's
// kind byte. A @unique index keeps one id per key in one, and a second
// holder of a key (a file written before the index was unique) in more:
// an id where a list of ids would cost a slice per key
// (bench/results/memory.md).
type hashIndex struct {
	field  int
	unique bool
	text   bool
	m      map[string][]int64 // @hash
	one    map[string]int64   // @unique
	more   map[string][]int64 // @unique: holders past one's
}

func newHashIndex(field int, unique bool, t fenecql.Type) *hashIndex {
	x := &hashIndex{field: field, unique: unique, text: t == fenecql.TypeText}
	if unique {
		x.one, x.more = map[string]int64{}, map[string][]int64{}
	} else {
		x.m = map[string][]int64{}
	}
	return x
}

// key returns v's key; false when no key of the index can equal it.
func (x *hashIndex) key(v fenecql.Value) (string, bool) {
	switch {
	case v.IsNull():
		return "", false
	case !x.text:
		return hashKey(v), true
	case v.Kind() != fenecql.KindText:
		return "", false
	}
	return v.Text(), true
}

func (x *hashIndex) add(d *Doc) {
	k, ok := x.key(d.val(x.field))
	if !ok {
		return
	}
	if x.text {
		// The text shares the document's block (row.go): the key is a
		// copy, so that it keeps no block alive.
		k = strings.Clone(k)
	}
	if !x.unique {
		x.m[k] = append(x.m[k], d.ID)
		return
	}
	if _, held := x.one[k]; held {
		x.more[k] = append(x.more[k], d.ID)
		return
	}
	x.one[k] = d.ID
}

// without returns ids less id.
func without(ids []int64, id int64) []int64 {
	for i, v := range ids {
		if v == id {
			ids[i] = ids[len(ids)-1]
			return ids[:len(ids)-1]
		}
	}
	return ids
}

func (x *hashIndex) remove(d *Doc) {
	k, ok := x.key(d.val(x.field))
	if !ok {
		return
	}
	if !x.unique {
		if ids := without(x.m[k], d.ID); len(ids) == 0 {
			delete(x.m, k)
		} else {
			x.m[k] = ids
		}
		return
	}
	more := x.more[k]
	if x.one[k] == d.ID {
		if len(more) == 0 {
			delete(x.one, k)
			return
		}
		x.one[k] = more[len(more)-1]
		more = more[:len(more)-1]
	} else {
		more = without(more, d.ID)
	}
	if len(more) == 0 {
		delete(x.more, k)
	} else {
		x.more[k] = more
	}
}

// appendIDs appends the ids holding v, in no order, to dst.
func (x *hashIndex) appendIDs(dst []int64, v fenecql.Value) []int64 {
	k, ok := x.key(v)
	if !ok {
		return dst
	}
	if !x.unique {
		return append(dst, x.m[k]...)
	}
	if id, held := x.one[k]; held {
		dst = append(append(dst, id), x.more[k]...)
	}
	return dst
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
	if p, ok := point(d.val(x.field)); ok {
		x.tr.Insert(p, p, d.ID)
		return
	}
	x.nulls.Set(d.ID, struct{}{})
}

func (x *geoIndex) remove(d *Doc) {
	if p, ok := point(d.val(x.field)); ok {
		x.tr.Delete(p, p, d.ID)
		return
	}
	x.nulls.Delete(d.ID)
}

// nearest walks the ids nearest p first (documents without a point first
// of all, as null sorts first, unless pointsOnly); equal distances come in
// ascending id order.
func (x *geoIndex) nearest(p [2]float64, pointsOnly bool, fn func(id int64) bool) {
	stopped := false
	if !pointsOnly {
		x.nulls.Scan(func(id int64, _ struct{}) bool {
			if !fn(id) {
				stopped = true
			}
			return !stopped
		})
	}
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
