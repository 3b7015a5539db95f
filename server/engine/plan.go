package engine

import (
	"context"
	"fmt"
	"slices"

	"github.com/fenecdb/fenec/server/fenecql"
)

// access is how a plan reaches its candidate rows.
type access uint8

const (
	accScan    access = iota // every document, ascending id
	accIDs                   // id = / id in
	accHash                  // a @hash or @unique equality or in
	accRange                 // a range of a @sorted index
	accWalk                  // a @sorted index walked in the order asked
	accNearest               // a @geo index walked nearest-first
	accBox                   // a @geo index searched by box
)

var accessNames = [...]string{"scan", "id", "hash", "range", "walk", "nearest", "box"}

// plan is how one statement picks its rows: the access path, whether that
// path already yields the statement's order, and the counts explain shows.
type plan struct {
	c     *Collection
	where fenecql.Expr
	// scope is the policy's filter for a scoped token, one term per rule
	// (nil: none). A row no term admits is hidden: as PostgreSQL's row security does, it
	// is decided before any of the statement's own expressions run on
	// the row, so no error, count or explain figure depends on a hidden
	// row (docs/access.md, How rules combine).
	scope  []fenecql.Expr
	order  []fenecql.OrderKey
	limit  int // -1: none
	offset int
	env    *fenecql.Env

	acc     access
	field   int // the indexed field, -1 for id/scan
	ids     []int64
	lo, hi  bound
	desc    bool
	point   [2]float64
	boxMin  [2]float64
	boxMax  [2]float64
	ordered bool // the access path yields rows in the statement's order
	near    bool // the statement's near: rows without a point are none of its

	// rest is what of the statement's where the access leaves to the row
	// filter, when reduced (restOf): the access reaches only rows that
	// meet the other terms already.
	rest     fenecql.Expr
	reduced  bool
	oneID    [1]int64        // room for ids of `id = $1`, the commonest
	room     []*Doc          // room for the picked rows (tx.docRoom); may be nil
	rowsRead int             // the rows tested that the scope admits
	ctx      context.Context // the request's, asked every checkEvery rows; nil: never
	visited  int
	rd       *reader // a read's hold on the lock, asked every row (yield.go); nil in a write
	// count has collect count the rows it picks rather than return them,
	// in counted: a count of a million rows needs no list of a million
	// (garbage that a server collecting at GOGC=400 would hold resident
	// long after, docs/operations.md "Memory"). Set for a count with no
	// limit, offset or sort (pickFor).
	count   bool
	counted int
}

// conjuncts splits a filter on its top-level ands.
func conjuncts(e fenecql.Expr, out []fenecql.Expr) []fenecql.Expr {
	if b, ok := e.(*fenecql.Binary); ok && b.Op == fenecql.OpAnd {
		return conjuncts(b.R, conjuncts(b.L, out))
	}
	if e != nil {
		out = append(out, e)
	}
	return out
}

// isConst reports whether e reads no row: it is worked out once per
// statement, with now() fixed, before the plan is made.
func isConst(e fenecql.Expr) bool {
	reads := false
	fenecql.Walk(e, func(x fenecql.Expr) {
		_, isRef := x.(*fenecql.Ref)
		reads = reads || isRef
	})
	return !reads
}

// fieldRef returns the field a plain one-element reference names: its
// position, or -2 for id; ok is false for anything else.
func (c *Collection) fieldRef(e fenecql.Expr) (int, bool) {
	r, ok := e.(*fenecql.Ref)
	if !ok || len(r.Path) != 1 {
		return 0, false
	}
	if r.Path[0] == "id" {
		return -2, true
	}
	f := c.field(r.Path[0])
	return f, f >= 0
}

// flip returns the comparison op with its sides swapped (a < b is b > a);
// ok is false for an op that is no ordering comparison. A switch, not a
// map: every term of every statement's plan asks.
func flip(op fenecql.Op) (fenecql.Op, bool) {
	switch op {
	case fenecql.OpEq:
		return fenecql.OpEq, true
	case fenecql.OpLt:
		return fenecql.OpGt, true
	case fenecql.OpLe:
		return fenecql.OpGe, true
	case fenecql.OpGt:
		return fenecql.OpLt, true
	case fenecql.OpGe:
		return fenecql.OpLe, true
	}
	return 0, false
}

