package engine

import (
	"errors"
	"slices"

	"github.com/fenecdb/fenec/server/fenecql"
)

// ErrNothingTaken answers a run with RunOptions.OnlyIfTakes whose set and
// del statements would take no row: it was undone, and nothing written.
var ErrNothingTaken = errors.New("the request takes no row")

// writes returns the set and del statements of a request, the ones a held
// claim waits on.
func writes(ps []Parsed) []Parsed {
	if !slices.ContainsFunc(ps, func(p Parsed) bool { return !isWrite(p.Stmt) }) {
		// Every statement a write (a held claim is most often one set):
		// ps itself, not a copy made at each look of every round.
		return ps
	}
	var out []Parsed
	for _, p := range ps {
		if isWrite(p.Stmt) {
			out = append(out, p)
		}
	}
	return out
}

func isWrite(s fenecql.Stmt) bool {
	switch s.(type) {
	case *fenecql.Set, *fenecql.Del:
		return true
	}
	return false
}

// ClausesOf returns a get, set or del's collection and row-picking
// clauses; nil clauses for any other statement.
func ClausesOf(s fenecql.Stmt) (string, *fenecql.Clauses) {
	switch s := s.(type) {
	case *fenecql.Set:
		return s.Coll, &s.Clauses
	case *fenecql.Del:
		return s.Coll, &s.Clauses
	case *fenecql.Get:
		return s.Coll, &s.Clauses
	}
	return "", nil
}

// writeGrant is the grant a set (update) or del (delete) needs.
func writeGrant(s fenecql.Stmt) Grant {
	if _, isDel := s.(*fenecql.Del); isDel {
		return GrantDelete
	}
	return GrantUpdate
}

// Holdable checks that a request may be held until it takes a row: it
// holds a set or del, and beside them only reads; and every filter reads the time
// only as a field compared with now() ± a number, since only then can the
// moment its answer changes be worked out.
func Holdable(ps []Parsed) error {
	n := 0
	for _, p := range ps {
		switch s := p.Stmt.(type) {
		case *fenecql.Set, *fenecql.Del:
			n++
		case *fenecql.Get:
		default:
			return fenecql.Errorf(s.Position(), "only a set or del is held until it takes a row, and this %s writes every time", verbOf(s))
		}
		_, cl := ClausesOf(p.Stmt)
		if err := timeReads(cl.Where); err != nil {
			return err
		}
	}
	if n == 0 {
		return fenecql.Errorf(0, "a request is held until its set or del takes a row, and this request has none")
	}
	return nil
}

func verbOf(s fenecql.Stmt) string {
	switch s := s.(type) {
	case *fenecql.Put:
		if s.Insert {
			return "insert"
		}
		return "put"
	case *fenecql.CreateCollection:
		return "create"
	case *fenecql.DropCollection:
		return "drop"
	}
	return "statement"
}

// timeTerm is a comparison `field op now() + k` in a filter.
type timeTerm struct {
	field string
	op    fenecql.Op
	k     fenecql.Expr // nil for k = 0
	neg   bool         // now() - k
}

// nowOffset recognises now(), now() + k and now() - k, k a number literal
// or a parameter.
func nowOffset(e fenecql.Expr) (k fenecql.Expr, neg, ok bool) {
	if c, isCall := e.(*fenecql.Call); isCall && c.Name == "now" {
		return nil, false, true
	}
	b, isBin := e.(*fenecql.Binary)
	if !isBin || b.Op != fenecql.OpAdd && b.Op != fenecql.OpSub {
		return nil, false, false
	}
	c, isCall := b.L.(*fenecql.Call)
	if !isCall || c.Name != "now" {
		return nil, false, false
	}
	switch r := b.R.(type) {
	case *fenecql.Param:
	case *fenecql.Lit:
		if !r.Val.IsNumber() {
			return nil, false, false
		}
	default:
		return nil, false, false
	}
	return b.R, b.Op == fenecql.OpSub, true
}

