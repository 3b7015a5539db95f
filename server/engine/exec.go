package engine

import (
	"strings"

	"github.com/fenecdb/fenec/server/fenecql"
)

func (t *tx) exec(s fenecql.Stmt, params []fenecql.Value) (*Result, error) {
	t.env = fenecql.Env{Params: params, Now: t.db.clock.NowMS()}
	env := &t.env
	if t.scope != nil {
		env.Claims = t.scope.Claims
		switch s.(type) {
		case *fenecql.CreateCollection, *fenecql.DropCollection:
			return nil, fenecql.CodeErrorf(fenecql.CodeForbidden, s.Position(), "a token held to a policy changes no schema")
		}
	}
	switch s := s.(type) {
	case *fenecql.CreateCollection:
		return t.execCreate(s)
	case *fenecql.DropCollection:
		return t.execDrop(s)
	case *fenecql.Put:
		return t.execPut(s, env)
	case *fenecql.Set:
		return t.execSet(s, env, false)
	case *fenecql.Del:
		return t.execDel(s, env, false)
	case *fenecql.Get:
		return t.execGet(s, env, false)
	case *fenecql.Explain:
		return t.execExplain(s, env)
	}
	return nil, fenecql.Errorf(s.Position(), "statement not supported")
}

func (t *tx) execCreate(s *fenecql.CreateCollection) (*Result, error) {
	if t.db.colls[s.Name] != nil {
		if s.IfNotExists {
			return affected(0), nil
		}
		return nil, fenecql.CodeErrorf(fenecql.CodeTaken, s.Pos, "collection %s exists", s.Name)
	}
	fields := make([]Field, len(s.Fields))
	for i, f := range s.Fields {
		// The parser has refused @geo on a field of another type.
		if f.Type == fenecql.TypeGeo && f.Index != fenecql.NoIndex && f.Index != fenecql.IndexGeo {
			return nil, fenecql.Errorf(f.Pos, "geo field %s takes @geo, not @%s", f.Name, f.Index)
		}
		if f.Type == fenecql.TypeJSON && f.Index != fenecql.NoIndex {
			return nil, fenecql.Errorf(f.Pos, "json field %s takes no index; index a field of its own", f.Name)
		}
		fields[i] = Field{Name: f.Name, Type: f.Type, Index: f.Index, TTL: f.TTL}
	}
	c := newCollection(s.Name, fields)
	t.db.attach(c)
	t.create(c)
	return affected(0), nil
}

func (t *tx) execDrop(s *fenecql.DropCollection) (*Result, error) {
	c := t.db.colls[s.Name]
	if c == nil {
		if s.IfExists {
			return affected(0), nil
		}
		return nil, fenecql.CodeErrorf(fenecql.CodeUnknown, s.Pos, "no collection %s", s.Name)
	}
	n := c.Len()
	t.drop(c)
	return affected(int64(n)), nil
}

