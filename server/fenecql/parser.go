package fenecql

import (
	"slices"
	"strconv"
	"strings"
)

// Parse parses exactly one statement; a trailing ";" and comments are
// allowed.
func Parse(src string) (s Stmt, err error) {
	p := &parser{lex: lexer{src: src}, eof: "end of statement", stmts: true}
	defer p.recover(&err)
	p.next()
	s = p.stmt()
	if p.isP(";") {
		p.next()
	}
	if p.tok.kind != tokEOF {
		p.failFound("end of statement")
	}
	return s, nil
}

// ParseAll parses statements separated by ";". Empty statements between
// semicolons are skipped, but text holding none at all is an error.
func ParseAll(src string) (stmts []Stmt, err error) {
	p := &parser{lex: lexer{src: src}, eof: "end of statement", stmts: true}
	defer p.recover(&err)
	p.next()
	for {
		for p.isP(";") {
			p.next()
		}
		if p.tok.kind == tokEOF {
			break
		}
		stmts = append(stmts, p.stmt())
	}
	if len(stmts) == 0 {
		return nil, Errorf(0, "no statement")
	}
	return stmts, nil
}

// ParseExpr parses one expression and nothing after it.
func ParseExpr(src string) (e Expr, err error) {
	p := &parser{lex: lexer{src: src}, eof: "end of expression"}
	defer p.recover(&err)
	p.next()
	e = p.expr()
	if p.tok.kind != tokEOF {
		p.failFound("an operator or end of expression")
	}
	return e, nil
}

// maxDepth bounds the nesting of expressions, and maxChain the operators
// on the path from an expression's root to its deepest leaf (`1 + 1 + …`
// leans left one level an operator), so a hostile statement can exhaust
// the stack neither here nor in the evaluator.
const (
	maxDepth = 100
	maxChain = 10000
)

// parser is a recursive-descent parser over one token of lookahead. It
// reports an error by panicking with an *Error, recovered at the entry
// points; that keeps every rule free of error plumbing.
type parser struct {
	lex    lexer
	tok    token  // the current token, not yet consumed
	end    int    // where the last consumed token ends, for column text
	eof    string // how end of input is named in messages
	depth  int
	height int // operators in the chains being read, innermost included
	// stmts is set when statements are parsed, not a lone expression (a
	// policy filter): there `new.<field>` is read only inside an
	// upsert's patch, where newOK is set.
	stmts, newOK bool
}

func (p *parser) recover(err *error) {
	if r := recover(); r != nil {
		e, ok := r.(*Error)
		if !ok {
			panic(r)
		}
		*err = e
	}
}

func (p *parser) next() {
	p.end = p.tok.end
	p.tok = p.lex.next()
	if p.tok.kind == tokError {
		p.fail(p.tok.pos, "%s", p.tok.val)
	}
}

func (p *parser) fail(pos Pos, format string, args ...any) {
	panic(Errorf(pos, format, args...))
}

// failFound fails at the current token: expected <what>, found <it>.
func (p *parser) failFound(what string) {
	p.fail(p.tok.pos, "expected %s, found %s", what, p.found())
}

// found describes the current token for a message.
func (p *parser) found() string {
	t := p.tok
	switch {
	case t.kind == tokEOF:
		return p.eof
	case t.kind == tokString:
		return "string " + strconv.Quote(clip(t.val))
	}
	return strconv.Quote(clip(p.lex.src[t.pos-1 : t.end]))
}

// clip shortens s for a message, keeping whole characters.
func clip(s string) string {
	if len(s) <= 24 {
		return s
	}
	for i := range s {
		if i >= 20 {
			return s[:i] + "…"
		}
	}
	return s
}

// isP reports whether the current token is the punctuation or operator s.
func (p *parser) isP(s string) bool { return p.tok.kind == tokPunct && p.tok.val == s }

// isKw reports whether the current token is the keyword kw, in any case.
func (p *parser) isKw(kw string) bool {
	return p.tok.kind == tokIdent && strings.EqualFold(p.tok.val, kw)
}

func (p *parser) atEnd() bool { return p.tok.kind == tokEOF || p.isP(";") }

// expectP consumes the punctuation s. A closer, when given, is named in
// the message too: in a list, either "," or "]" may come next.
func (p *parser) expectP(s string, closer ...string) {
	if !p.isP(s) {
		what := strconv.Quote(s)
		for _, c := range closer {
			what += " or " + strconv.Quote(c)
		}
		p.failFound(what)
	}
	p.next()
}

func (p *parser) expectKw(kw string) {
	if !p.isKw(kw) {
		p.failFound(strconv.Quote(kw))
	}
	p.next()
}

func (p *parser) expectEnd() {
	if !p.atEnd() {
		p.failFound("end of statement")
	}
}

// reserved are the words that cannot name a field or a collection,
// because a clause or an expression gives them a meaning.
var reserved = []string{
	"and", "or", "not", "in", "is", "null", "true", "false",
	"case", "when", "then", "else", "end",
	"select", "where", "order", "limit", "offset", "count", "require", "returning",
	"as", "asc", "desc",
}

func isReserved(word string) bool { return slices.Contains(reserved, strings.ToLower(word)) }

// name reads a plain identifier that is not a reserved word: a collection
// or a field being declared.
func (p *parser) name(what string) string {
	if p.tok.kind != tokIdent {
		p.failFound(what)
	}
	if isReserved(p.tok.val) {
		p.fail(p.tok.pos, "%s is a reserved word", p.tok.val)
	}
	s := p.tok.val
	p.next()
	return s
}
