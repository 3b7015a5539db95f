package fenecql

import (
	"fmt"
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"
)

// tokKind is the kind of a lexical token.
type tokKind uint8

const (
	tokEOF    tokKind = iota
	tokError          // val is the message
	tokIdent          // a word: a keyword or a name
	tokPath           // a dotted run of words: payload.to
	tokInt            // val is the digits, converted by the parser so -9223372036854775808 folds
	tokFloat          // likewise
	tokString         // val is the decoded text
	tokParam          // $n; val is the digits
	tokClaim          // $jwt.name; val is the name
	tokPunct          // an operator or punctuation, ";" included; val is its text
)

// token is one token of a statement. pos is where it starts (1-based), end
// where it stops (a 0-based byte offset, exclusive), so the parser can take
// the text of a span of tokens.
type token struct {
	kind tokKind
	pos  Pos
	end  int
	val  string
}

// maxParam bounds $n so a parameter number always fits an int and names
// something a request could plausibly send.
const maxParam = 65535

// lexer hands out the tokens of src one at a time, on demand, so a parse
// error ahead of a lexical one is reported first.
type lexer struct {
	src string
	pos int // 0-based offset of the next byte to read
}

func (l *lexer) next() token {
	l.skipSpace()
	start := l.pos
	if start >= len(l.src) {
		return token{kind: tokEOF, pos: Pos(start + 1), end: start}
	}
	c := l.src[start]
	switch {
	case isIdentStart(c):
		return l.word(start)
	case isDigit(c):
		return l.number(start)
	case c == '"' || c == '\'':
		return l.str(start)
	case c == '$':
		return l.param(start)
	}
	if start+1 < len(l.src) {
		switch op := l.src[start : start+2]; op {
		case "!=", "<>", "<=", ">=":
			l.pos += 2
			return l.tok(tokPunct, start, op)
		}
	}
	if strings.IndexByte("*/%+-=<>{}[](),:.@;", c) >= 0 {
		l.pos++
		return l.tok(tokPunct, start, l.src[start:l.pos])
	}
	r, _ := utf8.DecodeRuneInString(l.src[start:])
	if r == utf8.RuneError {
		return l.fail(start, fmt.Sprintf("unexpected byte 0x%02x", c))
	}
	return l.fail(start, fmt.Sprintf("unexpected character %q", string(r)))
}

func (l *lexer) tok(kind tokKind, start int, val string) token {
	return token{kind: kind, pos: Pos(start + 1), end: l.pos, val: val}
}

// fail returns an error token and stops the lexer, so the parser never
// reads past it.
func (l *lexer) fail(start int, msg string) token {
	l.pos = len(l.src)
	return token{kind: tokError, pos: Pos(start + 1), end: l.pos, val: msg}
}

func (l *lexer) skipSpace() {
	for l.pos < len(l.src) {
		switch c := l.src[l.pos]; {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f':
			l.pos++
		case strings.HasPrefix(l.src[l.pos:], "--"):
			if i := strings.IndexByte(l.src[l.pos:], '\n'); i >= 0 {
				l.pos += i + 1
			} else {
				l.pos = len(l.src)
			}
		default:
			return
		}
	}
}

// word reads an identifier and, when dots join it to more words, a path.
// Path segments after the first may start with a digit: payload.tags.0
// reads an element of a json list.
func (l *lexer) word(start int) token {
	l.identRun()
	kind := tokIdent
	for l.pos+1 < len(l.src) && l.src[l.pos] == '.' && isIdentChar(l.src[l.pos+1]) {
		l.pos++
		l.identRun()
		kind = tokPath
	}
	return l.tok(kind, start, l.src[start:l.pos])
}

func (l *lexer) identRun() {
	for l.pos < len(l.src) && isIdentChar(l.src[l.pos]) {
		l.pos++
	}
}

func (l *lexer) digits() {
	for l.pos < len(l.src) && isDigit(l.src[l.pos]) {
		l.pos++
	}
}

// number reads digits [. digits] [e [+-] digits]. Its value is left to the
// parser, which knows whether a minus sign comes before it.
func (l *lexer) number(start int) token {
	kind := tokInt
	l.digits()
	if l.pos+1 < len(l.src) && l.src[l.pos] == '.' && isDigit(l.src[l.pos+1]) {
		kind = tokFloat
		l.pos++
		l.digits()
	}
	if l.pos < len(l.src) && (l.src[l.pos] == 'e' || l.src[l.pos] == 'E') {
		i := l.pos + 1
		if i < len(l.src) && (l.src[i] == '+' || l.src[i] == '-') {
			i++
		}
		if i < len(l.src) && isDigit(l.src[i]) {
			kind = tokFloat
			l.pos = i
			l.digits()
		}
	}
	if l.pos < len(l.src) && isIdentChar(l.src[l.pos]) {
		l.identRun()
		return l.fail(start, fmt.Sprintf("bad number %q", l.src[start:l.pos]))
	}
	return l.tok(kind, start, l.src[start:l.pos])
}

