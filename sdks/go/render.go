package fenecdb

import (
	"fmt"
	"strconv"
	"strings"
)

// renderer writes a statement's text left to right, numbering its
// parameters as they appear.
type renderer struct {
	b      strings.Builder
	params []any
	err    error // the first value refused
}

// param writes v as the next parameter, as it is sent (see param).
func (r *renderer) param(what string, v any) {
	pv, err := param(v)
	if err != nil && r.err == nil {
		r.err = fmt.Errorf("fenecdb: %s: %w", what, err)
	}
	r.params = append(r.params, pv)
	r.b.WriteString("$" + strconv.Itoa(len(r.params)))
}

// fragment writes f's text with each ? outside a string literal replaced by
// the next parameter.
func (r *renderer) fragment(f fragment) error {
	next := 0
	var quote byte // the open string literal's quote, or 0
	for i := 0; i < len(f.text); i++ {
		ch := f.text[i]
		switch {
		case quote != 0:
			r.b.WriteByte(ch)
			if ch == '\\' && i+1 < len(f.text) {
				i++
				r.b.WriteByte(f.text[i])
			} else if ch == quote {
				quote = 0
			}
		case ch == '\'' || ch == '"':
			quote = ch
			r.b.WriteByte(ch)
		case ch == '$' && i+1 < len(f.text) && f.text[i+1] >= '0' && f.text[i+1] <= '9':
			return fmt.Errorf("fenecdb: %s(%q): write ? for a value, not %s…", f.helper, f.text, f.text[i:i+2])
		case ch == '?':
			if next < len(f.args) {
				r.param(f.helper, f.args[next])
			}
			next++
		default:
			r.b.WriteByte(ch)
		}
	}
	if next != len(f.args) {
		return fmt.Errorf("fenecdb: %s(%q): %d ? marks, but %d arguments", f.helper, f.text, next, len(f.args))
	}
	return nil
}

// value writes a value of a document or a condition: an Expression's text,
// or a parameter (nil too).
func (r *renderer) value(what string, v any) error {
	switch v := v.(type) {
	case Expression:
		return r.fragment(v.fragment)
	case Condition:
		return fmt.Errorf("fenecdb: %s: raw is not a value (use Expr)", what)
	case Increment:
		return fmt.Errorf("fenecdb: %s: inc is a patch value of Update alone", what)
	default:
		r.param(what, v)
	}
	return nil
}

// doc writes {name: value, ...} for an insert, or for an update's patch,
// where nil renders as null and an Increment as coalesce(name, 0) + $n.
func (r *renderer) doc(endpoint string, d Doc) error {
	if d.err != nil {
		return d.err
	}
	patch := endpoint == "update" || endpoint == "upsert"
	if patch && len(d.names) == 0 {
		return fmt.Errorf("fenecdb: %s: an empty patch", endpoint)
	}
	for _, name := range d.names {
		if !identRE.MatchString(name) {
			return fmt.Errorf("fenecdb: %s: key %q is not an identifier ([A-Za-z_][A-Za-z0-9_]*): a document's keys are plain field names, never paths", endpoint, name)
		}
	}
	r.b.WriteByte('{')
	for i, name := range d.names {
		if i > 0 {
			r.b.WriteString(", ")
		}
		r.b.WriteString(name + ": ")
		switch v := d.values[i].(type) {
		case nil:
			if !patch {
				r.param(endpoint+" "+name, nil)
				continue
			}
			r.b.WriteString("null")
		case Increment:
			if !patch {
				return fmt.Errorf("fenecdb: insert %s: inc is not a document value", name)
			}
			// coalesce: a field never set counts from 0 (docs/sdks.md, rule 8).
			r.b.WriteString("coalesce(" + name + ", 0) + ")
			r.param("inc "+name, v.by)
		default:
			if err := r.value(endpoint+" "+name, v); err != nil {
				return err
			}
		}
	}
	r.b.WriteByte('}')
	return nil
}

