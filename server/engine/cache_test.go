package engine

import (
	"strconv"
	"strings"
	"testing"
)

func TestStatementCache(t *testing.T) {
	c := &stmtCache{m: map[string]cached{}}
	a, err := c.parse(`get jobs where id = $1`)
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := c.parse(`get jobs where id = $1`); b != a {
		t.Error("the same text parsed twice")
	}
	// A body's bytes find the same parse, with its text, and copy nothing.
	body := []byte(`get jobs where id = $1`)
	if b, text, err := c.parseText(body, ""); b != a || text != string(body) || err != nil {
		t.Errorf("the text as bytes: %v %q %v", b == a, text, err)
	}
	if n := testing.AllocsPerRun(100, func() { _, _, _ = c.parseText(body, "") }); n != 0 {
		t.Errorf("a text seen before as bytes: %v allocations", n)
	}
	if _, err := c.parse(`get jobs where`); err == nil || len(c.m) != 1 {
		t.Errorf("a bad text: %v, %d cached", err, len(c.m))
	}
	long := `put jobs [` + strings.Repeat(`{attempts: 0}, `, cacheText/10) + `{attempts: 0}]`
	if _, err := c.parse(long); err != nil || len(c.m) != 1 {
		t.Errorf("a long text: %v, %d cached", err, len(c.m))
	}
	for i := 0; i <= cacheMax; i++ {
		if _, err := c.parse(`get jobs limit ` + strconv.Itoa(i)); err != nil {
			t.Fatal(err)
		}
	}
	if len(c.m) > cacheMax || len(c.m) == 0 {
		t.Errorf("%d cached, at most %d", len(c.m), cacheMax)
	}
}