var escapes = map[byte]byte{'n': '\n', 't': '\t', 'r': '\r', '\\': '\\', '"': '"', '\'': '\'', '/': '/'}

// str reads a quoted string, decoding its escapes.
func (l *lexer) str(start int) token {
	quote := l.src[start]
	l.pos++
	var b strings.Builder
	for {
		if l.pos >= len(l.src) {
			return l.fail(start, "unterminated string")
		}
		c := l.src[l.pos]
		switch {
		case c == quote:
			l.pos++
			s := b.String()
			if !utf8.ValidString(s) {
				return l.fail(start, "string is not valid UTF-8")
			}
			return l.tok(tokString, start, s)
		case c != '\\':
			b.WriteByte(c)
			l.pos++
		case l.pos+1 >= len(l.src):
			return l.fail(start, "unterminated string")
		case l.src[l.pos+1] == 'u':
			r, ok := l.unicodeEscape()
			if !ok {
				return l.fail(l.pos, fmt.Sprintf("bad escape %q", l.src[l.pos:min(l.pos+6, len(l.src))]))
			}
			b.WriteRune(r)
		default:
			e, ok := escapes[l.src[l.pos+1]]
			if !ok {
				_, n := utf8.DecodeRuneInString(l.src[l.pos+1:])
				return l.fail(l.pos, fmt.Sprintf("bad escape %q", l.src[l.pos:l.pos+1+n]))
			}
			b.WriteByte(e)
			l.pos += 2
		}
	}
}

// unicodeEscape reads a \u escape and its four hex digits at l.pos,
// joining a UTF-16 surrogate pair written as two escapes; a lone surrogate
// is refused.
func (l *lexer) unicodeEscape() (rune, bool) {
	r, ok := hex4(l.src[l.pos:])
	if !ok {
		return 0, false
	}
	if !utf16.IsSurrogate(r) {
		l.pos += 6
		return r, true
	}
	lo, ok := hex4(l.src[l.pos+6:])
	if !ok {
		return 0, false
	}
	if p := utf16.DecodeRune(r, lo); p != utf8.RuneError {
		l.pos += 12
		return p, true
	}
	return 0, false
}

// hex4 decodes a leading \u escape and its four hex digits, in FenecQL
// text and in JSON alike; nothing else (no sign, no underscore) passes.
func hex4[T string | []byte](s T) (rune, bool) {
	if len(s) < 6 || s[0] != '\\' || s[1] != 'u' {
		return 0, false
	}
	var r rune
	for i := 2; i < 6; i++ {
		switch c := s[i]; {
		case c >= '0' && c <= '9':
			r = r<<4 | rune(c-'0')
		case c >= 'a' && c <= 'f':
			r = r<<4 | rune(c-'a'+10)
		case c >= 'A' && c <= 'F':
			r = r<<4 | rune(c-'A'+10)
		default:
			return 0, false
		}
	}
	return r, true
}

// param reads $n or $jwt.<claim>.
func (l *lexer) param(start int) token {
	l.pos++
	l.identRun()
	word := l.src[start+1 : l.pos]
	if strings.EqualFold(word, "jwt") && l.pos+1 < len(l.src) && l.src[l.pos] == '.' && isIdentChar(l.src[l.pos+1]) {
		l.pos++
		l.identRun()
		return l.tok(tokClaim, start, l.src[start+5:l.pos])
	}
	if word == "" || strings.TrimLeft(word, "0123456789") != "" {
		return l.fail(start, fmt.Sprintf("unknown parameter %q ($1, $2, ... or $jwt.<claim>)", l.src[start:l.pos]))
	}
	switch n, err := strconv.Atoi(word); {
	case err != nil || n > maxParam:
		return l.fail(start, fmt.Sprintf("parameter %s out of range", l.src[start:l.pos]))
	case n == 0:
		return l.fail(start, "parameters count from $1")
	}
	return l.tok(tokParam, start, word)
}

func isDigit(c byte) bool      { return '0' <= c && c <= '9' }
func isIdentStart(c byte) bool { return c == '_' || 'a' <= c|0x20 && c|0x20 <= 'z' }
func isIdentChar(c byte) bool  { return isIdentStart(c) || isDigit(c) }

// TrailingWords returns where the last n tokens of src start (0-based
// byte offsets) and their text, when they are words (a name or keyword,
// not a path) and the end of src follows them — strings, comments and
// spaces read as the statement's own lexer reads them; ok is false when
// they are not, or src does not lex. A policy's `… for <role>` is found
// with it, so FenecQL's strings and comments have one scanner.
func TrailingWords(src string, n int) (starts []int, words []string, ok bool) {
	l := &lexer{src: src}
	var last []token
	for {
		t := l.next()
		switch t.kind {
		case tokError:
			return nil, nil, false
		case tokEOF:
			if len(last) < n {
				return nil, nil, false
			}
			for _, w := range last[len(last)-n:] {
				if w.kind != tokIdent {
					return nil, nil, false
				}
				starts = append(starts, int(w.pos)-1)
				words = append(words, w.val)
			}
			return starts, words, true
		}
		last = append(last, t)
	}
}