// asTimeTerm recognises `field op now() ± k` either way round.
func asTimeTerm(e fenecql.Expr) (timeTerm, bool) {
	b, ok := e.(*fenecql.Binary)
	if !ok {
		return timeTerm{}, false
	}
	switch b.Op {
	case fenecql.OpLt, fenecql.OpLe, fenecql.OpGt, fenecql.OpGe:
	default:
		return timeTerm{}, false
	}
	field, other, op := b.L, b.R, b.Op
	if _, isRef := field.(*fenecql.Ref); !isRef {
		field, other = b.R, b.L
		op, _ = flip(b.Op) // an ordering comparison (the switch above)
	}
	r, isRef := field.(*fenecql.Ref)
	if !isRef || len(r.Path) != 1 {
		return timeTerm{}, false
	}
	k, neg, ok := nowOffset(other)
	if !ok {
		return timeTerm{}, false
	}
	return timeTerm{field: r.Path[0], op: op, k: k, neg: neg}, true
}

// timeReads refuses a filter that reads now() other than in a time term.
func timeReads(e fenecql.Expr) error {
	var err error
	var visit func(fenecql.Expr)
	visit = func(x fenecql.Expr) {
		if err != nil || x == nil {
			return
		}
		if _, ok := asTimeTerm(x); ok {
			return
		}
		if c, ok := x.(*fenecql.Call); ok && c.Name == "now" {
			err = fenecql.Errorf(c.Pos, "a held claim's filter reads the time only as a field compared with now() give or take a number (run_at <= now() + 500), since only then can the server tell when its answer changes")
			return
		}
		fenecql.Children(x, visit)
	}
	visit(e)
	return err
}

// Bid is what one held request would take if it ran now: whether it takes
// a row, and the first order key of the first row it would take, by which
// claims that rank rows by their own point bid for a row.
type Bid struct {
	Takes bool
	Key   fenecql.Value
	Desc  bool
	Err   error
	// Due is, when it takes nothing, the moment its filter's answer can
	// next change by time alone (HasDue false: never).
	Due    int64
	HasDue bool
}

// Look returns, for each request, what it would take now, all under one
// read lock and writing nothing.
func (db *DB) Look(reqs [][]Parsed) []Bid { return db.LookInto(nil, reqs) }

// LookInto is Look writing its bids into dst's array when it has room: a
// caller looking round after round over a thousand held claims reuses one.
func (db *DB) LookInto(dst []Bid, reqs [][]Parsed) []Bid {
	db.mu.RLock()
	defer db.mu.RUnlock()
	now := db.clock.NowMS()
	out := slices.Grow(dst[:0], len(reqs))[:len(reqs)]
	// One tx for every look: a round of a thousand held claims would
	// otherwise allocate a thousand (a tx holds its plan and its rows'
	// room), and claims parsed from the same text share their clauses,
	// which pick then checks once.
	t := &tx{db: db}
	for i, ps := range reqs {
		out[i] = db.look(t, ps, now)
	}
	return out
}

// look returns what ps would take now; t is a tx used by one look at a
// time, each setting what it reads.
func (db *DB) look(t *tx, ps []Parsed, now int64) Bid {
	for _, p := range writes(ps) {
		name, cl := ClausesOf(p.Stmt)
		c := db.colls[name]
		if c == nil {
			return Bid{Err: fenecql.CodeErrorf(fenecql.CodeUnknown, p.Stmt.Position(), "no collection %s", name)}
		}
		if err := p.Scope.ended(now); err != nil {
			return Bid{Err: err}
		}
		t.scope, t.upd = p.Scope, nil
		t.env = fenecql.Env{Params: p.Params, Now: now}
		env := &t.env
		g := writeGrant(p.Stmt)
		if p.Scope != nil {
			env.Claims = p.Scope.Claims
		}
		if set, isSet := p.Stmt.(*fenecql.Set); isSet {
			if _, err := setFields(c, set.Patch, t.fieldRoom[:0]); err != nil {
				return Bid{Err: err}
			}
			var err error
			if t.upd, err = t.updateRules(c, set); err != nil {
				return Bid{Err: err}
			}
		}
		pl, docs, err := t.pick(c, cl, env, g, p.Stmt.Position())
		if err != nil {
			return Bid{Err: err}
		}
		if len(docs) == 0 {
			continue
		}
		b := Bid{Takes: true}
		if len(pl.order) > 0 {
			env.Row = docs[0]
			b.Key, err = fenecql.Eval(pl.order[0].Expr, env)
			b.Desc, b.Err = pl.order[0].Desc, err
		}
		return b
	}
	due, ok := db.nextDue(ps, now)
	return Bid{Due: due, HasDue: ok}
}