func (t *tx) execPut(s *fenecql.Put, env *fenecql.Env) (*Result, error) {
	c, err := t.coll(s.Pos, s.Coll)
	if err != nil {
		return nil, err
	}
	if err := checkExpr(c, s.Docs); err != nil {
		return nil, err
	}
	if _, err := t.scopeFilter(c, GrantInsert, s.Pos); err != nil {
		return nil, err
	}
	v, err := fenecql.Eval(s.Docs, env)
	if err != nil {
		return nil, err
	}
	docs := []fenecql.Value{v}
	if v.Kind() == fenecql.KindList {
		docs = v.List()
	}
	verb := "put"
	if s.Insert {
		verb = "insert"
	}
	var upsert []int // the fields the upsert's patch writes
	if s.Upsert != nil {
		if upsert, err = setFields(c, s.Upsert, nil); err != nil {
			return nil, err
		}
	}
	written := 0
	for i, dv := range docs {
		if i%checkEvery == checkEvery-1 {
			if err := stopped(t.ctx); err != nil {
				return nil, err
			}
		}
		o := dv.Object()
		if o == nil {
			return nil, fenecql.Errorf(s.Docs.Position(), "%s takes a document or a list of documents, found %s", verb, short(dv))
		}
		var id int64
		var buf fieldBuf
		vals := c.s.blank(&buf)
		for k, key := range o.Keys {
			if key == "id" {
				v := o.Vals[k]
				if v.Kind() != fenecql.KindInt || v.Int() <= 0 || v.Int() > MaxID {
					return nil, fenecql.Errorf(s.Docs.Position(), "document %d: id must be a whole number from 1 to %d, found %s", i+1, int64(MaxID), short(v))
				}
				id = v.Int()
				continue
			}
			f := c.field(key)
			if f < 0 {
				return nil, fenecql.CodeErrorf(fenecql.CodeUnknown, s.Docs.Position(), "collection %s has no field %s", c.Name, key)
			}
			if vals[f], err = coerceField(c, f, o.Vals[k], s.Docs.Position()); err != nil {
				return nil, err
			}
		}
		d := c.s.encode(id, vals)
		if d.ID != 0 && c.ttls != nil {
			// A lapsed document's id is free: it is deleted here, and
			// the new one is an insert, not an update of it.
			if old := c.get(d.ID); old != nil && c.lapsed(old, env.Now) {
				t.deleteDoc(c, d.ID)
			}
		}
		if s.IfAbsent {
			held, err := t.holder(c, d, i, s.Docs.Position(), env)
			if err != nil {
				return nil, err
			}
			if held != nil {
				if s.Upsert == nil {
					continue
				}
				nd, err := patchNew(c, s.Upsert, upsert, held, d, env)
				if err != nil {
					return nil, err
				}
				if err := t.checkWrite(c, GrantUpdate, held, nd, env); err != nil {
					return nil, err
				}
				if err := t.checkUnique(c, nd, s.Docs.Position(), env); err != nil {
					return nil, err
				}
				t.setDoc(c, nd)
				written++
				continue
			}
		}
		if d.ID == 0 {
			if c.nextID > MaxID {
				return nil, fenecql.CodeErrorf(fenecql.CodeTaken, s.Docs.Position(), "%s has no new id left: ids reached %d, the highest", c.Name, int64(MaxID))
			}
			d.ID = c.nextID
		} else if s.Insert && c.get(d.ID) != nil {
			return nil, fenecql.CodeErrorf(fenecql.CodeTaken, s.Docs.Position(), "%s: id %d is taken", c.Name, d.ID)
		}
		if old := c.get(d.ID); old != nil {
			err = t.checkWrite(c, GrantUpdate, old, d, env)
		} else {
			err = t.checkWrite(c, GrantInsert, nil, d, env)
		}
		if err != nil {
			return nil, err
		}
		if err := t.checkUnique(c, d, s.Docs.Position(), env); err != nil {
			return nil, err
		}
		t.setDoc(c, d)
		written++
	}
	return affected(int64(written)), nil
}

// holder returns the live document that holds d's id or one of its
// @unique values, for put … if absent (nil: none, d is absent). Lapsed
// holders are deleted on the way: they count as absent (docs/fenecql.md,
// put … if absent). A document that gives no id and no @unique value
// cannot be looked up (400); one whose id and values are held by two
// different documents is refused (409) rather than merged into either.
func (t *tx) holder(c *Collection, d *Doc, i int, pos fenecql.Pos, env *fenecql.Env) (*Doc, error) {
	var held *Doc
	var by string
	keys := 0
	if d.ID != 0 {
		keys++
		held, by = c.get(d.ID), "id"
	}
	for _, f := range c.unique {
		v := d.val(f)
		if v.IsNull() {
			continue
		}
		keys++
		id := c.uniqueHolder(f, v, 0)
		if id == 0 {
			continue
		}
		h := c.get(id)
		if c.ttls != nil && c.lapsed(h, env.Now) {
			t.deleteDoc(c, id)
			continue
		}
		name := c.s.fields[f].Name
		switch {
		case held == nil:
			held, by = h, name
		case held.ID != h.ID:
			return nil, fenecql.CodeErrorf(fenecql.CodeTaken, pos, "%s: document %d of the put meets two documents, one by its %s and one by its %s; nothing is merged", c.Name, i+1, by, name)
		}
	}
	if keys == 0 {
		return nil, fenecql.Errorf(pos, "put … if absent looks a document up by its id or a @unique value, and document %d gives neither", i+1)
	}
	return held, nil
}

