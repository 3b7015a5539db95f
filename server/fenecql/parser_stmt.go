package fenecql

import (
	"slices"
	"strconv"
	"strings"
)

// The statements' grammar (docs/fenecql.md): each statement, its
// clauses, and the names and patches in them.

func (p *parser) stmt() Stmt {
	pos := p.tok.pos
	switch {
	case p.isKw("create"):
		return p.create()
	case p.isKw("drop"):
		return p.drop()
	case p.isKw("put"), p.isKw("insert"):
		insert := p.isKw("insert")
		p.next()
		s := &Put{Pos: pos, Coll: p.name("a collection name"), Insert: insert}
		s.Docs = p.docs()
		if p.isKw("if") {
			if insert {
				p.fail(p.tok.pos, "insert takes no if absent: write put ... if absent")
			}
			p.next()
			p.expectKw("absent")
			s.IfAbsent = true
			if p.isKw("else") {
				p.next()
				p.expectKw("set")
				p.newOK = true
				s.Upsert = p.patch()
				p.newOK = false
			}
		}
		if !p.atEnd() {
			if insert {
				p.failFound("end of statement")
			}
			want := "if absent or end of statement"
			if s.IfAbsent {
				want = "else set {...} or end of statement"
				if s.Upsert != nil {
					want = "end of statement"
				}
			}
			p.failFound(want)
		}
		return s
	case p.isKw("set"):
		return p.set()
	case p.isKw("del"):
		p.next()
		s := &Del{Pos: pos, Coll: p.name("a collection name")}
		t := p.clauses("del", "where", "order", "near", "limit", "returning", "require")
		s.Clauses, s.Returning = t.Clauses, t.ret
		return s
	case p.isKw("get"):
		return p.get()
	case p.isKw("explain"):
		p.next()
		if !p.isKw("get") && !p.isKw("set") && !p.isKw("del") {
			p.failFound("get, set or del after explain")
		}
		return &Explain{Pos: pos, Stmt: p.stmt()}
	}
	p.failFound("a statement (create, drop, put, insert, set, del, get, explain)")
	return nil
}

func (p *parser) create() Stmt {
	s := &CreateCollection{Pos: p.tok.pos}
	p.next()
	p.expectKw("collection")
	if p.isKw("if") {
		p.next()
		p.expectKw("not")
		p.expectKw("exists")
		s.IfNotExists = true
	}
	s.Name = p.name("a collection name")
	p.expectP("(")
	var fieldNames nameSet
	for {
		f := FieldDef{Pos: p.tok.pos}
		if p.tok.kind == tokIdent && p.tok.val == "id" {
			p.fail(f.Pos, "id is automatic")
		}
		f.Name = p.name("a field name")
		if !fieldNames.add(f.Name) {
			p.fail(f.Pos, "field %s given twice", f.Name)
		}
		f.Type = p.fieldType()
		var ttlSeen bool
		for p.isP("@") {
			at := p.tok.pos
			if p.annotation(&f) {
				if ttlSeen {
					p.fail(at, "@ttl given twice on %s", f.Name)
				}
				ttlSeen = true
			}
		}
		s.Fields = append(s.Fields, f)
		if !p.isP(",") {
			break
		}
		p.next()
	}
	p.expectP(")", ",")
	p.expectEnd()
	return s
}

func (p *parser) fieldType() Type {
	if p.tok.kind != tokIdent {
		p.failFound("a type")
	}
	t, ok := TypeByName(strings.ToLower(p.tok.val))
	if !ok {
		p.fail(p.tok.pos, "unknown type %q (%s)", p.tok.val, strings.Join(typeNames[1:], ", "))
	}
	p.next()
	return t
}

