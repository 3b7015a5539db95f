package fenecdb

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"regexp"
	"slices"
	"strings"
)

// Query is an immutable query over one collection, started by
// [Client.From]: the builder. Each method returns a new Query and leaves its receiver
// as it was, so a Query can be kept, shared between goroutines and
// extended in several ways:
//
//	jobs := db.From("jobs")
//	mine := jobs.Where("owner", owner)
//
// The methods that end a chain ([Query.Rows], [Query.First],
// [Query.Count], [Query.Insert], [Query.InsertMany],
// [Query.Update], [Query.Delete]) send it; the Render methods only
// render it. A mistake made along the chain is returned by either.
type Query struct {
	db      *Client
	name    string
	conds   []cond
	orders  []string
	columns []string
	limit   int // -1: none
	offset  int // -1: none
	near    *near
	absent  *absent
	err     error
}

// Collection is the former name of [Query].
//
// Deprecated: use [Query] (docs/sdks.md, "One word per idea").
type Collection = Query

// near is what Near and NearExact set: near <field> <point> [exact].
type near struct {
	field    string
	lon, lat float64
	exact    bool
}

// absent is what IfAbsent (set nil) and Upsert set: an insert renders
// put c {…} if absent [else set {…}].
type absent struct{ set *Doc }

// cond is one condition of a where clause: a field compared with a value,
// or a raw fragment.
type cond struct {
	field, op string
	value     any
	raw       *Condition
}

// Statement is one FenecQL statement and its parameters $1..$n, as the
// Render methods answer it and [Client.Batch] takes it.
type Statement struct {
	// Query is the statement's text.
	Query string
	// Params are the values of $1..$n, in order.
	Params []any
	// rowsOf is the collection whose rows the statement answers, when the
	// builder rendered it: its rows are typed by its fields. A statement
	// written as text has none, and its rows are as the JSON says
	// (docs/sdks.md).
	rowsOf string
}

