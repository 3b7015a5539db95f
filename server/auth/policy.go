// Package auth decides what a request may do: it checks bearer tokens —
// the server's --token, or JWTs signed with --jwt-secret or a --jwt-keys
// key set — and turns a JWT's claims into the engine.Scope its statements
// run under, by the rules of a --policy file. The engine enforces the
// scope; this package only builds it.
package auth

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"regexp"
	"slices"
	"sort"
	"strings"
	"unicode/utf8"

	"github.com/fenecdb/fenec/server/engine"
	"github.com/fenecdb/fenec/server/fenecql"
)

// Policy is a parsed policy file: the rules any JWT is held to.
type Policy struct {
	rules []policyRule
}

type policyRule struct {
	engine.Rule
	role   string   // `for <role>`; "" applies to every token
	claims []string // the claims its filter reads, sorted, each once
	lists  []string // the claims it reads as lists: `x in $jwt.c`
}

// PolicyError is a policy line the parser refused, and where.
type PolicyError struct {
	File   string
	Line   int
	Column int
	Msg    string
}

func (e *PolicyError) Error() string {
	return fmt.Sprintf("%s line %d, column %d: %s", e.File, e.Line, e.Column, e.Msg)
}

var grantNames = map[string]engine.Grant{
	"read":   engine.GrantRead,
	"insert": engine.GrantInsert,
	"update": engine.GrantUpdate,
	"delete": engine.GrantDelete,
	"write":  engine.GrantWrite,
}

const expectGrant = "a grant (read, insert, update, update(...), delete, write)"

// ParsePolicy parses a policy file: one rule a line,
//
//	<collection|*> <grants> [where <filter>] [for <role>]
//
// with blank lines and lines starting with # ignored. name is how errors
// name the file. The first bad line is the error, a *PolicyError.
func ParsePolicy(name string, src []byte) (*Policy, error) {
	if !utf8.Valid(src) {
		return nil, &PolicyError{File: name, Line: 1, Column: 1, Msg: "the policy is not UTF-8 text"}
	}
	p := &Policy{}
	for i, line := range strings.Split(string(src), "\n") {
		line = strings.TrimSuffix(line, "\r")
		if t := strings.TrimSpace(line); t == "" || strings.HasPrefix(t, "#") {
			continue
		}
		lp := &lineParser{file: name, n: i + 1, src: line}
		r, err := lp.rule()
		if err != nil {
			return nil, err
		}
		p.rules = append(p.rules, r)
	}
	return p, nil
}

// lineParser reads one policy line left to right; pos is a byte offset.
type lineParser struct {
	file string
	n    int
	src  string
	pos  int
}

func (lp *lineParser) errAt(off int, format string, args ...any) *PolicyError {
	return &PolicyError{File: lp.file, Line: lp.n, Column: utf8.RuneCountInString(lp.src[:off]) + 1, Msg: fmt.Sprintf(format, args...)}
}

// found names what stands at the current position, for "expected …, found …".
func (lp *lineParser) found() string {
	rest := lp.src[lp.pos:]
	if rest == "" {
		return "the end of the line"
	}
	if w := wordRE.FindString(rest); w != "" {
		return fmt.Sprintf("%q", w)
	}
	r, _ := utf8.DecodeRuneInString(rest)
	return fmt.Sprintf("%q", string(r))
}

func (lp *lineParser) expected(what string) *PolicyError {
	return lp.errAt(lp.pos, "expected %s, found %s", what, lp.found())
}

