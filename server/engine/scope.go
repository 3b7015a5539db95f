package engine

import (
	"fmt"
	"slices"
	"strings"

	"github.com/fenecdb/fenec/server/fenecql"
)

// Grant is what a policy rule lets a token do.
type Grant uint8

const (
	GrantRead Grant = 1 << iota
	GrantInsert
	GrantUpdate
	GrantDelete
	GrantWrite = GrantInsert | GrantUpdate | GrantDelete
)

// Rule is one line of an access policy, as it applies to one token.
type Rule struct {
	Name   string   // how a refusal names it: "policy line 3"
	Text   string   // the line as written
	Coll   string   // a collection, or "*" for every one
	Grants Grant    // what it lets the token do
	Fields []string // update(f1, f2): the fields an update may change; nil: any
	// Filter is the rows it admits, nil for all. It reads the row's
	// fields, the token's claims ($jwt.x) and, for update and insert, the
	// row as written (new.x).
	Filter fenecql.Expr
}

// Scope is what a token may do: its claims and the rules that apply to it.
// A nil *Scope may do anything.
type Scope struct {
	Claims map[string]fenecql.Value
	Rules  []Rule
	// Until is when the scope ends, in ms since 1970 by the database's
	// clock (a token's exp); 0 for never. A statement admitted before
	// then may wait — a held claim, up to its Fenec-Wait — and is refused
	// if it would run after.
	Until int64
}

// ended returns the error for a statement run under s at now, when s has
// ended by then.
func (s *Scope) ended(now int64) error {
	if s == nil || s.Until == 0 || now < s.Until {
		return nil
	}
	return &scopeEnded{until: s.Until}
}

func (s *Scope) on(c *Collection, g Grant) []*Rule {
	var out []*Rule
	for i := range s.Rules {
		r := &s.Rules[i]
		if (r.Coll == c.Name || r.Coll == "*") && r.Grants&g != 0 && s.fits(r, c) {
			out = append(out, r)
		}
	}
	return out
}

// fits reports whether the token's claims are of the kind r's filter
// compares them with in c: a claim compared with a field must fit the
// field's type (a list or an object fits none but json; a number is no
// text). A rule whose claim does not fit does not apply, as one whose
// claim is missing does not (docs/access.md, How rules combine): else
// `owner = $jwt.sub` with a numeric sub would answer an empty collection
// where a missing sub answers none at all.
func (s *Scope) fits(r *Rule, c *Collection) bool {
	ok := true
	fenecql.Walk(r.Filter, func(x fenecql.Expr) {
		b, isBin := x.(*fenecql.Binary)
		if !ok || !isBin || b.Op < fenecql.OpEq || b.Op > fenecql.OpGe {
			return
		}
		for _, pair := range [2][2]fenecql.Expr{{b.L, b.R}, {b.R, b.L}} {
			cl, isClaim := pair[0].(*fenecql.Claim)
			ref, isRef := pair[1].(*fenecql.Ref)
			if !isClaim || !isRef {
				continue
			}
			path := ref.Path
			if len(path) == 2 && path[0] == "new" {
				path = path[1:]
			}
			if len(path) != 1 {
				continue // a path into json, or id: any value may compare
			}
			f := c.field(path[0])
			if f < 0 || c.s.fields[f].Type == fenecql.TypeJSON {
				continue
			}
			v, has := s.Claims[cl.Name]
			if _, err := fenecql.Coerce(v, c.s.fields[f].Type); err != nil || !has || v.IsNull() {
				ok = false
			}
		}
	})
	return ok
}

var grantVerbs = map[Grant]string{GrantRead: "read", GrantInsert: "insert into", GrantUpdate: "update", GrantDelete: "delete from"}

// readsNew reports whether e reads the row as written.
func readsNew(e fenecql.Expr) bool {
	found := false
	fenecql.Walk(e, func(x fenecql.Expr) {
		if r, ok := x.(*fenecql.Ref); ok && len(r.Path) > 1 && r.Path[0] == "new" {
			found = true
		}
	})
	return found
}

// pickFilter is the part of a rule's filter that reads only the row before
// the write: its top-level conditions that do not read new.x. It picks the
// rows a write may take; the whole filter is checked on what it writes.
func pickFilter(f fenecql.Expr) fenecql.Expr {
	var keep fenecql.Expr
	for _, c := range conjuncts(f, nil) {
		if !readsNew(c) {
			keep = and(keep, c)
		}
	}
	return keep
}