// cmpTerm is a conjunct `field op constant`, the constant worked out.
type cmpTerm struct {
	field int
	op    fenecql.Op
	v     fenecql.Value
	// exact: v is the constant as the statement gave it, not null, and of
	// the field's kind (no coercion), so a @sorted walk bounded by it
	// reaches exactly the rows the term, evaluated, holds true for.
	exact bool
}

// asCmp recognises `field op const` or `const op field`.
func (p *plan) asCmp(e fenecql.Expr) (cmpTerm, bool, error) {
	b, ok := e.(*fenecql.Binary)
	if !ok {
		return cmpTerm{}, false, nil
	}
	op, ok := flip(b.Op)
	if !ok {
		return cmpTerm{}, false, nil
	}
	f, isField := p.c.fieldRef(b.L)
	k := b.R
	if !isField || !isConst(k) {
		if f, isField = p.c.fieldRef(b.R); !isField || !isConst(b.L) {
			return cmpTerm{}, false, nil
		}
		k = b.L
	} else {
		op = b.Op
	}
	v, err := fenecql.Eval(k, p.env)
	if err != nil {
		return cmpTerm{}, false, err
	}
	if f >= 0 {
		// A constant of another kind is brought to the field's type (a
		// timestamp given as text); one that will not go leaves the
		// comparison to the row-by-row filter.
		cv, err := fenecql.Coerce(v, p.c.s.fields[f].Type)
		if err != nil || p.c.s.fields[f].Type == fenecql.TypeJSON {
			return cmpTerm{}, false, nil
		}
		exact := !v.IsNull() && cv.Kind() == v.Kind()
		return cmpTerm{field: f, op: op, v: cv, exact: exact}, true, nil
	}
	return cmpTerm{field: f, op: op, v: v}, true, nil
}