func coerceField(c *Collection, f int, v fenecql.Value, pos fenecql.Pos) (fenecql.Value, error) {
	cv, err := storedValue(v, c.s.fields[f].Type)
	if err != nil {
		return fenecql.Null, fenecql.Errorf(pos, "field %s: %v", c.s.fields[f].Name, err)
	}
	return cv, nil
}

// storedValue fits v to a field of type t as a document holds it: a json
// field's list or object packed as its JSON text (fenecql.Pack), which
// costs a third of the memory of its decoded form
// (bench/results/memory.md); every read of it still sees the same value.
func storedValue(v fenecql.Value, t fenecql.Type) (fenecql.Value, error) {
	cv, err := fenecql.Coerce(v, t)
	if err != nil || t != fenecql.TypeJSON {
		return cv, err
	}
	return fenecql.Pack(cv), nil
}

// checkUnique refuses d when a @unique field of it holds a value another
// live document holds. The holder is named only to a token that may read
// it. A lapsed holder is no holder: it is deleted, and d takes its value
// (docs/fenecql.md, Expiry).
func (t *tx) checkUnique(c *Collection, d *Doc, pos fenecql.Pos, env *fenecql.Env) error {
	for _, f := range c.unique {
		if v := d.val(f); !v.IsNull() {
			other := c.uniqueHolder(f, v, d.ID)
			if other != 0 && c.ttls != nil && c.lapsed(c.get(other), env.Now) {
				t.deleteDoc(c, other)
				other = c.uniqueHolder(f, v, d.ID)
			}
			if other != 0 {
				if !t.canRead(c, c.get(other), env) {
					return fenecql.CodeErrorf(fenecql.CodeTaken, pos, "%s.%s: %s is taken", c.Name, c.s.fields[f].Name, short(v))
				}
				return fenecql.CodeErrorf(fenecql.CodeTaken, pos, "%s.%s: %s is taken by document %d", c.Name, c.s.fields[f].Name, short(v), other)
			}
		}
	}
	return nil
}

// pick plans and runs the row-picking clauses of a get, set or del.
// A scoped statement picks only among the rows its rules granting g admit.
func (t *tx) pick(c *Collection, cl *fenecql.Clauses, env *fenecql.Env, g Grant, pos fenecql.Pos) (*plan, []*Doc, error) {
	return t.pickFor(c, cl, env, g, pos, false)
}