// annotation reads one @annotation of field f: an index, or @ttl(...).
// A field takes at most one index and, beside it, one @ttl; it returns
// whether it read a @ttl.
func (p *parser) annotation(f *FieldDef) (ttl bool) {
	pos := p.tok.pos
	p.next()
	known := "(@sorted, @hash, @unique, @geo, @ttl(<duration>))"
	if p.tok.kind != tokIdent {
		p.fail(pos, "expected an index %s, found %s", known, p.found())
	}
	if strings.EqualFold(p.tok.val, "ttl") {
		if f.Type != TypeTimestamp {
			p.fail(pos, "@ttl takes a timestamp field, and %s is %s", f.Name, f.Type)
		}
		f.TTL = p.ttl()
		return true
	}
	k, ok := IndexByName(strings.ToLower(p.tok.val))
	if !ok {
		p.fail(pos, "unknown index %q %s", "@"+p.tok.val, known)
	}
	if k == IndexGeo && f.Type != TypeGeo {
		p.fail(pos, "@geo indexes a geo field, and %s is %s", f.Name, f.Type)
	}
	if f.Index != NoIndex {
		p.fail(pos, "%s has an index already (@%s): a field takes one", f.Name, f.Index)
	}
	f.Index = k
	p.next()
	return false
}

// ttl reads the `(<duration>)` of a @ttl, the current token being ttl,
// and returns it in milliseconds. A duration such as 30s is no FenecQL
// token, so its text is read straight from the source up to the ")".
func (p *parser) ttl() int64 {
	p.next()
	if !p.isP("(") {
		p.failFound(`"(" and a duration after @ttl`)
	}
	// The lexer stands just past the "(": the token after it is not read
	// yet.
	start := p.lex.pos
	close := strings.IndexByte(p.lex.src[start:], ')')
	if close < 0 {
		p.fail(Pos(start+1), "expected a duration and \")\" after @ttl(")
	}
	text := p.lex.src[start : start+close]
	ms, ok := parseDuration(strings.TrimSpace(text))
	if !ok {
		p.fail(Pos(start+1), "@ttl takes a duration above zero such as 30s, 2m, 30m or 24h (units ms, s, m, h), found %q", clip(text))
	}
	p.lex.pos = start + close + 1
	p.tok.end = p.lex.pos
	p.next()
	return ms
}

// parseDuration reads a @ttl's duration: one or more runs of digits and
// a unit (ms, s, m, h), as Go's time.ParseDuration spells them minus the
// fractions and the sub-millisecond units, and returns it in
// milliseconds; ok is false for anything else and for zero.
func parseDuration(s string) (ms int64, ok bool) {
	if s == "" {
		return 0, false
	}
	for s != "" {
		i := 0
		for i < len(s) && isDigit(s[i]) {
			i++
		}
		if i == 0 || i > 12 {
			return 0, false
		}
		n, _ := strconv.ParseInt(s[:i], 10, 64)
		s = s[i:]
		var unit int64
		switch {
		case strings.HasPrefix(s, "ms"):
			unit, s = 1, s[2:]
		case strings.HasPrefix(s, "s"):
			unit, s = 1000, s[1:]
		case strings.HasPrefix(s, "m"):
			unit, s = 60_000, s[1:]
		case strings.HasPrefix(s, "h"):
			unit, s = 3_600_000, s[1:]
		default:
			return 0, false
		}
		ms += n * unit
		if ms > maxTTL {
			return 0, false
		}
	}
	return ms, ms > 0
}

// maxTTL bounds a @ttl at about a hundred years, so a field's time plus
// it stays far inside the int64 milliseconds a timestamp is held in.
const maxTTL = 100 * 366 * 24 * 3_600_000

func (p *parser) drop() Stmt {
	s := &DropCollection{Pos: p.tok.pos}
	p.next()
	p.expectKw("collection")
	if p.isKw("if") {
		p.next()
		p.expectKw("exists")
		s.IfExists = true
	}
	s.Name = p.name("a collection name")
	p.expectEnd()
	return s
}

