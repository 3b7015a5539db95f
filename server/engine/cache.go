package engine

import (
	"sync"

	"github.com/fenecdb/fenec/server/fenecql"
)

// stmtCache keeps parsed statements by their text: a worker sends the same
// claim, ack and fail texts over and over with other parameters, and a
// parsed statement is never changed, so it is shared.
type stmtCache struct {
	mu sync.Mutex
	m  map[string]cached
}

// cached is a parsed statement and its text, kept as the map's key is.
type cached struct {
	stmt fenecql.Stmt
	text string
}

// cacheMax bounds the cache; when full it starts again empty, which costs a
// parse per text once rather than an eviction list on every hit. Only texts
// up to cacheText bytes are kept: a worker's statements are short, and a
// put of a thousand documents is not sent twice.
const (
	cacheMax  = 4096
	cacheText = 4096
)

var shared = &stmtCache{m: map[string]cached{}}

func (c *stmtCache) parse(q string) (fenecql.Stmt, error) {
	s, _, err := c.parseText(nil, q)
	return s, err
}

// parseText parses the text b, or q when b is nil, and returns it as a
// string too: the cache's own for a text seen before, so that a request's
// statement, read as bytes from its body, is looked up without being
// copied.
func (c *stmtCache) parseText(b []byte, q string) (fenecql.Stmt, string, error) {
	n := len(q)
	if b != nil {
		n = len(b)
	}
	if n > cacheText {
		if b != nil {
			q = string(b)
		}
		s, err := fenecql.Parse(q)
		return s, q, err
	}
	c.mu.Lock()
	var e cached
	var ok bool
	if b != nil {
		e, ok = c.m[string(b)] // no copy: a map index by a converted []byte
	} else {
		e, ok = c.m[q]
	}
	c.mu.Unlock()
	if ok {
		return e.stmt, e.text, nil
	}
	if b != nil {
		q = string(b)
	}
	s, err := fenecql.Parse(q)
	if err != nil {
		return nil, q, err
	}
	c.mu.Lock()
	if len(c.m) >= cacheMax {
		c.m = map[string]cached{}
	}
	c.m[q] = cached{stmt: s, text: q}
	c.mu.Unlock()
	return s, q, nil
}

// ParseStatement parses one statement, answering the shared parse of a
// text seen before.
func ParseStatement(q string) (fenecql.Stmt, error) { return shared.parse(q) }

// ParseStatementText is ParseStatement of a text as bytes (a request
// body's), answering the text as a string as well; b is not kept.
func ParseStatementText(b []byte) (fenecql.Stmt, string, error) {
	if b == nil {
		b = []byte{}
	}
	return shared.parseText(b, "")
}