var (
	wordRE  = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*`)
	spaceRE = regexp.MustCompile(`^[ \t]*`)
)

func (lp *lineParser) skipSpace() {
	lp.pos += len(spaceRE.FindString(lp.src[lp.pos:]))
}

// word consumes and returns an identifier, or "" without moving.
func (lp *lineParser) word() string {
	lp.skipSpace()
	w := wordRE.FindString(lp.src[lp.pos:])
	lp.pos += len(w)
	return w
}

// punct consumes c if it is next.
func (lp *lineParser) punct(c byte) bool {
	lp.skipSpace()
	if lp.pos < len(lp.src) && lp.src[lp.pos] == c {
		lp.pos++
		return true
	}
	return false
}

func (lp *lineParser) rule() (policyRule, error) {
	r := policyRule{Rule: engine.Rule{Name: fmt.Sprintf("policy line %d", lp.n), Text: strings.TrimSpace(lp.src)}}
	lp.skipSpace()
	if lp.punct('*') {
		r.Coll = "*"
	} else if r.Coll = lp.word(); r.Coll == "" {
		return r, lp.expected("a collection name or *")
	}
	if err := lp.grants(&r); err != nil {
		return r, err
	}
	lp.skipSpace()
	start := lp.pos
	switch kw := strings.ToLower(lp.word()); kw {
	case "":
		if lp.pos < len(lp.src) {
			return r, lp.expected("where, for or the end of the line")
		}
		return r, nil
	case "for":
		return r, lp.role(&r)
	case "where":
		return r, lp.filter(&r)
	default:
		lp.pos = start
		return r, lp.expected("where, for or the end of the line")
	}
}

// grants reads `g, g, …`; update(f1, f2) limits the fields an update may
// change.
func (lp *lineParser) grants(r *policyRule) error {
	for {
		lp.skipSpace()
		start := lp.pos
		w := strings.ToLower(lp.word())
		g, ok := grantNames[w]
		if !ok {
			lp.pos = start
			return lp.expected(expectGrant)
		}
		if r.Grants&g != 0 {
			return lp.errAt(start, "%s repeats a grant given before it on this line", w)
		}
		r.Grants |= g
		if w == "update" && lp.punct('(') {
			r.Fields = []string{}
			for {
				lp.skipSpace()
				at := lp.pos
				f := lp.word()
				if f == "" {
					return lp.expected("a field name")
				}
				if f == "id" {
					return lp.errAt(at, "update(...) cannot name id: no write changes it")
				}
				if slices.Contains(r.Fields, f) {
					return lp.errAt(at, "update(...) names %s twice", f)
				}
				r.Fields = append(r.Fields, f)
				if lp.punct(')') {
					break
				}
				if !lp.punct(',') {
					return lp.expected(`"," or ")"`)
				}
			}
		}
		if !lp.punct(',') {
			return nil
		}
	}
}

func (lp *lineParser) role(r *policyRule) error {
	lp.skipSpace()
	if r.role = lp.word(); r.role == "" {
		return lp.expected("a role after for")
	}
	lp.skipSpace()
	if lp.pos < len(lp.src) {
		return lp.expected("the end of the line after the role")
	}
	return nil
}

// filter parses the rest of the line as a FenecQL expression, less a
// trailing `for <role>`. Errors of the expression parser are moved to the
// line's columns.
func (lp *lineParser) filter(r *policyRule) error {
	lp.skipSpace()
	start := lp.pos
	text := lp.src[start:]
	if at := roleSuffix(text); at >= 0 {
		lp.pos = start + at
		lp.word() // "for"
		if err := lp.role(r); err != nil {
			return err
		}
		text = text[:at]
	}
	if strings.TrimSpace(text) == "" {
		lp.pos = start
		return lp.expected("a filter after where")
	}
	e, err := fenecql.ParseExpr(text)
	if err != nil {
		var fe *fenecql.Error
		if !errors.As(err, &fe) {
			return lp.errAt(start, "%v", err)
		}
		off := start + len(strings.TrimRight(text, " \t")) // no position: the filter's end
		if fe.Pos > 0 {
			off = start + int(fe.Pos) - 1
		}
		return lp.errAt(min(off, len(lp.src)), "%s", fe.Msg)
	}
	var bad *PolicyError
	fenecql.Walk(e, func(x fenecql.Expr) {
		if bad != nil {
			return
		}
		switch x := x.(type) {
		case *fenecql.Param:
			bad = lp.errAt(start+int(x.Pos)-1, "$%d: a policy has no parameters; $jwt.<claim> reads the token's claims", x.N)
		case *fenecql.Ref:
			// A rule that reads and deletes has no row as written, so
			// new.x there would read null: refuse it rather than let
			// `new.x is null` admit every row. Such a rule takes a line
			// of its own.
			if len(x.Path) > 1 && x.Path[0] == "new" && r.Grants&(engine.GrantRead|engine.GrantDelete) != 0 {
				bad = lp.errAt(start+int(x.Pos)-1, "%s reads the row as written, which only insert and update rules have; give read and delete their own line", strings.Join(x.Path, "."))
			}
		case *fenecql.In:
			if c, ok := x.List.(*fenecql.Claim); ok {
				r.lists = append(r.lists, c.Name)
			}
		case *fenecql.Claim:
			if !slices.Contains(r.claims, x.Name) {
				r.claims = append(r.claims, x.Name)
			}
		}
	})
	if bad != nil {
		return bad
	}
	sort.Strings(r.claims)
	r.Filter = e
	return nil
}

// roleSuffix returns where a trailing `for <role>` starts in a filter's
// text, or -1: the last two words, outside strings and comments, when the
// first is "for" (the statement's lexer reads them: fenecql.TrailingWords).
func roleSuffix(text string) int {
	starts, words, ok := fenecql.TrailingWords(text, 2)
	if !ok || !strings.EqualFold(words[0], "for") {
		return -1
	}
	return starts[0]
}

// Scope returns the access of a token with the given claims (as decoded
// from its JSON payload): the claims as FenecQL values, so a list claim
// works with `in`, and the rules that apply to it — those whose role, if
// any, is the token's `role` claim (a string, or a list holding it), and
// whose filter reads only claims the token has. A null claim counts as
// missing, so `$jwt.x is null` cannot admit rows for a token without x;
// and a claim a rule reads with `in` must be a list, or the rule would
// fail every statement it applies to rather than admit nothing. A claim a
// rule compares with a field must fit the field's type too; the engine
// checks that, knowing the collection (engine.Scope).
func (p *Policy) Scope(claims map[string]any) *engine.Scope {
	s := &engine.Scope{Claims: make(map[string]fenecql.Value, len(claims)), Rules: []engine.Rule{}}
	for k, v := range claims {
		if fv, err := fenecql.FromGo(v); err == nil && !fv.IsNull() {
			s.Claims[k] = fv
		}
	}
	// The token's exp ends the scope: a held claim admitted before it does
	// not run after it.
	if exp, ok := claims["exp"].(json.Number); ok {
		if sec, err := exp.Float64(); err == nil && sec > 0 && sec < math.MaxInt64/1000 {
			s.Until = int64(math.Ceil(sec * 1000))
		}
	}
	for _, r := range p.rules {
		if r.role != "" && !hasRole(claims["role"], r.role) {
			continue
		}
		if slices.ContainsFunc(r.claims, func(c string) bool { _, ok := s.Claims[c]; return !ok }) ||
			slices.ContainsFunc(r.lists, func(c string) bool { return s.Claims[c].Kind() != fenecql.KindList }) {
			continue
		}
		s.Rules = append(s.Rules, r.Rule)
	}
	return s
}

func hasRole(claim any, role string) bool {
	switch c := claim.(type) {
	case string:
		return c == role
	case []any:
		return slices.Contains(c, any(role))
	}
	return false
}

// ScopeKey names a scope for Fenec-Wait lines: held claims under equal
// keys pick among the same rows, since the same rules apply to them with
// the same values of the claims those rules read. Claims no rule reads
// (exp, iat, …) do not split lines.
func (p *Policy) ScopeKey(s *engine.Scope) string {
	h := sha256.New()
	for _, r := range s.Rules {
		fmt.Fprintf(h, "%s\x00", r.Name)
	}
	var read []string
	for _, r := range p.rules {
		if slices.ContainsFunc(s.Rules, func(x engine.Rule) bool { return x.Name == r.Name }) {
			read = append(read, r.claims...)
		}
	}
	sort.Strings(read)
	for _, c := range slices.Compact(read) {
		fmt.Fprintf(h, "\x01%s=%s", c, fenecql.AppendJSON(nil, s.Claims[c]))
	}
	return "jwt:" + hex.EncodeToString(h.Sum(nil)[:12])
}