// docs reads what a put writes: an object, a list of objects, or a
// parameter holding either.
func (p *parser) docs() Expr {
	switch {
	case p.isP("{"):
		return p.object()
	case p.tok.kind == tokParam:
		return p.primary()
	case p.isP("["):
		l := &ListLit{Pos: p.tok.pos}
		p.next()
		for !p.isP("]") {
			if len(l.Items) > 0 {
				p.expectP(",", "]")
			}
			if !p.isP("{") && p.tok.kind != tokParam {
				p.failFound("a document {...} or a parameter")
			}
			l.Items = append(l.Items, p.primary())
		}
		p.next()
		return l
	}
	p.failFound("a document {...}, a list of them or a parameter")
	return nil
}

func (p *parser) set() Stmt {
	s := &Set{Pos: p.tok.pos}
	p.next()
	s.Coll = p.name("a collection name")
	s.Patch = p.patch()
	t := p.clauses("set", "where", "order", "near", "limit", "returning", "require")
	s.Clauses, s.Returning = t.Clauses, t.ret
	return s
}

// patch reads a set's `{field: expr, ...}`.
func (p *parser) patch() []Assign {
	var out []Assign
	p.expectP("{")
	var patched pathSet
	for {
		a := Assign{Pos: p.tok.pos}
		switch p.tok.kind {
		case tokIdent, tokPath:
			a.Path = strings.Split(p.tok.val, ".")
		default:
			p.failFound("a field name")
		}
		switch {
		case isReserved(a.Path[0]):
			p.fail(a.Pos, "%s is a reserved word", a.Path[0])
		case a.Path[0] == "id":
			p.fail(a.Pos, "id cannot be set")
		}
		if !patched.add(a.Path) {
			p.fail(a.Pos, "%s is set twice", p.tok.val)
		}
		p.next()
		p.expectP(":")
		a.Value = p.expr()
		out = append(out, a)
		if !p.isP(",") {
			break
		}
		p.next()
	}
	p.expectP("}", ",")
	return out
}

// overlaps reports whether one path is a prefix of the other, so writing
// both would make the result depend on their order.
// pathSet is the paths a patch sets. Two overlap when one is a prefix of
// the other (a and a.b): it notes every path and every proper prefix of
// one, so each new path is checked in time of its own length.
type pathSet struct {
	whole, prefix map[string]bool
}

// add notes path, or returns false when it overlaps one noted before.
func (s *pathSet) add(path []string) bool {
	if s.whole == nil {
		s.whole, s.prefix = map[string]bool{}, map[string]bool{}
	}
	// The key of each prefix is a prefix of the path's key: no copies.
	key := strings.Join(path, "\x00")
	ends := make([]int, 0, len(path))
	end := 0
	for _, p := range path[:len(path)-1] {
		end += len(p)
		ends = append(ends, end)
		end++ // the separator
	}
	if s.whole[key] || s.prefix[key] {
		return false
	}
	for _, e := range ends {
		if s.whole[key[:e]] {
			return false
		}
	}
	s.whole[key] = true
	for _, e := range ends {
		s.prefix[key[:e]] = true
	}
	return true
}

// nameSet is names given so far, to refuse one given twice: a scan while
// they are few, a map past indexFrom, so n names cost O(n), not O(n²).
type nameSet struct {
	names []string
	index map[string]bool
}

// add notes name, or returns false when it was noted before.
func (s *nameSet) add(name string) bool {
	if s.index != nil {
		if s.index[name] {
			return false
		}
		s.index[name] = true
		return true
	}
	if slices.Contains(s.names, name) {
		return false
	}
	s.names = append(s.names, name)
	if len(s.names) == indexFrom {
		s.index = make(map[string]bool, 2*indexFrom)
		for _, n := range s.names {
			s.index[n] = true
		}
		s.names = nil
	}
	return true
}

func (p *parser) get() Stmt {
	s := &Get{Pos: p.tok.pos}
	p.next()
	s.Coll = p.name("a collection name")
	t := p.clauses("get", "select", "where", "order", "near", "limit", "offset", "count", "require")
	s.Clauses, s.Columns, s.Count = t.Clauses, t.cols, t.count
	return s
}

// tail is what the clauses after a statement's collection can hold.
type tail struct {
	Clauses
	cols  []Column
	ret   *Returning
	count bool
}

