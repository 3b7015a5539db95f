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
	m  map[string]fenecql.Stmt
}

// cacheMax bounds the cache; when full it starts again empty, which costs a
// parse per text once rather than an eviction list on every hit. Only texts
// up to cacheText bytes are kept: a worker's statements are short, and a
// put of a thousand documents is not sent twice.
const (
	cacheMax  = 4096
	cacheText = 4096
)

var shared = &stmtCache{m: map[string]fenecql.Stmt{}}

func (c *stmtCache) parse(q string) (fenecql.Stmt, error) {
	if len(q) > cacheText {
		return fenecql.Parse(q)
	}
	c.mu.Lock()
	s, ok := c.m[q]
	c.mu.Unlock()
	if ok {
		return s, nil
	}
	s, err := fenecql.Parse(q)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	if len(c.m) >= cacheMax {
		c.m = map[string]fenecql.Stmt{}
	}
	c.m[q] = s
	c.mu.Unlock()
	return s, nil
}

// ParseStatement parses one statement, answering the shared parse of a
// text seen before.
func ParseStatement(q string) (fenecql.Stmt, error) { return shared.parse(q) }
