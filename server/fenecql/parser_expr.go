package fenecql

import (
	"strconv"
	"strings"
)

// The expressions' grammar (docs/fenecql.md, "Expressions"): operators
// by level, comparisons, literals, calls, lists and objects.

// expr reads an expression: or binds loosest.
func (p *parser) expr() Expr {
	p.nest(p.tok.pos)
	e := p.or()
	p.depth--
	return e
}

// nest enters one more level of nesting, refusing too many.
func (p *parser) nest(pos Pos) {
	if p.depth++; p.depth > maxDepth {
		p.fail(pos, "expression nested too deeply")
	}
}

// The binary operators by level, loosest first. and and or are words.
var (
	ors      = map[string]Op{"or": OpOr}
	ands     = map[string]Op{"and": OpAnd}
	sums     = map[string]Op{"+": OpAdd, "-": OpSub}
	products = map[string]Op{"*": OpMul, "/": OpDiv, "%": OpMod}
)

func (p *parser) or() Expr      { return p.chain(ors, p.and) }
func (p *parser) and() Expr     { return p.chain(ands, p.not) }
func (p *parser) sum() Expr     { return p.chain(sums, p.product) }
func (p *parser) product() Expr { return p.chain(products, p.unary) }

// chain reads operands joined by the operators in ops, left to right.
func (p *parser) chain(ops map[string]Op, operand func() Expr) Expr {
	e := operand()
	n := 0
	defer func() { p.height -= n }()
	for p.tok.kind == tokPunct || p.tok.kind == tokIdent {
		op := ops[strings.ToLower(p.tok.val)]
		if op == 0 {
			break
		}
		pos := p.tok.pos
		n++
		if p.height++; p.height > maxChain {
			p.fail(pos, "expression too long: more than %d operators deep", maxChain)
		}
		p.next()
		e = &Binary{Pos: pos, Op: op, L: e, R: operand()}
	}
	return e
}

func (p *parser) not() Expr {
	if !p.isKw("not") {
		return p.comparison()
	}
	pos := p.tok.pos
	p.next()
	p.nest(pos)
	e := &Unary{Pos: pos, Op: OpNot, X: p.not()}
	p.depth--
	return e
}

var comparisons = map[string]Op{"=": OpEq, "!=": OpNe, "<>": OpNe, "<": OpLt, "<=": OpLe, ">": OpGt, ">=": OpGe}

// comparison reads at most one comparison: `a < b < c` is refused rather
// than read as comparing a boolean.
func (p *parser) comparison() Expr {
	e := p.sum()
	if !p.isComparison() {
		return e
	}
	e = p.compare(e)
	if p.isComparison() {
		p.fail(p.tok.pos, "comparisons do not chain: put ( ) around one")
	}
	return e
}

func (p *parser) isComparison() bool {
	_, ok := comparisons[p.tok.val]
	return ok && p.tok.kind == tokPunct || p.isKw("in") || p.isKw("is") || p.isKw("not")
}

func (p *parser) compare(x Expr) Expr {
	pos := p.tok.pos
	switch {
	case p.isKw("is"):
		p.next()
		e := &IsNull{Pos: pos, X: x}
		if p.isKw("not") {
			e.Not = true
			p.next()
		}
		p.expectKw("null")
		return e
	case p.isKw("not"), p.isKw("in"):
		e := &In{Pos: pos, X: x, Not: p.isKw("not")}
		p.next()
		if e.Not {
			p.expectKw("in")
		}
		// A policy's `queue in $jwt.queues` reads a list claim.
		if !p.isP("[") && p.tok.kind != tokParam && p.tok.kind != tokClaim {
			p.failFound("a list [...] or a parameter after in")
		}
		e.List = p.primary()
		return e
	}
	op := comparisons[p.tok.val]
	p.next()
	return &Binary{Pos: pos, Op: op, L: x, R: p.sum()}
}

// unary reads a negation. A minus right before a number is folded into
// it, which is how -9223372036854775808 is written at all.
func (p *parser) unary() Expr {
	if !p.isP("-") {
		return p.primary()
	}
	pos := p.tok.pos
	p.next()
	if p.tok.kind == tokInt || p.tok.kind == tokFloat {
		return p.number(pos, "-")
	}
	p.nest(pos)
	e := &Unary{Pos: pos, Op: OpNeg, X: p.unary()}
	p.depth--
	return e
}