// clauseWords are every clause a statement may end with.
// near is not reserved (a field may be called near): it is a clause only
// where a clause may start.
var clauseWords = []string{"select", "where", "order", "near", "limit", "offset", "count", "returning", "require"}

// clauses reads the clauses of statement stmt, which allows those named
// in allowed, in any order and each at most once.
func (p *parser) clauses(stmt string, allowed ...string) tail {
	var t tail
	var seen []string
	for !p.atEnd() {
		word := strings.ToLower(p.tok.val)
		pos := p.tok.pos
		switch {
		case p.tok.kind != tokIdent || !slices.Contains(clauseWords, word):
			p.failFound(strings.Join(allowed, ", ") + " or end of statement")
		case !slices.Contains(allowed, word):
			p.fail(pos, "%s takes no %s", stmt, word)
		case slices.Contains(seen, word):
			p.fail(pos, "%s given twice", word)
		case word == "count" && slices.Contains(seen, "select"), word == "select" && slices.Contains(seen, "count"):
			p.fail(pos, "count and select do not go together")
		case word == "near" && slices.Contains(seen, "order"), word == "order" && slices.Contains(seen, "near"):
			p.fail(pos, "near orders the rows itself, and takes no order")
		}
		seen = append(seen, word)
		p.next()
		switch word {
		case "select":
			if p.isP("*") {
				p.next()
			} else {
				t.cols = p.columns()
			}
		case "where":
			t.Where = p.expr()
		case "order":
			t.Order = p.order()
		case "near":
			t.Near = p.near(pos)
		case "limit":
			t.Limit = p.whole(word)
		case "offset":
			t.Offset = p.whole(word)
		case "require":
			t.Require = p.whole(word)
		case "count":
			t.count = true
		case "returning":
			t.ret = &Returning{}
			if p.isP("*") {
				t.ret.Star = true
				p.next()
			} else {
				t.ret.Columns = p.columns()
			}
		}
	}
	return t
}

// whole reads the count of a limit, offset or require clause.
func (p *parser) whole(clause string) Expr {
	if p.tok.kind == tokInt || p.tok.kind == tokParam {
		return p.primary()
	}
	p.fail(p.tok.pos, "%s must be a whole number or a parameter", clause)
	return nil
}

// near reads `<field> <point> [exact]` after near.
func (p *parser) near(pos Pos) *Near {
	n := &Near{Pos: pos, FieldPos: p.tok.pos}
	if p.tok.kind != tokIdent || isReserved(p.tok.val) {
		p.failFound("a geo field after near")
	}
	n.Field = p.tok.val
	p.next()
	if p.atEnd() {
		p.failFound("a point [lon, lat] or a parameter after near " + n.Field)
	}
	n.Point = p.sum()
	if p.isKw("exact") {
		n.Exact = true
		p.next()
	}
	return n
}

func (p *parser) order() []OrderKey {
	var keys []OrderKey
	for {
		k := OrderKey{Expr: p.expr()}
		switch {
		case p.isKw("desc"):
			k.Desc = true
			p.next()
		case p.isKw("asc"):
			p.next()
		}
		keys = append(keys, k)
		if !p.isP(",") {
			return keys
		}
		p.next()
	}
}

// columns reads a select or returning list. A column without `as` is
// named by its own text, as written.
func (p *parser) columns() []Column {
	var cols []Column
	var colNames nameSet
	for {
		pos, start := p.tok.pos, int(p.tok.pos)-1
		c := Column{Expr: p.expr()}
		c.Name = strings.TrimSpace(p.lex.src[start:p.end])
		if p.isKw("as") {
			p.next()
			if p.tok.kind != tokIdent {
				p.failFound("a column name")
			}
			pos, c.Name = p.tok.pos, p.tok.val
			p.next()
		}
		if !colNames.add(c.Name) {
			p.fail(pos, "column %s given twice", c.Name)
		}
		cols = append(cols, c)
		if !p.isP(",") {
			return cols
		}
		p.next()
	}
}