// pickFor is pick; with count, a plan without limit, offset or sort only
// counts the rows (plan.count), and returns none.
func (t *tx) pickFor(c *Collection, cl *fenecql.Clauses, env *fenecql.Env, g Grant, pos fenecql.Pos, count bool) (*plan, []*Doc, error) {
	// A /batch of ten acks is one parsed statement ten times over: its
	// clauses, shared and never changed, are checked against the
	// collection (whose fields never change either) once.
	if t.checked != cl || t.checkedIn != c {
		if err := checkExpr(c, cl.Where); err != nil {
			return nil, nil, err
		}
		for _, o := range cl.Order {
			if err := checkExpr(c, o.Expr); err != nil {
				return nil, nil, err
			}
		}
		t.checked, t.checkedIn = cl, c
	}
	if cl.Near != nil {
		ncl, err := nearClauses(c, cl, env)
		if err != nil {
			return nil, nil, err
		}
		cl = ncl
	}
	terms, err := t.scopeTerms(c, g, pos)
	if err != nil {
		return nil, nil, err
	}
	extra, _ := t.scopeFilter(c, g, pos)
	planned := cl
	if extra != nil {
		// The policy's terms may choose the index; the rows are then
		// held to the policy before the statement's own where, order and
		// patch run on them (see plan.scope).
		scoped := *cl
		scoped.Where = and(extra, cl.Where)
		planned = &scoped
	}
	p, err := newPlan(&t.plan, c, planned, env)
	if err != nil {
		return nil, nil, err
	}
	p.where, p.scope, p.ctx, p.room, p.rd = cl.Where, terms, t.ctx, t.docRoom[:], t.rd
	if p.reduced && extra == nil {
		// Planned on the statement's where alone: the access holds the
		// rest of it (plan.restOf).
		p.where = p.rest
	}
	// Without a sort (no order, or the index's): a sort's keys may fail
	// to compare, and a count must fail as the rows would.
	p.count = count && p.limit < 0 && p.offset == 0 && (len(p.order) == 0 || p.ordered)
	docs, err := p.collect()
	return p, docs, err
}

// nearClauses returns cl with its `near f p` written out as what it
// means: `where … and f is not null order distance(f, p)`. The @geo walk
// (newPlan) then serves it as it serves that order, and Near stays set
// for newPlan to see `exact`.
func nearClauses(c *Collection, cl *fenecql.Clauses, env *fenecql.Env) (*fenecql.Clauses, error) {
	n := cl.Near
	f := c.field(n.Field)
	if f < 0 {
		return nil, fenecql.CodeErrorf(fenecql.CodeUnknown, n.FieldPos, "collection %s has no field %s", c.Name, n.Field)
	}
	if _, isGeo := c.byField[f].(*geoIndex); !isGeo {
		return nil, fenecql.Errorf(n.FieldPos, "near takes a geo field with @geo, and %s is %s without it", n.Field, c.s.fields[f].Type)
	}
	if !isConst(n.Point) {
		return nil, fenecql.Errorf(n.Point.Position(), "near takes a point [lon, lat] or a parameter, not one read from the row")
	}
	pv, err := fenecql.Eval(n.Point, env)
	if err != nil {
		return nil, err
	}
	if _, err := fenecql.Coerce(pv, fenecql.TypeGeo); err != nil || pv.IsNull() {
		return nil, fenecql.Errorf(n.Point.Position(), "near %s takes a point [lon, lat], lon -180..180 and lat -90..90, found %s", n.Field, short(pv))
	}
	ref := &fenecql.Ref{Pos: n.FieldPos, Path: []string{n.Field}}
	out := *cl
	out.Where = and(cl.Where, &fenecql.IsNull{Pos: n.Pos, X: ref, Not: true})
	out.Order = []fenecql.OrderKey{{Expr: &fenecql.Call{Pos: n.Pos, Name: "distance", Args: []fenecql.Expr{ref, &fenecql.Lit{Pos: n.Point.Position(), Val: pv}}}}}
	return &out, nil
}