var (
	identRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
	pathRE  = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$`)
)

// operators are the comparisons [Query.WhereOp] takes.
var operators = []string{"=", "!=", "<", "<=", ">", ">=", "in", "not in"}

func newCollection(db *Client, name string) Query {
	c := Query{db: db, name: name, limit: -1, offset: -1}
	if !identRE.MatchString(name) {
		c.err = fmt.Errorf("fenecdb: collection name %q is not an identifier ([A-Za-z_][A-Za-z0-9_]*)", name)
	}
	return c
}

func checkField(name string) error {
	if !pathRE.MatchString(name) {
		return fmt.Errorf("fenecdb: field %q is not an identifier ([A-Za-z_][A-Za-z0-9_]*) or a dotted path of identifiers", name)
	}
	return nil
}

// checkColumns checks a select or returning list: fields and paths, or "*"
// alone.
func checkColumns(what string, columns []string) error {
	if len(columns) == 0 {
		return fmt.Errorf("fenecdb: %s: an empty list of fields", what)
	}
	if len(columns) == 1 && columns[0] == "*" {
		return nil
	}
	for _, c := range columns {
		if err := checkField(c); err != nil {
			return err
		}
	}
	return nil
}

// with returns a copy of c with err kept, unless c already has one.
func (c Query) with(err error) Query {
	if c.err == nil {
		c.err = err
	}
	return c
}

// Where adds the condition field = value, or field is null when value is
// nil or a nil pointer. Several conditions are joined with and. An
// [Expression] value renders as its text; any other value is sent as a
// parameter.
func (c Query) Where(field string, value any) Query {
	if isNull(value) {
		return c.addCond(cond{field: field, op: "is null"})
	}
	return c.addCond(cond{field: field, op: "=", value: value})
}

// WhereOp adds the condition field op value, op being one of =, !=, <, <=,
// >, >=, in and not in; a nil value is a parameter (field = $1 matches
// nothing: write [Query.Where] for is null). For in and not in, value
// is a slice of at least one value, sent as one parameter:
//
//	jobs.WhereOp("attempts", ">=", 5)
//	jobs.WhereOp("id", "in", []int{1, 2, 3})
func (c Query) WhereOp(field, op string, value any) Query {
	if !slices.Contains(operators, op) {
		return c.with(fmt.Errorf("fenecdb: operator %q is not one of %s", op, strings.Join(operators, ", ")))
	}
	if op == "in" || op == "not in" {
		rv := reflect.ValueOf(value)
		if k := rv.Kind(); k != reflect.Slice && k != reflect.Array {
			return c.with(fmt.Errorf("fenecdb: %s needs a list of values for %s, not %T", op, field, value))
		}
		if rv.Len() == 0 {
			return c.with(fmt.Errorf("fenecdb: where %s %s: an empty list (it would match nothing, or everything)", field, op))
		}
	}
	return c.addCond(cond{field: field, op: op, value: value})
}

// WhereRaw adds a condition written in FenecQL, made with [Raw]. It is
// wrapped in parentheses when the where clause has more than one condition.
func (c Query) WhereRaw(condition Condition) Query {
	return c.addCond(cond{raw: &condition})
}

func (c Query) addCond(k cond) Query {
	if k.raw == nil {
		if err := checkField(k.field); err != nil {
			return c.with(err)
		}
		switch k.value.(type) {
		case Condition:
			return c.with(fmt.Errorf("fenecdb: where %s: raw is not a value (use Expr)", k.field))
		case Increment:
			return c.with(fmt.Errorf("fenecdb: where %s: inc is not a value (use Expr)", k.field))
		}
	}
	c.conds = append(slices.Clip(c.conds), k)
	return c
}

// Order adds a sort key, ascending; several calls sort by each in turn.
// Rows equal on every key come in ascending id.
func (c Query) Order(field string) Query { return c.addOrder(field, "") }

// OrderDesc adds a sort key, descending.
func (c Query) OrderDesc(field string) Query { return c.addOrder(field, " desc") }

// OrderBy adds a sort key in the direction dir, "asc" or "desc" (for a
// direction that comes as text, such as a sort parameter).
func (c Query) OrderBy(field, dir string) Query {
	switch dir {
	case "asc":
		return c.Order(field)
	case "desc":
		return c.OrderDesc(field)
	}
	return c.with(fmt.Errorf("fenecdb: order %s: the direction %q is neither asc nor desc", field, dir))
}

func (c Query) addOrder(field, dir string) Query {
	if err := checkField(field); err != nil {
		return c.with(err)
	}
	c.orders = append(slices.Clip(c.orders), field+dir)
	return c
}

// Limit keeps at most n rows: of a read, or of the rows an update or delete
// picks (with [Query.Order], the first n in that order).
// Near orders the rows nearest first to the point (lon, lat) over a @geo
// field: near field $n, the order of order distance(field, point)
// (docs/fenecql.md). It replaces an earlier Near and takes no Order beside
// it.
func (c Query) Near(field string, lon, lat float64) Query {
	return c.setNear(field, lon, lat, false)
}

// NearExact is [Query.Near] rendered with exact: near field $n exact.
func (c Query) NearExact(field string, lon, lat float64) Query {
	return c.setNear(field, lon, lat, true)
}

func (c Query) setNear(field string, lon, lat float64, exact bool) Query {
	if err := checkField(field); err != nil {
		return c.with(err)
	}
	c.near = &near{field: field, lon: lon, lat: lat, exact: exact}
	return c
}

// IfAbsent makes Insert and InsertMany write only documents not there yet:
// put c {…} if absent, which writes nothing for a document whose id or
// @unique value another holds (Result.Affected counts what was written).
func (c Query) IfAbsent() Query {
	c.absent = &absent{}
	return c
}

// Upsert makes Insert an upsert: put c {…} if absent else set {…} writes
// the document when it is absent, and else applies set to the one there.
// In set a bare field reads the stored document and Expr("new.f") the
// incoming one; Inc counts from 0.
func (c Query) Upsert(set Doc) Query {
	c.absent = &absent{set: &set}
	return c
}

func (c Query) Limit(n int) Query {
	if n < 0 {
		return c.with(fmt.Errorf("fenecdb: limit must be a non-negative integer, not %d", n))
	}
	c.limit = n
	return c
}

// Offset skips the first n rows of a read.
func (c Query) Offset(n int) Query {
	if n < 0 {
		return c.with(fmt.Errorf("fenecdb: offset must be a non-negative integer, not %d", n))
	}
	c.offset = n
	return c
}

// Select names the columns a read answers: fields or dotted paths, or "*"
// alone for id and every field (the default). Each call replaces the last.
func (c Query) Select(columns ...string) Query {
	if err := checkColumns("select", columns); err != nil {
		return c.with(err)
	}
	c.columns = slices.Clone(columns)
	return c
}

// Rows sends the read and returns its rows.
func (c Query) Rows(ctx context.Context, opts ...CallOption) ([]Row, error) {
	res, err := c.send(ctx, c.RenderRows, false, opts)
	return res.Rows, err
}

// First sends the read with limit 1 and returns its row, or a nil row and
// a nil error when it answers none ([FirstAs] returns [ErrNoRows] then).
func (c Query) First(ctx context.Context, opts ...CallOption) (*Row, error) {
	res, err := c.send(ctx, c.RenderFirst, false, opts)
	if err != nil || len(res.Rows) == 0 {
		return nil, err
	}
	return &res.Rows[0], nil
}

// Count returns how many documents the read matches.
func (c Query) Count(ctx context.Context, opts ...CallOption) (int64, error) {
	res, err := c.send(ctx, c.RenderCount, false, opts)
	if err != nil {
		return 0, err
	}
	if len(res.Rows) != 1 {
		return 0, fmt.Errorf("fenecdb: a count answered %d rows", len(res.Rows))
	}
	n, ok := res.Rows[0].Get("count").(json.Number)
	if !ok {
		return 0, &Error{Code: CodeUnexpected, At: -1, Message: fmt.Sprintf("a count answered %v", res.Rows[0].Values)}
	}
	return n.Int64()
}

// Insert writes doc as a new document: a [Doc], or a struct (or a
// pointer to one) or a map, written as encoding/json encodes it — a
// struct's fields named by their json tags, in their order (tag an id
// `json:"id,omitempty"` to let the server number it). A taken id or
// @unique value is refused with [CodeConflict], and nothing is written.
func (c Query) Insert(ctx context.Context, doc any, opts ...CallOption) (Result, error) {
	return c.send(ctx, func() (Statement, error) { return c.RenderInsert(doc) }, false, opts)
}

// InsertMany writes docs as new documents, all or none: a []Doc, or a
// slice of structs or maps as [Query.Insert] takes them.
func (c Query) InsertMany(ctx context.Context, docs any, opts ...CallOption) (Result, error) {
	return c.send(ctx, func() (Statement, error) { return c.RenderInsertMany(docs) }, false, opts)
}

// Update writes patch to the rows the chain picks: every row its
// conditions match or, with [Query.Order] and [Query.Limit],
// exactly the rows a read of the same chain would answer, under the
// server's write lock. Patch values read the row before the write
// ([Inc], [Expr] naming fields). With [Returning] it returns the rows as
// written — a claim: through a [Client.Wait] copy it is held at the server
// until it takes a row.
func (c Query) Update(ctx context.Context, patch Doc, opts ...CallOption) (Result, error) {
	return c.send(ctx, func() (Statement, error) { return c.RenderUpdate(patch, opts...) }, true, opts)
}

// Delete removes the rows the chain picks, as [Query.Update] picks
// them; with [Returning] it returns them as they were.
func (c Query) Delete(ctx context.Context, opts ...CallOption) (Result, error) {
	return c.send(ctx, func() (Statement, error) { return c.RenderDelete(opts...) }, true, opts)
}

// send renders the chain and sends it with the call's options (Returning
// and Require were read by the render).
func (c Query) send(ctx context.Context, render func() (Statement, error), write bool, opts []CallOption) (Result, error) {
	s, err := render()
	if err != nil {
		return Result{}, err
	}
	o := readOptions(opts)
	if !write && (o.returning != nil || o.require >= 0) {
		o.fail(fmt.Errorf("fenecdb: Returning and Require are options of Update and Delete"))
	}
	if o.err != nil {
		return Result{}, o.err
	}
	return c.db.run(ctx, s, o)
}