// where writes the where clause, if c has conditions.
func (r *renderer) where(c Query) error {
	for i, k := range c.conds {
		if i == 0 {
			r.b.WriteString(" where ")
		} else {
			r.b.WriteString(" and ")
		}
		if k.raw != nil {
			wrap := len(c.conds) > 1
			if wrap {
				r.b.WriteByte('(')
			}
			if err := r.fragment(k.raw.fragment); err != nil {
				return err
			}
			if wrap {
				r.b.WriteByte(')')
			}
			continue
		}
		r.b.WriteString(k.field + " " + k.op)
		if k.op != "is null" {
			r.b.WriteByte(' ')
			if err := r.value("where "+k.field, k.value); err != nil {
				return err
			}
		}
	}
	return nil
}

// pick writes the clauses that pick rows: near, order, limit and offset
// (which only a read may have).
func (r *renderer) pick(c Query) error {
	if n := c.near; n != nil {
		if len(c.orders) > 0 {
			return fmt.Errorf("fenecdb: near %s orders the rows: it takes no order beside it", n.field)
		}
		r.b.WriteString(" near " + n.field + " ")
		r.param("near "+n.field, []float64{n.lon, n.lat})
		if n.exact {
			r.b.WriteString(" exact")
		}
	}
	if len(c.orders) > 0 {
		r.b.WriteString(" order " + strings.Join(c.orders, ", "))
	}
	if c.limit >= 0 {
		r.b.WriteString(" limit " + strconv.Itoa(c.limit))
	}
	if c.offset >= 0 {
		r.b.WriteString(" offset " + strconv.Itoa(c.offset))
	}
	return nil
}

// statement returns what was rendered; rowsOf names the collection whose
// rows it answers, if it answers rows, to type them by.
func (r *renderer) statement(rowsOf string) (Statement, error) {
	if r.err != nil {
		return Statement{}, r.err
	}
	if r.params == nil {
		r.params = []any{}
	}
	return Statement{Query: r.b.String(), Params: r.params, rowsOf: rowsOf}, nil
}

// refuse returns an error if c uses one of clauses, which endpoint does
// not take.
func (c Query) refuse(endpoint string, clauses ...string) error {
	if c.err != nil {
		return c.err
	}
	used := map[string]bool{
		"where": len(c.conds) > 0, "order": len(c.orders) > 0, "limit": c.limit >= 0,
		"offset": c.offset >= 0, "select": c.columns != nil, "near": c.near != nil,
		"IfAbsent or Upsert": c.absent != nil,
	}
	for _, clause := range clauses {
		if used[clause] {
			return fmt.Errorf("fenecdb: %s cannot use %s", endpoint, clause)
		}
	}
	return nil
}

// RenderRows renders what [Query.Rows] sends:
// get c [select …] [where …] [near …] [order …] [limit n] [offset n].
func (c Query) RenderRows() (Statement, error) {
	if err := c.refuse("a read", "IfAbsent or Upsert"); err != nil {
		return Statement{}, err
	}
	var r renderer
	r.b.WriteString("get " + c.name)
	if c.columns != nil {
		r.b.WriteString(" select " + strings.Join(c.columns, ", "))
	}
	if err := r.where(c); err != nil {
		return Statement{}, err
	}
	if err := r.pick(c); err != nil {
		return Statement{}, err
	}
	return r.statement(c.name)
}

// RenderFirst renders what [Query.First] sends: the read with limit 1.
func (c Query) RenderFirst() (Statement, error) { return c.Limit(1).RenderRows() }

// RenderCount renders what [Query.Count] sends: get c [where …] count.
// The chain's select, near, order, limit and offset do not change a count.
func (c Query) RenderCount() (Statement, error) {
	if err := c.refuse("count", "IfAbsent or Upsert"); err != nil {
		return Statement{}, err
	}
	var r renderer
	r.b.WriteString("get " + c.name)
	if err := r.where(c); err != nil {
		return Statement{}, err
	}
	r.b.WriteString(" count")
	return r.statement("")
}