func (t *tx) execSet(s *fenecql.Set, env *fenecql.Env, dry bool) (*Result, error) {
	c, err := t.coll(s.Pos, s.Coll)
	if err != nil {
		return nil, err
	}
	fields, err := setFields(c, s.Patch, t.fieldRoom[:0])
	if err != nil {
		return nil, err
	}
	if err := checkColumns(c, s.Returning); err != nil {
		return nil, err
	}
	if t.upd, err = t.updateRules(c, s); err != nil {
		return nil, err
	}
	defer func() { t.upd = nil }()
	p, docs, err := t.pick(c, &s.Clauses, env, GrantUpdate, s.Pos)
	if err != nil {
		return nil, err
	}
	if dry {
		return explainResult(p, len(docs)), nil
	}
	t.taken += len(docs)
	written := docs // each row is replaced by itself as written
	for i, d := range docs {
		if i%checkEvery == checkEvery-1 {
			if err := stopped(t.ctx); err != nil {
				return nil, err
			}
		}
		nd, err := patch(c, s.Patch, fields, d, env)
		if err != nil {
			return nil, err
		}
		if err := t.checkSet(c, d, nd, env); err != nil {
			return nil, err
		}
		if err := t.checkUnique(c, nd, s.Pos, env); err != nil {
			return nil, err
		}
		t.setDoc(c, nd)
		written[i] = nd
	}
	return t.answer(c, "set", s.Returning, s.Require, written, env)
}

// setFields checks a set's patch and returns the field each entry writes,
// appended to room.
func setFields(c *Collection, patch []fenecql.Assign, room []int) ([]int, error) {
	fields := room
	for _, a := range patch {
		if a.Path[0] == "id" {
			return nil, fenecql.Errorf(a.Pos, "id cannot be set")
		}
		f := c.field(a.Path[0])
		if f < 0 {
			return nil, fenecql.CodeErrorf(fenecql.CodeUnknown, a.Pos, "collection %s has no field %s", c.Name, a.Path[0])
		}
		if len(a.Path) > 1 && c.s.fields[f].Type != fenecql.TypeJSON {
			return nil, fenecql.Errorf(a.Pos, "field %s is %s: a path writes into json fields only", a.Path[0], c.s.fields[f].Type)
		}
		if err := checkExpr(c, a.Value); err != nil {
			return nil, err
		}
		fields = append(fields, f)
	}
	return fields, nil
}

// patchNew returns d as an upsert's patch writes it, its `new.<field>`
// reading the incoming document in.
func patchNew(c *Collection, assigns []fenecql.Assign, fields []int, d, in *Doc, env *fenecql.Env) (*Doc, error) {
	env.New = in
	defer func() { env.New = nil }()
	return patch(c, assigns, fields, d, env)
}

// patch returns d as a set's patch (assigns) writes it.
//
// Only the fields written are encoded anew (schema.reencode): the others'
// bytes are copied over as they are, a claim's payload among them.
func patch(c *Collection, assigns []fenecql.Assign, fields []int, d *Doc, env *fenecql.Env) (*Doc, error) {
	var buf fieldBuf
	vals := c.s.blank(&buf)
	var written []bool
	var few [16]bool
	if len(vals) <= len(few) {
		written = few[:len(vals)]
	} else {
		written = make([]bool, len(vals))
	}
	env.Row = d
	defer func() { env.Row = nil }()
	for k, a := range assigns {
		v, err := fenecql.Eval(a.Value, env)
		if err != nil {
			return nil, err
		}
		f := fields[k]
		if len(a.Path) > 1 {
			at := vals[f]
			if !written[f] {
				at = d.val(f)
			}
			var ok bool
			if v, ok = setPath(at, a.Path[1:], v); !ok {
				return nil, fenecql.Errorf(a.Pos, "document %d: %s runs through a value that is not an object", d.ID, strings.Join(a.Path, "."))
			}
		}
		if vals[f], err = coerceField(c, f, v, a.Pos); err != nil {
			return nil, err
		}
		written[f] = true
	}
	return c.s.reencode(d, vals, written), nil
}

func (t *tx) execDel(s *fenecql.Del, env *fenecql.Env, dry bool) (*Result, error) {
	c, err := t.coll(s.Pos, s.Coll)
	if err != nil {
		return nil, err
	}
	if err := checkColumns(c, s.Returning); err != nil {
		return nil, err
	}
	p, docs, err := t.pick(c, &s.Clauses, env, GrantDelete, s.Pos)
	if err != nil {
		return nil, err
	}
	if dry {
		return explainResult(p, len(docs)), nil
	}
	t.taken += len(docs)
	for _, d := range docs {
		t.deleteDoc(c, d.ID)
	}
	return t.answer(c, "del", s.Returning, s.Require, docs, env)
}

