package wait

import (
	"slices"
	"strconv"
	"strings"

	"github.com/fenecdb/fenec/server/engine"
	"github.com/fenecdb/fenec/server/fenecql"
)

// lineKey names the rows a request would take: for each of its set and del
// statements, the collection, the canonical filter, order and limit, and
// the values of the parameters those read — but not the patch, since what
// a claim writes does not change which rows it takes. scope is the
// caller's identity under access rules, which narrow the rows too.
func lineKey(ps []engine.Parsed, scope string) (key string, colls []string) {
	var b strings.Builder
	b.WriteString(scope)
	for _, p := range ps {
		if !engine.IsWrite(p.Stmt) {
			continue
		}
		coll, cl := engine.ClausesOf(p.Stmt)
		if cl == nil {
			continue
		}
		colls = appendOnce(colls, coll)
		b.WriteString("\x00" + coll + "\x00" + fenecql.Format(cl.Where))
		var used []int
		collect := func(e fenecql.Expr) { used = params(e, used) }
		collect(cl.Where)
		b.WriteString("\x00order")
		for _, o := range cl.Order {
			b.WriteString(" " + fenecql.Format(o.Expr))
			if o.Desc {
				b.WriteString(" desc")
			}
			collect(o.Expr)
		}
		if n := cl.Near; n != nil {
			// near stands for an order: claims near two points are two lines.
			b.WriteString("\x00near " + n.Field + " " + fenecql.Format(n.Point))
			if n.Exact {
				b.WriteString(" exact")
			}
			collect(n.Point)
		}
		b.WriteString("\x00limit " + fenecql.Format(cl.Limit))
		collect(cl.Limit)
		for _, n := range used {
			b.WriteString("\x00$" + strconv.Itoa(n) + "=")
			if n <= len(p.Params) {
				b.Write(fenecql.AppendJSON(nil, p.Params[n-1]))
			}
		}
	}
	return b.String(), colls
}

func appendOnce(list []string, s string) []string {
	for _, x := range list {
		if x == s {
			return list
		}
	}
	return append(list, s)
}

// params appends the parameter numbers e reads, each once.
func params(e fenecql.Expr, out []int) []int {
	fenecql.Walk(e, func(x fenecql.Expr) {
		if p, ok := x.(*fenecql.Param); ok && !slices.Contains(out, p.N) {
			out = append(out, p.N)
		}
	})
	return out
}

// beats reports whether bid a, of a claim that arrived at seq sa, takes a
// row before bid b of one that arrived at sb: by the claims' own order
// when both rank rows alike and their keys compare, else by who came first.
func beats(a engine.Bid, sa uint64, b engine.Bid, sb uint64) bool {
	if a.Err != nil || b.Err != nil {
		// An error is answered at once: it takes nothing from anyone.
		return a.Err != nil && (b.Err == nil || sa < sb)
	}
	if a.Desc == b.Desc && comparable(a.Key, b.Key) {
		c := fenecql.Compare(a.Key, b.Key)
		if a.Desc {
			c = -c
		}
		if c != 0 {
			return c < 0
		}
	}
	return sa < sb
}

func comparable(a, b fenecql.Value) bool {
	num := func(v fenecql.Value) bool { return v.IsNumber() || v.Kind() == fenecql.KindTime }
	switch {
	case a.IsNull() || b.IsNull():
		return false
	case num(a) && num(b):
		return true
	}
	return a.Kind() == b.Kind()
}
