package h1

import (
	"bytes"
	"net/http"
)

// The request heads the connection server (conn.go) reads itself: a
// strict subset of HTTP/1.1 that net/http reads the same way, byte for
// byte. Anything outside it is not an error here: the connection goes to
// net/http, which answers it as it always has (docs/architecture.md,
// "Connections").

// maxHeadLines bounds the header lines of a head read here; a head with
// more goes to net/http.
const maxHeadLines = 64

// headVerdict is what scanning the bytes read so far found.
type headVerdict int

const (
	headMore headVerdict = iota // every complete line is in the subset; the head goes on
	headDone                    // a whole head, in the subset
	headOdd                     // outside the subset: net/http's to read
)

type headLine struct{ ks, ke, vs, ve int32 }

// head is a request head scanned in place: the spans of its parts in the
// bytes it was scanned from.
type head struct {
	method string // one of the methods below, as a constant
	ts, te int32  // the request target
	n      int    // the head's length, its empty line included
	lines  [maxHeadLines]headLine
	nl     int
	cl     int64 // the Content-Length; -1: none
	host   int   // the Host line's index
	close  bool  // Connection: close
}

// scan reads b, the bytes from the start of a request on. Every complete
// line is checked as it comes, so a line outside the subset goes to
// net/http at once, as net/http (reading line by line) would answer it at
// once, not after a timeout.
func (h *head) scan(b []byte) headVerdict {
	eol := bytes.IndexByte(b, '\n')
	if eol < 0 {
		return headMore
	}
	if eol == 0 || b[eol-1] != '\r' {
		return headOdd
	}
	line := b[:eol-1]
	sp := bytes.IndexByte(line, ' ')
	if sp <= 0 {
		return headOdd
	}
	// Only the common methods: CONNECT and PRI mean something else to
	// net/http, and any other token is left to it.
	switch string(line[:sp]) {
	case "GET":
		h.method = http.MethodGet
	case "POST":
		h.method = http.MethodPost
	case "HEAD":
		h.method = http.MethodHead
	case "PUT":
		h.method = http.MethodPut
	case "DELETE":
		h.method = http.MethodDelete
	case "OPTIONS":
		h.method = http.MethodOptions
	case "PATCH":
		h.method = http.MethodPatch
	default:
		return headOdd
	}
	const proto = " HTTP/1.1"
	rest := line[sp+1:]
	if len(rest) <= len(proto) || string(rest[len(rest)-len(proto):]) != proto {
		return headOdd
	}
	target := rest[:len(rest)-len(proto)]
	if target[0] != '/' { // origin-form only
		return headOdd
	}
	for _, c := range target {
		if c <= ' ' || c >= 0x7f {
			return headOdd
		}
	}
	h.ts, h.te = int32(sp+1), int32(sp+1+len(target))
	h.nl, h.cl, h.host, h.close = 0, -1, -1, false
	connection := false
	i := eol + 1
	for {
		rest := b[i:]
		eol := bytes.IndexByte(rest, '\n')
		if eol < 0 {
			return headMore
		}
		if eol == 0 || rest[eol-1] != '\r' {
			return headOdd // a bare LF
		}
		if eol == 1 {
			h.n = i + 2
			break
		}
		line := rest[:eol-1]
		k := 0
		for k < len(line) && isTokenByte(line[k]) {
			k++
		}
		// A name of token bytes, then the colon: no space before it, no
		// obs-fold (a line starting with a space).
		if k == 0 || k == len(line) || line[k] != ':' {
			return headOdd
		}
		vs, ve := k+1, len(line)
		for j := vs; j < ve; j++ {
			if c := line[j]; c != '\t' && (c < ' ' || c >= 0x7f) {
				return headOdd // a CTL, a bare CR, or a byte past ASCII
			}
		}
		for vs < ve && (line[vs] == ' ' || line[vs] == '\t') {
			vs++
		}
		for ve > vs && (line[ve-1] == ' ' || line[ve-1] == '\t') {
			ve--
		}
		if h.nl == maxHeadLines {
			return headOdd
		}
		name, value := line[:k], line[vs:ve]
		switch {
		case equalFold(name, "content-length"):
			if h.cl >= 0 {
				return headOdd // net/http takes equal repeats; left to it
			}
			if h.cl = digits(value); h.cl < 0 {
				return headOdd
			}
		case equalFold(name, "host"):
			if h.host >= 0 || !plainHost(value) {
				return headOdd
			}
			h.host = h.nl
		case equalFold(name, "connection"):
			switch {
			case connection:
				return headOdd
			case equalFold(value, "close"):
				h.close = true
			case !equalFold(value, "keep-alive"):
				return headOdd
			}
			connection = true
		case equalFold(name, "transfer-encoding"), equalFold(name, "expect"), equalFold(name, "upgrade"):
			// Chunked bodies, 100-continue and protocol switches are
			// net/http's; so is a head with both framings (GuardFraming
			// answers it on the connection handed over).
			return headOdd
		}
		h.lines[h.nl] = headLine{int32(i), int32(i + k), int32(i + vs), int32(i + ve)}
		h.nl++
		i += eol + 1
	}
	if h.host < 0 {
		return headOdd // net/http's 400: HTTP/1.1 needs a Host
	}
	return headDone
}

// isTokenByte reports whether c is a tchar (RFC 9110 §5.6.2).
func isTokenByte(c byte) bool { return c < 0x80 && tokenBytes[c] }

var tokenBytes = func() (t [128]bool) {
	for c := '0'; c <= '9'; c++ {
		t[c] = true
	}
	for c := 'a'; c <= 'z'; c++ {
		t[c], t[c-'a'+'A'] = true, true
	}
	for _, c := range "!#$%&'*+-.^_`|~" {
		t[c] = true
	}
	return
}()

// equalFold compares ASCII b with lower-case s, ignoring b's case.
func equalFold(b []byte, s string) bool {
	if len(b) != len(s) {
		return false
	}
	for i := range b {
		c := b[i]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		if c != s[i] {
			return false
		}
	}
	return true
}

// digits returns a Content-Length of 1 to 18 digits, else -1 (net/http
// takes up to 2⁶³-1; longer is left to it).
func digits(b []byte) int64 {
	if len(b) == 0 || len(b) > 18 {
		return -1
	}
	var n int64
	for _, c := range b {
		if c < '0' || c > '9' {
			return -1
		}
		n = n*10 + int64(c-'0')
	}
	return n
}

// plainHost reports whether a Host value is a name or address with an
// optional port, of bytes every Host check accepts.
func plainHost(b []byte) bool {
	if len(b) == 0 {
		return false
	}
	for _, c := range b {
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		case c == '.', c == '-', c == ':', c == '[', c == ']', c == '_':
		default:
			return false
		}
	}
	return true
}

// plainPath reports whether a target is a path of bytes net/url leaves as
// they are (unreserved and "/"): its URL is then {Path: target}, exactly
// what url.ParseRequestURI returns. Any other target is parsed by net/url.
func plainPath(t string) bool {
	for i := 0; i < len(t); i++ {
		c := t[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		case c == '/', c == '-', c == '.', c == '_', c == '~':
		default:
			return false
		}
	}
	return true
}

// canonicalKey rewrites a token name in place as textproto's
// CanonicalMIMEHeaderKey would: upper case first and after each '-',
// lower case elsewhere.
func canonicalKey(b []byte) {
	upper := true
	for i, c := range b {
		if upper && 'a' <= c && c <= 'z' {
			c -= 'a' - 'A'
		} else if !upper && 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		b[i] = c
		upper = c == '-'
	}
}