// newPlan chooses the access path for a statement's where and order, made
// in p (a transaction's, used by one statement at a time).
func newPlan(p *plan, c *Collection, cl *fenecql.Clauses, env *fenecql.Env) (*plan, error) {
	*p = plan{c: c, where: cl.Where, order: cl.Order, limit: -1, env: env, field: -1, near: cl.Near != nil}
	var err error
	if cl.Limit != nil {
		if p.limit, err = countArg(cl.Limit, env, "limit"); err != nil {
			return nil, err
		}
	}
	if cl.Offset != nil {
		if p.offset, err = countArg(cl.Offset, env, "offset"); err != nil {
			return nil, err
		}
	}
	if cl.Near != nil && cl.Near.Exact {
		// `near … exact` measures every row and sorts them: no index, so
		// that it can check the @geo walk's answer (docs/fenecql.md, near).
		p.acc = accScan
		return p.finish(), nil
	}
	var room [4]fenecql.Expr // a worker's filters have a few terms: no allocation
	terms := conjuncts(cl.Where, room[:0])

	// Equality on id or a hash: the fewest rows. The pick and the ranges
	// are kept by value, in room on the stack: a worker's ack and claim
	// plan without an allocation.
	var hashPick cmpTerm
	picked := false
	var hashVals []fenecql.Value
	var rangeRoom [4]fieldRange
	ranges := rangeRoom[:0]
	// exact[i] is the @sorted field terms[i] compares with a constant
	// its walk compares with as the filter does (cmpTerm.exact), or -1.
	var exact [len(room)]int
	for i, t := range terms {
		if i < len(exact) {
			exact[i] = -1
		}
		if in, ok := t.(*fenecql.In); ok && !in.Not && isConst(in.List) {
			f, isField := c.fieldRef(in.X)
			if !isField {
				continue
			}
			lv, err := fenecql.Eval(in.List, env)
			if err != nil {
				return nil, err
			}
			if lv.Kind() != fenecql.KindList {
				continue
			}
			if f == -2 {
				p.acc, p.ids = accIDs, idsOf(lv.List())
				p.restOf(terms, func(k int) bool { return k == i })
				return p.finish(), nil
			}
			if _, isHash := c.byField[f].(*hashIndex); isHash && !picked {
				hashPick, picked, hashVals = cmpTerm{field: f}, true, lv.List()
			}
			continue
		}
		ct, ok, err := p.asCmp(t)
		if err != nil {
			return nil, err
		}
		if !ok {
			continue
		}
		if ct.field == -2 {
			if ct.op == fenecql.OpEq {
				p.acc, p.ids = accIDs, p.oneID[:0]
				if id, ok := asID(ct.v); ok {
					p.ids = append(p.ids, id)
				}
				p.restOf(terms, func(k int) bool { return k == i })
				return p.finish(), nil
			}
			continue
		}
		x := c.byField[ct.field]
		if h, isHash := x.(*hashIndex); isHash && ct.op == fenecql.OpEq {
			if h.unique || !picked {
				hashPick, picked, hashVals = ct, true, []fenecql.Value{ct.v}
			}
			continue
		}
		if _, isSorted := x.(*sortedIndex); isSorted {
			var r *[2]bound
			if r = rangeOf(ranges, ct.field); r == nil {
				ranges = append(ranges, fieldRange{field: ct.field})
				r = &ranges[len(ranges)-1].r
			}
			narrow(r, ct)
			if i < len(exact) && ct.exact {
				exact[i] = ct.field
			}
		}
	}
	onField := func(k int) bool { return len(terms) <= len(exact) && exact[k] == p.field }
	if picked {
		h := c.byField[hashPick.field].(*hashIndex)
		if h.unique || !p.walkable() {
			p.acc, p.field = accHash, hashPick.field
			for _, v := range hashVals {
				p.ids = h.appendIDs(p.ids, v)
			}
			sortIDs(p.ids)
			p.ids = slices.Compact(p.ids)
			return p.finish(), nil
		}
	}
	// An order the index can walk, stopping at the page.
	if len(p.order) == 1 {
		k := p.order[0]
		if f, ok := c.fieldRef(k.Expr); ok && f >= 0 {
			if _, isSorted := c.byField[f].(*sortedIndex); isSorted {
				p.acc, p.field, p.desc, p.ordered = accWalk, f, k.Desc, true
				if r := rangeOf(ranges, f); r != nil {
					p.lo, p.hi = r[0], r[1]
					p.restOf(terms, onField)
				}
				return p.finish(), nil
			}
		}
		if call, ok := k.Expr.(*fenecql.Call); ok && call.Name == "distance" && !k.Desc && len(call.Args) == 2 {
			f, isField := c.fieldRef(call.Args[0])
			if isField && f >= 0 && isConst(call.Args[1]) {
				if _, isGeo := c.byField[f].(*geoIndex); isGeo {
					pv, err := fenecql.Eval(call.Args[1], env)
					if err != nil {
						return nil, err
					}
					if pt, ok := point(pv); ok {
						p.acc, p.field, p.point, p.ordered = accNearest, f, pt, true
						return p.finish(), nil
					}
				}
			}
		}
	}
	// A range over a sorted index; the tightest-looking one wins.
	for _, fr := range ranges {
		if r := fr.r; p.acc != accRange || (r[0].set && r[1].set) {
			p.acc, p.field, p.lo, p.hi = accRange, fr.field, r[0], r[1]
		}
	}
	if p.acc == accRange {
		p.restOf(terms, onField)
		return p.finish(), nil
	}
	if box, f, ok, err := p.geoBox(terms); err != nil {
		return nil, err
	} else if ok {
		p.acc, p.field, p.boxMin, p.boxMax = accBox, f, box[0], box[1]
		return p.finish(), nil
	}
	p.acc = accScan
	return p.finish(), nil
}

