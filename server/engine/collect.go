package engine

import (
	"sort"

	"github.com/fenecdb/fenec/server/fenecql"
)

// collect returns the documents the plan picks, in the statement's order, with
// its offset and limit applied. rowsRead counts every document it tested
// that the scope admits.
func (p *plan) collect() ([]*Doc, error) {
	want := -1
	if p.limit >= 0 {
		want = p.offset + p.limit
		if p.limit == 0 {
			return nil, nil
		}
	}
	var out []*Doc
	switch {
	case p.acc == accIDs || p.acc == accHash:
		out = p.rows(min(len(p.ids), 1024))
	case p.ordered && want > 0:
		out = p.rows(min(want, 1024)) // a claim's page
	}
	var err error
	visit := func(d *Doc) bool {
		if p.visited++; p.visited%checkEvery == 0 {
			if err = stopped(p.ctx); err != nil {
				return false
			}
		}
		if p.rd.due() {
			if err = p.rd.yield(); err != nil {
				return false
			}
		}
		if d == nil || p.c.ttls != nil && p.c.lapsed(d, p.env.Now) || !p.admits(d) {
			return true
		}
		p.rowsRead++
		ok, e := p.match(d)
		if e != nil {
			err = e
			return false
		}
		if ok && p.count {
			p.counted++
		} else if ok {
			out = append(out, d)
			if p.ordered && want >= 0 && len(out) >= want {
				return false
			}
		}
		return true
	}
	byID := func(id int64) bool { return visit(p.c.get(id)) }
	switch {
	case p.acc == accScan && p.count && p.where == nil && p.scope == nil && p.c.ttls == nil && p.c.ev != nil:
		// Every row counts, and under eviction visiting them would read
		// the evicted ones back from the file only to count them: the
		// count is the id map's, as many rows as a scan would have read.
		p.counted = p.c.Len()
		p.rowsRead = p.counted
	case p.acc == accScan:
		p.c.scan(visit)
	case p.acc == accIDs || p.acc == accHash:
		if p.c.ev != nil && len(p.ids) > 1 {
			// Under eviction the evicted among the ids are read back in
			// one query, not one each.
			ids, more := p.ids, true
			for len(ids) > 0 && more {
				n := min(len(ids), pageMax)
				for _, d := range p.c.getMany(ids[:n]) {
					if more = visit(d); !more {
						break
					}
				}
				ids = ids[n:]
			}
			break
		}
		for _, id := range p.ids {
			if !byID(id) {
				break
			}
		}
	case p.acc == accRange || p.acc == accWalk:
		p.c.byField[p.field].(*sortedIndex).walk(p.lo, p.hi, p.desc, byID)
	case p.acc == accNearest:
		// near (unlike order distance) answers only rows with a point.
		p.c.byField[p.field].(*geoIndex).nearest(p.point, p.near, byID)
	case p.acc == accBox:
		var ids []int64
		p.c.byField[p.field].(*geoIndex).box(p.boxMin, p.boxMax, func(id int64) bool {
			ids = append(ids, id)
			return true
		})
		sortIDs(ids)
		for _, id := range ids {
			if !byID(id) {
				break
			}
		}
	}
	if err != nil || p.count {
		return nil, err
	}
	if !p.ordered {
		if out, err = p.sort(out); err != nil {
			return nil, err
		}
	}
	if p.offset > 0 {
		if p.offset >= len(out) {
			return nil, nil
		}
		out = out[p.offset:]
	}
	if p.limit >= 0 && len(out) > p.limit {
		out = out[:p.limit]
	}
	return out, nil
}

// rows returns an empty slice with room for n rows: the plan's room when
// it is large enough.
func (p *plan) rows(n int) []*Doc {
	if n <= cap(p.room) {
		return p.room[:0]
	}
	return make([]*Doc, 0, n)
}

// admits reports whether the scope lets the statement see d: whether one
// of its rules admits it. A rule whose filter fails on the row (a type
// error) does not: its error would tell of a row the token may not see.
func (p *plan) admits(d *Doc) bool {
	if p.scope == nil {
		return true
	}
	p.env.Row = d
	defer func() { p.env.Row = nil }()
	for _, f := range p.scope {
		if v, err := fenecql.Eval(f, p.env); err == nil && v.Kind() == fenecql.KindBool && v.Bool() {
			return true
		}
	}
	return false
}

func (p *plan) match(d *Doc) (bool, error) {
	if p.where == nil {
		return true, nil
	}
	p.env.Row = d
	v, err := fenecql.Eval(p.where, p.env)
	p.env.Row = nil
	if err != nil {
		return false, err
	}
	if k := v.Kind(); k != fenecql.KindBool && k != fenecql.KindNull {
		return false, fenecql.Errorf(p.where.Position(), "where takes true or false, found %s", short(v))
	}
	return fenecql.Truthy(v), nil
}

// sort puts rows in the statement's order, ties by ascending id; with no
// order, in ascending id.
func (p *plan) sort(docs []*Doc) ([]*Doc, error) {
	if len(p.order) == 0 {
		sort.Slice(docs, func(i, j int) bool { return docs[i].ID < docs[j].ID })
		return docs, nil
	}
	keys := make([][]fenecql.Value, len(docs))
	for i, d := range docs {
		if i%checkEvery == checkEvery-1 {
			if err := stopped(p.ctx); err != nil {
				p.env.Row = nil
				return nil, err
			}
			if p.rd.due() {
				if err := p.rd.yield(); err != nil {
					p.env.Row = nil
					return nil, err
				}
			}
		}
		p.env.Row = d
		keys[i] = make([]fenecql.Value, len(p.order))
		for k, o := range p.order {
			v, err := fenecql.Eval(o.Expr, p.env)
			if err != nil {
				p.env.Row = nil
				return nil, err
			}
			keys[i][k] = v
		}
	}
	p.env.Row = nil
	idx := make([]int, len(docs))
	for i := range idx {
		idx[i] = i
	}
	sort.Slice(idx, func(a, b int) bool {
		ka, kb := keys[idx[a]], keys[idx[b]]
		for k, o := range p.order {
			c := fenecql.Compare(ka[k], kb[k])
			if o.Desc {
				c = -c
			}
			if c != 0 {
				return c < 0
			}
		}
		return docs[idx[a]].ID < docs[idx[b]].ID
	})
	out := make([]*Doc, len(docs))
	for i, j := range idx {
		out[i] = docs[j]
	}
	return out, nil
}