// RenderInsert renders what [Query.Insert] sends: insert c {…}, or
// after IfAbsent put c {…} if absent, or after Upsert
// put c {…} if absent else set {…}.
func (c Query) RenderInsert(v any) (Statement, error) {
	if err := c.refuse("insert", "where", "order", "limit", "offset", "select", "near"); err != nil {
		return Statement{}, err
	}
	doc, err := docOf(v)
	if err != nil {
		return Statement{}, err
	}
	var r renderer
	r.b.WriteString(c.insertVerb() + c.name + " ")
	if err := r.doc("insert", doc); err != nil {
		return Statement{}, err
	}
	if err := r.absent(c); err != nil {
		return Statement{}, err
	}
	return r.statement("")
}

// insertVerb is "put " for an insert if absent, else "insert ".
func (c Query) insertVerb() string {
	if c.absent != nil {
		return "put "
	}
	return "insert "
}

// absent writes an insert's if absent [else set {…}], if c has one.
func (r *renderer) absent(c Query) error {
	if c.absent == nil {
		return nil
	}
	r.b.WriteString(" if absent")
	if c.absent.set == nil {
		return nil
	}
	r.b.WriteString(" else set ")
	return r.doc("upsert", *c.absent.set)
}

// RenderInsertMany renders what [Query.InsertMany] sends:
// insert c [{…}, …].
func (c Query) RenderInsertMany(v any) (Statement, error) {
	if err := c.refuse("insert", "where", "order", "limit", "offset", "select", "near"); err != nil {
		return Statement{}, err
	}
	docs, err := docsOf(v)
	if err != nil {
		return Statement{}, err
	}
	if len(docs) == 0 {
		return Statement{}, fmt.Errorf("fenecdb: insert: an empty list of documents")
	}
	var r renderer
	r.b.WriteString(c.insertVerb() + c.name + " [")
	for i, d := range docs {
		if i > 0 {
			r.b.WriteString(", ")
		}
		if err := r.doc("insert", d); err != nil {
			return Statement{}, err
		}
	}
	r.b.WriteByte(']')
	if err := r.absent(c); err != nil {
		return Statement{}, err
	}
	return r.statement("")
}

// RenderUpdate renders what [Query.Update] sends:
// set c {k: v, …} [where …] [near …] [order …] [limit n] [returning …] [require n].
func (c Query) RenderUpdate(patch Doc, opts ...CallOption) (Statement, error) {
	return c.write("update", &patch, opts)
}

// RenderDelete renders what [Query.Delete] sends:
// del c [where …] [near …] [order …] [limit n] [returning …] [require n].
func (c Query) RenderDelete(opts ...CallOption) (Statement, error) {
	return c.write("delete", nil, opts)
}

// write renders an update (set) or a delete (del).
func (c Query) write(endpoint string, patch *Doc, opts []CallOption) (Statement, error) {
	if err := c.refuse(endpoint, "offset", "select", "IfAbsent or Upsert"); err != nil {
		return Statement{}, err
	}
	o := readOptions(opts)
	if o.err != nil {
		return Statement{}, o.err
	}
	var r renderer
	if patch != nil {
		r.b.WriteString("set " + c.name + " ")
		if err := r.doc(endpoint, *patch); err != nil {
			return Statement{}, err
		}
	} else {
		r.b.WriteString("del " + c.name)
	}
	if err := r.where(c); err != nil {
		return Statement{}, err
	}
	if err := r.pick(c); err != nil {
		return Statement{}, err
	}
	if o.returning != nil {
		r.b.WriteString(" returning " + strings.Join(o.returning, ", "))
	}
	if o.require >= 0 {
		r.b.WriteString(" require " + strconv.Itoa(o.require))
	}
	rowsOf := ""
	if o.returning != nil {
		rowsOf = c.name
	}
	return r.statement(rowsOf)
}