// number converts the current number token, with sign prepended, into a
// literal at pos.
func (p *parser) number(pos Pos, sign string) Expr {
	text := sign + p.tok.val
	var v Value
	if p.tok.kind == tokInt {
		n, err := strconv.ParseInt(text, 10, 64)
		if err != nil {
			p.fail(pos, "integer out of range")
		}
		v = Int(n)
	} else {
		f, err := strconv.ParseFloat(text, 64)
		if err != nil {
			p.fail(pos, "number out of range")
		}
		v = Float(f)
	}
	p.next()
	return &Lit{Pos: pos, Val: v}
}

func (p *parser) primary() Expr {
	t := p.tok
	switch t.kind {
	case tokInt, tokFloat:
		return p.number(t.pos, "")
	case tokString:
		p.next()
		return &Lit{Pos: t.pos, Val: Text(t.val)}
	case tokParam:
		p.next()
		n, _ := strconv.Atoi(t.val)
		return &Param{Pos: t.pos, N: n}
	case tokClaim:
		p.next()
		return &Claim{Pos: t.pos, Name: t.val}
	case tokPath:
		path := strings.Split(t.val, ".")
		if isReserved(path[0]) {
			p.fail(t.pos, "%s is a reserved word", path[0])
		}
		if path[0] == "new" && p.stmts && !p.newOK {
			p.fail(t.pos, "%s reads the incoming document, and only in the set of put ... if absent else set {...}", t.val)
		}
		p.next()
		return &Ref{Pos: t.pos, Path: path}
	case tokIdent:
		return p.word()
	}
	switch {
	case p.isP("("):
		p.next()
		e := p.expr()
		p.expectP(")")
		return e
	case p.isP("["):
		return p.list()
	case p.isP("{"):
		return p.object()
	}
	p.failFound("a value")
	return nil
}

// word reads an expression that starts with an identifier: a literal
// keyword, a case, a call or a field.
func (p *parser) word() Expr {
	t := p.tok
	switch strings.ToLower(t.val) {
	case "true", "false":
		p.next()
		return &Lit{Pos: t.pos, Val: Bool(strings.EqualFold(t.val, "true"))}
	case "null":
		p.next()
		return &Lit{Pos: t.pos, Val: Null}
	case "case":
		return p.caseExpr()
	}
	if isReserved(t.val) {
		p.fail(t.pos, "%s is a reserved word", t.val)
	}
	p.next()
	if !p.isP("(") {
		return &Ref{Pos: t.pos, Path: []string{t.val}}
	}
	return p.call(t)
}

// call reads the arguments of function name, and checks them against what
// it takes.
func (p *parser) call(name token) Expr {
	c := &Call{Pos: name.pos, Name: strings.ToLower(name.val)}
	f, ok := functions[c.Name]
	if !ok {
		p.fail(c.Pos, "unknown function %s", name.val)
	}
	p.next()
	for !p.isP(")") {
		if len(c.Args) > 0 {
			p.expectP(",", ")")
		}
		c.Args = append(c.Args, p.expr())
	}
	p.next()
	if len(c.Args) < f.min || f.max >= 0 && len(c.Args) > f.max {
		p.fail(c.Pos, "%s takes %s", c.Name, arity(f))
	}
	return c
}

func (p *parser) caseExpr() Expr {
	c := &Case{Pos: p.tok.pos}
	p.next()
	for {
		if !p.isKw("when") {
			if len(c.Whens) == 0 {
				p.failFound(`"when"`)
			}
			break
		}
		p.next()
		var w When
		w.Cond = p.expr()
		p.expectKw("then")
		w.Then = p.expr()
		c.Whens = append(c.Whens, w)
	}
	if p.isKw("else") {
		p.next()
		c.Else = p.expr()
	}
	p.expectKw("end")
	return c
}

func (p *parser) list() Expr {
	l := &ListLit{Pos: p.tok.pos}
	p.next()
	for !p.isP("]") {
		if len(l.Items) > 0 {
			p.expectP(",", "]")
		}
		l.Items = append(l.Items, p.expr())
	}
	p.next()
	return l
}

// object reads {key: value, ...}. Keys are any word or a string: in a
// literal no key can be mistaken for a clause.
func (p *parser) object() Expr {
	o := &ObjectLit{Pos: p.tok.pos}
	p.next()
	var keys nameSet
	for !p.isP("}") {
		if len(o.Keys) > 0 {
			p.expectP(",", "}")
		}
		if p.tok.kind != tokIdent && p.tok.kind != tokString {
			p.failFound("a key")
		}
		if !keys.add(p.tok.val) {
			p.fail(p.tok.pos, "key %s given twice", strconv.Quote(p.tok.val))
		}
		o.Keys = append(o.Keys, p.tok.val)
		p.next()
		p.expectP(":")
		o.Vals = append(o.Vals, p.expr())
	}
	p.next()
	return o
}