func and(a, b fenecql.Expr) fenecql.Expr {
	if a == nil {
		return b
	}
	if b == nil {
		return a
	}
	return &fenecql.Binary{Pos: a.Position(), Op: fenecql.OpAnd, L: a, R: b}
}

// scopeFilter returns the filter a scoped statement's rows must pass: the
// rules granting g on c, joined by or (nil when one admits every row). A
// collection no rule names is not there for the token (404); one it may
// not do g to is 403, or 404 for reads.
func (t *tx) scopeFilter(c *Collection, g Grant, pos fenecql.Pos) (fenecql.Expr, error) {
	terms, err := t.scopeTerms(c, g, pos)
	var or fenecql.Expr
	for _, f := range terms {
		if or == nil {
			or = f
		} else {
			or = &fenecql.Binary{Pos: f.Position(), Op: fenecql.OpOr, L: or, R: f}
		}
	}
	return or, err
}

// scopeTerms returns scopeFilter's terms, one per rule granting g on c (for
// an update, the part that reads the row before: pickFilter); nil when a
// rule admits every row.
func (t *tx) scopeTerms(c *Collection, g Grant, pos fenecql.Pos) ([]fenecql.Expr, error) {
	if t.scope == nil {
		return nil, nil
	}
	rules := t.scope.on(c, g)
	if g == GrantUpdate && t.upd != nil {
		rules = t.upd
	}
	if len(rules) == 0 {
		if g == GrantRead || len(t.scope.on(c, GrantRead|GrantWrite)) == 0 {
			return nil, fenecql.CodeErrorf(fenecql.CodeUnknown, pos, "no collection %s", c.Name)
		}
		return nil, fenecql.CodeErrorf(fenecql.CodeForbidden, pos, "no policy rule lets this token %s %s", grantVerbs[g], c.Name)
	}
	var terms []fenecql.Expr
	for _, r := range rules {
		f := r.Filter
		if g == GrantUpdate {
			f = pickFilter(f)
		}
		if f == nil {
			return nil, nil
		}
		terms = append(terms, f)
	}
	return terms, nil
}

// admits evaluates a rule's filter over the row before (nil for an insert)
// and the row as written.
func admits(r *Rule, env *fenecql.Env, before, after *Doc) (bool, error) {
	if r.Filter == nil {
		return true, nil
	}
	row := fenecql.Row(nil)
	if before != nil {
		row = before
	} else if after != nil {
		row = after // an insert's filter reads the row it writes
	}
	e := *env
	e.Row = row
	if after != nil {
		e.New = after
	}
	v, err := fenecql.Eval(r.Filter, &e)
	return fenecql.Truthy(v), err
}

// checkWrite refuses (403) a document a scoped token writes unless a rule
// granting g admits it: an update's rule must admit the row before, the
// row as written, and every field it changes; an insert's the new row.
func (t *tx) checkWrite(c *Collection, g Grant, before, after *Doc, env *fenecql.Env) error {
	ok, why, err := t.writeAdmitted(c, g, before, after, env)
	if err != nil || ok {
		return err
	}
	return fenecql.CodeErrorf(fenecql.CodeForbidden, 0, "%s", why)
}

// writeAdmitted reports whether some rule granting g admits the write of
// after (over before, nil for an insert), and if none does, why not.
func (t *tx) writeAdmitted(c *Collection, g Grant, before, after *Doc, env *fenecql.Env) (bool, string, error) {
	if t.scope == nil {
		return true, "", nil
	}
	var changed []string
	if before != nil {
		var bbuf, abuf fieldBuf
		bv, av := before.vals(&bbuf), after.vals(&abuf)
		for i, f := range c.s.fields {
			if !fenecql.Equal(bv[i], av[i]) || bv[i].Kind() != av[i].Kind() {
				changed = append(changed, f.Name)
			}
		}
	}
	var why string
	for _, r := range t.scope.on(c, g) {
		if before != nil {
			if pf := pickFilter(r.Filter); pf != nil {
				ok, err := admits(&Rule{Filter: pf}, env, before, nil)
				if err != nil {
					return false, "", err
				}
				if !ok {
					continue
				}
			}
		}
		ok, err := admits(r, env, before, after)
		if err != nil {
			return false, "", err
		}
		if !ok {
			if why == "" {
				why = fmt.Sprintf("document %d as written breaks %s: %s", after.ID, r.Name, r.Text)
			}
			continue
		}
		if r.Fields != nil {
			if f := outside(changed, r.Fields); f != "" {
				if why == "" {
					why = fmt.Sprintf("%s lets this token change only %s of %s, and this changes %s", r.Name, strings.Join(r.Fields, ", "), c.Name, f)
				}
				continue
			}
		}
		return true, "", nil
	}
	if why == "" {
		why = fmt.Sprintf("no policy rule lets this token %s %s", grantVerbs[g], c.Name)
	}
	return false, why, nil
}