// restOf notes what of the where the access leaves to the row filter,
// held(i) telling the terms it holds true already for every row it
// reaches: an id lookup its id term (each id reached equals the term's
// constant, or one in its list), a @sorted walk the exact comparisons
// (cmpTerm.exact) on its field, which its bounds are the tightest of.
// With every term held the rows need no filter; with one other, a
// comparison or an in, that one alone filters them: an and whose other
// terms are true answers it, and runs it on every row, so its value and
// its errors are the same. Anything else keeps the whole where.
//
// A claim's `where run_at <= now()` and an ack's `where id = $1 and owner
// = $2` are then no evaluation and one comparison a row, not two and
// three.
func (p *plan) restOf(terms []fenecql.Expr, held func(i int) bool) {
	var rest fenecql.Expr
	for i, t := range terms {
		if held(i) {
			continue
		}
		if rest != nil {
			return
		}
		rest = t
	}
	switch r := rest.(type) {
	case nil, *fenecql.In:
	case *fenecql.Binary:
		if _, ok := flip(r.Op); !ok && r.Op != fenecql.OpNe {
			return
		}
	default:
		return
	}
	p.rest, p.reduced = rest, true
}

// fieldRange is the range a statement's comparisons put on one @sorted
// field: its low and high bounds.
type fieldRange struct {
	field int
	r     [2]bound
}

// rangeOf returns field f's range among rs, or nil.
func rangeOf(rs []fieldRange, f int) *[2]bound {
	for i := range rs {
		if rs[i].field == f {
			return &rs[i].r
		}
	}
	return nil
}

// walkable reports whether the order is one the indexes can walk.
func (p *plan) walkable() bool {
	if len(p.order) != 1 {
		return false
	}
	if f, ok := p.c.fieldRef(p.order[0].Expr); ok && f >= 0 {
		_, isSorted := p.c.byField[f].(*sortedIndex)
		return isSorted
	}
	return false
}

// finish notes whether rows come out in the statement's order already:
// with no order asked, an access in ascending id is ordered.
func (p *plan) finish() *plan {
	if len(p.order) == 0 {
		p.ordered = p.acc == accScan || p.acc == accIDs || p.acc == accHash
	}
	return p
}

// narrow tightens a range with one comparison.
func narrow(r *[2]bound, t cmpTerm) {
	lo := bound{v: t.v, inclusive: t.op == fenecql.OpGe || t.op == fenecql.OpEq, set: true}
	hi := bound{v: t.v, inclusive: t.op == fenecql.OpLe || t.op == fenecql.OpEq, set: true}
	if t.op != fenecql.OpLt && t.op != fenecql.OpLe {
		if !r[0].set || tighterLo(lo, r[0]) {
			r[0] = lo
		}
	}
	if t.op != fenecql.OpGt && t.op != fenecql.OpGe {
		if !r[1].set || tighterHi(hi, r[1]) {
			r[1] = hi
		}
	}
}

func tighterLo(a, b bound) bool {
	c := fenecql.Compare(a.v, b.v)
	return c > 0 || c == 0 && !a.inclusive
}

func tighterHi(a, b bound) bool {
	c := fenecql.Compare(a.v, b.v)
	return c < 0 || c == 0 && !a.inclusive
}

// geoBox recognises within(geofield, box) or distance(geofield, p) <= r
// over a @geo index, and returns the lon/lat box to search.
func (p *plan) geoBox(terms []fenecql.Expr) ([2][2]float64, int, bool, error) {
	for _, t := range terms {
		switch t := t.(type) {
		case *fenecql.Call:
			if t.Name != "within" || len(t.Args) != 2 || !isConst(t.Args[1]) {
				continue
			}
			f, ok := p.geoField(t.Args[0])
			if !ok {
				continue
			}
			bv, err := fenecql.Eval(t.Args[1], p.env)
			if err != nil {
				return [2][2]float64{}, 0, false, err
			}
			l := bv.List()
			if len(l) != 4 || !l[0].IsNumber() || !l[1].IsNumber() || !l[2].IsNumber() || !l[3].IsNumber() {
				continue
			}
			w, s, e, n := l[0].Number(), l[1].Number(), l[2].Number(), l[3].Number()
			if w > e {
				continue // crosses the antimeridian: two boxes; left to the filter
			}
			return [2][2]float64{{w, s}, {e, n}}, f, true, nil
		case *fenecql.Binary:
			if t.Op != fenecql.OpLe && t.Op != fenecql.OpLt || !isConst(t.R) {
				continue
			}
			call, ok := t.L.(*fenecql.Call)
			if !ok || call.Name != "distance" || len(call.Args) != 2 || !isConst(call.Args[1]) {
				continue
			}
			f, ok := p.geoField(call.Args[0])
			if !ok {
				continue
			}
			pv, err := fenecql.Eval(call.Args[1], p.env)
			if err != nil {
				return [2][2]float64{}, 0, false, err
			}
			rv, err := fenecql.Eval(t.R, p.env)
			if err != nil {
				return [2][2]float64{}, 0, false, err
			}
			pt, ok := point(pv)
			if !ok || !rv.IsNumber() {
				continue
			}
			if box, ok := radiusBox(pt, rv.Number()); ok {
				return box, f, true, nil
			}
		}
	}
	return [2][2]float64{}, 0, false, nil
}