// NextDue returns the earliest moment after now at which the time terms
// of a request's filters can change their answer for some document — a
// delayed job coming due, a lease lapsing — found from the @sorted index
// of each term's field. ok is false when no document's answer will change
// with time alone.
func (db *DB) NextDue(ps []Parsed) (due int64, ok bool) {
	db.mu.RLock()
	defer db.mu.RUnlock()
	return db.nextDue(ps, db.clock.NowMS())
}

func (db *DB) nextDue(ps []Parsed, now int64) (due int64, ok bool) {
	for _, p := range writes(ps) {
		name, cl := ClausesOf(p.Stmt)
		c := db.colls[name]
		if c == nil {
			continue
		}
		var room [4]timeTerm
		terms := room[:0]
		// A scoped claim waits on its rules' time terms too: a rule may
		// admit a job only once it is due.
		where := cl.Where
		st := &tx{db: db, scope: p.Scope}
		if set, isSet := p.Stmt.(*fenecql.Set); isSet {
			st.upd, _ = st.updateRules(c, set)
		}
		if extra, err := st.scopeFilter(c, writeGrant(p.Stmt), 0); err == nil {
			where = and(where, extra)
		}
		fenecql.Walk(where, func(x fenecql.Expr) {
			if tt, isTerm := asTimeTerm(x); isTerm {
				terms = append(terms, tt)
			}
		})
		for _, tt := range terms {
			if d, found := c.nextFlip(tt, p.Params, now); found && (!ok || d < due) {
				due, ok = d, true
			}
		}
	}
	return due, ok
}

// nextFlip returns the first moment after now at which `field op now()+k`
// turns for some document: with value v, `v <= t+k` and `v > t+k` turn at
// t = v-k; `v < t+k` and `v >= t+k` at t = v-k+1.
func (c *Collection) nextFlip(tt timeTerm, params []fenecql.Value, now int64) (int64, bool) {
	f := c.field(tt.field)
	if f < 0 {
		return 0, false
	}
	var k int64
	if tt.k != nil {
		kv, err := fenecql.Eval(tt.k, &fenecql.Env{Params: params})
		if err != nil || !kv.IsNumber() {
			return 0, false
		}
		k = int64(kv.Number())
		if tt.neg {
			k = -k
		}
	}
	strict := tt.op == fenecql.OpLe || tt.op == fenecql.OpGt
	shift := int64(1)
	if strict {
		shift = 0
	}
	edge := now + k // the first value to turn is past this
	var v fenecql.Value
	found := false
	if x, isSorted := c.byField[f].(*sortedIndex); isSorted {
		v, found = x.next(fenecql.Int(edge), !strict)
	} else {
		// No index to step along: every document is read for the least
		// value past the edge.
		c.scan(func(d *Doc) bool {
			dv := d.val(f)
			if !dv.IsNumber() && dv.Kind() != fenecql.KindTime {
				return true
			}
			cmp := fenecql.Compare(dv, fenecql.Int(edge))
			if (cmp > 0 || cmp == 0 && !strict) && (!found || fenecql.Compare(dv, v) < 0) {
				v, found = dv, true
			}
			return true
		})
	}
	if !found || !v.IsNumber() && v.Kind() != fenecql.KindTime {
		return 0, false
	}
	vn := v.Int()
	if v.Kind() == fenecql.KindFloat {
		vn = int64(v.Float())
	}
	return vn - k + shift, true
}