// answer builds a write's answer — its returning rows or its count — and
// holds it to its require.
func (t *tx) answer(c *Collection, verb string, ret *fenecql.Returning, req fenecql.Expr, docs []*Doc, env *fenecql.Env) (*Result, error) {
	var r *Result
	if ret != nil {
		shown, err := t.readable(c, docs, env)
		if err != nil {
			return nil, err
		}
		if r, err = project(c, ret.Star, ret.Columns, shown, env); err != nil {
			return nil, err
		}
		docs = shown
	} else {
		r = t.affected(int64(len(docs)))
	}
	if req == nil {
		return r, nil // no require: no message to make
	}
	did := "wrote"
	if ret != nil {
		did = "answered"
	}
	return r, checkRequire(req, env, verb, c.Name, did, len(docs))
}

// checkRequire holds a statement's n rows to its require; verb and coll
// name the statement in the refusal, put together only then.
func checkRequire(req fenecql.Expr, env *fenecql.Env, verb, coll, did string, n int) error {
	if req == nil {
		return nil
	}
	want, err := countArg(req, env, "require")
	if err != nil {
		return err
	}
	if n != want {
		return fenecql.CodeErrorf(fenecql.CodeUnmet, 0, "`%s %s` %s %d %s, and requires %d", verb, coll, did, n, rowsWord(n), want)
	}
	return nil
}

func rowsWord(n int) string {
	if n == 1 {
		return "row"
	}
	return "rows"
}

func (t *tx) execGet(s *fenecql.Get, env *fenecql.Env, dry bool) (*Result, error) {
	c, err := t.coll(s.Pos, s.Coll)
	if err != nil {
		return nil, err
	}
	if s.Count && s.Columns != nil {
		return nil, fenecql.Errorf(s.Pos, "count answers the number of rows, and takes no select")
	}
	if err := checkColumns(c, &fenecql.Returning{Columns: s.Columns}); err != nil {
		return nil, err
	}
	p, docs, err := t.pickFor(c, &s.Clauses, env, GrantRead, s.Pos, s.Count && !dry)
	if err != nil {
		return nil, err
	}
	if dry {
		return explainResult(p, len(docs)), nil
	}
	var r *Result
	if s.Count {
		n := len(docs)
		if p.count {
			n = p.counted
		}
		r = &Result{IsRows: true, Columns: []string{"count"}, Rows: [][]fenecql.Value{{fenecql.Int(int64(n))}}}
	} else if r, err = project(c, s.Columns == nil, s.Columns, docs, env); err != nil {
		return nil, err
	}
	return r, checkRequire(s.Require, env, "get", c.Name, "answered", len(r.Rows))
}

func (t *tx) execExplain(s *fenecql.Explain, env *fenecql.Env) (*Result, error) {
	switch in := s.Stmt.(type) {
	case *fenecql.Get:
		return t.execGet(in, env, true)
	case *fenecql.Set:
		return t.execSet(in, env, true)
	case *fenecql.Del:
		return t.execDel(in, env, true)
	}
	return nil, fenecql.Errorf(s.Pos, "explain takes a get, set or del")
}

// explainResult is explain's one row: rows read first, so a doc's `-- →`
// checks it; then the index walked ("id" for an id lookup, null for a
// scan), the rows picked, the plan in words, and how the order was met.
func explainResult(p *plan, n int) *Result {
	order := "none"
	if len(p.order) > 0 {
		order = "sort"
		if p.ordered {
			order = "index"
		}
	}
	index := fenecql.Null
	switch {
	case p.acc == accIDs:
		index = fenecql.Text("id")
	case p.field >= 0:
		index = fenecql.Text(p.c.s.fields[p.field].Name)
	}
	return &Result{IsRows: true, Columns: []string{"rows_read", "index", "rows", "plan", "order"}, Rows: [][]fenecql.Value{{
		fenecql.Int(int64(p.rowsRead)), index, fenecql.Int(int64(n)), fenecql.Text(p.describe()), fenecql.Text(order),
	}}}
}