func (p *plan) geoField(e fenecql.Expr) (int, bool) {
	f, ok := p.c.fieldRef(e)
	if !ok || f < 0 {
		return 0, false
	}
	_, isGeo := p.c.byField[f].(*geoIndex)
	return f, isGeo
}

// countArg works out a limit, offset or require: a whole number ≥ 0.
func countArg(e fenecql.Expr, env *fenecql.Env, what string) (int, error) {
	v, err := fenecql.Eval(e, env)
	if err != nil {
		return 0, err
	}
	if v.Kind() != fenecql.KindInt || v.Int() < 0 || v.Int() > 1<<31 {
		return 0, fenecql.Errorf(e.Position(), "%s must be a whole number from 0, found %s", what, short(v))
	}
	return int(v.Int()), nil
}

func idsOf(vs []fenecql.Value) []int64 {
	ids := make([]int64, 0, len(vs))
	for _, v := range vs {
		if id, ok := asID(v); ok {
			ids = append(ids, id)
		}
	}
	sortIDs(ids)
	return slices.Compact(ids)
}

func sortIDs(ids []int64) { slices.Sort(ids) }

// short renders a value for an error message.
func short(v fenecql.Value) string {
	s := string(fenecql.AppendJSON(nil, v))
	if len(s) > 40 {
		s = s[:37] + "..."
	}
	return s
}

// describe is the plan as explain shows it.
func (p *plan) describe() string {
	name := accessNames[p.acc]
	switch p.acc {
	case accScan:
		return "scan " + p.c.Name
	case accIDs:
		return fmt.Sprintf("id lookup %s (%d ids)", p.c.Name, len(p.ids))
	case accHash:
		if p.scope != nil {
			// The index's count would include rows the token may not see.
			return fmt.Sprintf("hash %s.%s", p.c.Name, p.c.s.fields[p.field].Name)
		}
		return fmt.Sprintf("hash %s.%s (%d ids)", p.c.Name, p.c.s.fields[p.field].Name, len(p.ids))
	}
	s := fmt.Sprintf("%s %s.%s", name, p.c.Name, p.c.s.fields[p.field].Name)
	if p.acc == accRange || p.acc == accWalk {
		if p.lo.set || p.hi.set {
			s += " " + rangeText(p.lo, p.hi)
		}
		if p.desc {
			s += " desc"
		}
	}
	return s
}

func rangeText(lo, hi bound) string {
	s := "(-inf"
	if lo.set {
		s = "(" + short(lo.v)
		if lo.inclusive {
			s = "[" + short(lo.v)
		}
	}
	if hi.set {
		if hi.inclusive {
			return s + ", " + short(hi.v) + "]"
		}
		return s + ", " + short(hi.v) + ")"
	}
	return s + ", +inf)"
}

// asID returns the id a value names, if it names one: an integer, or a
// float with no fraction.
func asID(v fenecql.Value) (int64, bool) {
	if v.Kind() == fenecql.KindInt {
		return v.Int(), true
	} else if v.Kind() == fenecql.KindFloat && v.Float() == float64(int64(v.Float())) {
		return int64(v.Float()), true
	}
	return 0, false
}