func outside(changed, allowed []string) string {
	for _, f := range changed {
		if !slices.Contains(allowed, f) {
			return f
		}
	}
	return ""
}

// readable keeps the documents a scoped token may read: what a write's
// returning answers is held to the read rules, as the rows are written.
func (t *tx) readable(c *Collection, docs []*Doc, env *fenecql.Env) ([]*Doc, error) {
	if t.scope == nil {
		return docs, nil
	}
	out := docs[:0:0]
	for _, d := range docs {
		if t.canRead(c, d, env) {
			out = append(out, d)
		}
	}
	return out, nil
}

// canRead reports whether a read rule admits d. A rule whose filter fails
// on d does not admit it: the error would tell of a row the token may not
// read.
func (t *tx) canRead(c *Collection, d *Doc, env *fenecql.Env) bool {
	if t.scope == nil {
		return true
	}
	for _, r := range t.scope.on(c, GrantRead) {
		if ok, err := admits(r, env, d, nil); err == nil && ok {
			return true
		}
	}
	return false
}

// updateRules returns the update rules a scoped set runs under: those
// that let it change every field it names (update(...) lists them, or
// the rule has no list). Which fields a statement names is known before
// any row is read, so a set naming a field no rule lets the token change
// is refused (403) at once, as PostgreSQL's column privileges refuse it,
// whatever rows there are: the refusal tells nothing of them. A token
// with no update rule on c is refused by scopeTerms as before (nil, nil).
func (t *tx) updateRules(c *Collection, s *fenecql.Set) ([]*Rule, error) {
	if t.scope == nil {
		return nil, nil
	}
	all := t.scope.on(c, GrantUpdate)
	if len(all) == 0 {
		return nil, nil
	}
	var names []string
	for _, a := range s.Patch {
		if !slices.Contains(names, a.Path[0]) {
			names = append(names, a.Path[0])
		}
	}
	var out []*Rule
	for _, r := range all {
		if r.Fields == nil || outside(names, r.Fields) == "" {
			out = append(out, r)
		}
	}
	if len(out) > 0 {
		return out, nil
	}
	for _, f := range names {
		if !slices.ContainsFunc(all, func(r *Rule) bool { return slices.Contains(r.Fields, f) }) {
			return nil, fenecql.CodeErrorf(fenecql.CodeForbidden, s.Pos, "no policy rule lets this token change %s of %s", f, c.Name)
		}
	}
	return nil, fenecql.CodeErrorf(fenecql.CodeForbidden, s.Pos, "no one policy rule lets this token change %s of %s together", strings.Join(names, ", "), c.Name)
}

// checkSet refuses (403) a scoped set's write of d as nd unless one of
// its rules (updateRules) admits the row before and the row as written.
// d is a row those rules let the statement pick, so the refusal names
// the first rule that picked it and the write it breaks — as PostgreSQL's
// WITH CHECK does, rather than skip the row — and the statement writes
// nothing. Rows no rule lets it pick were never among d.
func (t *tx) checkSet(c *Collection, d, nd *Doc, env *fenecql.Env) error {
	if t.scope == nil {
		return nil
	}
	var broke *Rule
	for _, r := range t.upd {
		if pf := pickFilter(r.Filter); pf != nil {
			if ok, err := admits(&Rule{Filter: pf}, env, d, nil); err != nil || !ok {
				continue
			}
		}
		ok, err := admits(r, env, d, nd)
		if err != nil {
			return err
		}
		if ok {
			return nil
		}
		if broke == nil {
			broke = r
		}
	}
	if broke == nil {
		// Unreachable: the statement picked d through a rule's filter.
		return fenecql.CodeErrorf(fenecql.CodeForbidden, 0, "no policy rule lets this token update %s", c.Name)
	}
	return fenecql.CodeErrorf(fenecql.CodeForbidden, 0, "document %d as written breaks %s: %s", nd.ID, broke.Name, broke.Text)
}