// project returns docs as rows of the given columns, or of id and every
// field for *.
func project(c *Collection, star bool, cols []fenecql.Column, docs []*Doc, env *fenecql.Env) (*Result, error) {
	r := &Result{IsRows: true, Rows: make([][]fenecql.Value, 0, len(docs))}
	if star {
		// The rows are cut from one slab: a claim's ten rows are one
		// allocation, not ten.
		r.Columns = c.s.star
		w := len(c.s.star)
		slab := make([]fenecql.Value, 0, len(docs)*w)
		for _, d := range docs {
			start := len(slab)
			slab = d.appendVals(append(slab, fenecql.Int(d.ID)))
			r.Rows = append(r.Rows, slab[start:len(slab):len(slab)])
		}
		return r, nil
	}
	for _, col := range cols {
		r.Columns = append(r.Columns, col.Name)
	}
	defer func() { env.Row = nil }()
	for _, d := range docs {
		env.Row = d
		row := make([]fenecql.Value, len(cols))
		for i, col := range cols {
			v, err := fenecql.Eval(col.Expr, env)
			if err != nil {
				return nil, err
			}
			row[i] = v
		}
		r.Rows = append(r.Rows, row)
	}
	return r, nil
}

func checkColumns(c *Collection, ret *fenecql.Returning) error {
	if ret == nil {
		return nil
	}
	seen := map[string]bool{}
	for _, col := range ret.Columns {
		if err := checkExpr(c, col.Expr); err != nil {
			return err
		}
		if seen[col.Name] {
			return fenecql.Errorf(col.Expr.Position(), "two columns are named %s; name one with as", col.Name)
		}
		seen[col.Name] = true
	}
	return nil
}

// checkExpr refuses references to fields the collection lacks, and paths
// into fields that are not json, before anything runs.
func checkExpr(c *Collection, e fenecql.Expr) error {
	var err error
	fenecql.Walk(e, func(x fenecql.Expr) {
		if err != nil {
			return
		}
		switch x := x.(type) {
		case *fenecql.Ref:
			path := x.Path
			if len(path) > 1 && path[0] == "new" {
				// The incoming document of an upsert; the parser lets no
				// other statement read it.
				path = path[1:]
			}
			name := path[0]
			if name == "id" && len(path) == 1 {
				return
			}
			f := c.field(name)
			if f < 0 {
				err = fenecql.CodeErrorf(fenecql.CodeUnknown, x.Pos, "collection %s has no field %s", c.Name, name)
				return
			}
			if len(path) > 1 && c.s.fields[f].Type != fenecql.TypeJSON {
				err = fenecql.Errorf(x.Pos, "field %s is %s: a path reads into json fields only", name, c.s.fields[f].Type)
			}
		case *fenecql.Claim:
			err = fenecql.Errorf(x.Pos, "$jwt.%s reads a token's claim, and only policy filters have one", x.Name)
		}
	})
	return err
}

// setPath returns json value v with the value at path replaced by x.
// Missing (null) steps become objects; a step through any other value is
// refused, since writing there would throw that value away.
func setPath(v fenecql.Value, path []string, x fenecql.Value) (fenecql.Value, bool) {
	o := v.Object()
	if o == nil {
		if !v.IsNull() {
			return v, false
		}
		o = &fenecql.Object{}
	}
	if len(path) == 1 {
		return fenecql.ObjectOf(o.With(path[0], x)), true
	}
	inner, ok := setPath(o.Get(path[0]), path[1:], x)
	if !ok {
		return v, false
	}
	return fenecql.ObjectOf(o.With(path[0], inner)), true
}
