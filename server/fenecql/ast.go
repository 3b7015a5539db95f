// Package fenecql holds the FenecQL language: its lexer, its
// recursive-descent parser, the syntax tree they build, the values
// statements compute with, and the evaluation of expressions over a row.
// It knows nothing of collections or storage; the engine plans and runs
// what this package parses.
package fenecql

// Pos is a 1-based byte offset into the statement text. Errors name it as
// "position N".
type Pos int

// Stmt is one parsed FenecQL statement.
type Stmt interface {
	Position() Pos
	stmt()
}

// Type is a field's declared type.
type Type uint8

const (
	TypeInt Type = iota + 1
	TypeFloat
	TypeText
	TypeBool
	TypeTimestamp
	TypeJSON
	TypeGeo
)

var typeNames = [...]string{"", "int", "float", "text", "bool", "timestamp", "json", "geo"}

func (t Type) String() string {
	if int(t) < len(typeNames) {
		return typeNames[t]
	}
	return "type?"
}

// TypeByName maps a lower-case type name to its Type.
func TypeByName(name string) (Type, bool) {
	for i, n := range typeNames {
		if i > 0 && n == name {
			return Type(i), true
		}
	}
	return 0, false
}

// IndexKind is a field's index annotation.
type IndexKind uint8

const (
	NoIndex IndexKind = iota
	IndexSorted
	IndexHash
	IndexUnique
	IndexGeo
)

var indexNames = [...]string{"", "sorted", "hash", "unique", "geo"}

func (k IndexKind) String() string {
	if int(k) < len(indexNames) {
		return indexNames[k]
	}
	return "index?"
}

// IndexByName maps an annotation name (without the @) to its IndexKind.
func IndexByName(name string) (IndexKind, bool) {
	for i, n := range indexNames {
		if i > 0 && n == name {
			return IndexKind(i), true
		}
	}
	return 0, false
}

// FieldDef is one field of a create collection statement. TTL is the
// field's @ttl in milliseconds (0: none): a row lapses once the field's
// time plus TTL is no longer after now().
type FieldDef struct {
	Pos   Pos
	Name  string
	Type  Type
	Index IndexKind
	TTL   int64
}

// CreateCollection is `create collection [if not exists] c (f type [@index], ...)`.
type CreateCollection struct {
	Pos         Pos
	Name        string
	IfNotExists bool
	Fields      []FieldDef
}

// DropCollection is `drop collection [if exists] c`.
type DropCollection struct {
	Pos      Pos
	Name     string
	IfExists bool
}

// Put is `put c <docs>` or, with Insert set, `insert c <docs>`. Docs is an
// expression giving one object or a list of objects: a literal or a
// parameter. IfAbsent is `put c <docs> if absent`: a document whose id or
// @unique value a live row holds is not written. Upsert, when not nil, is
// the patch of `if absent else set {...}`, written to that row instead;
// its expressions read the stored row by field name and the incoming
// document as `new.<field>`.
type Put struct {
	Pos      Pos
	Coll     string
	Docs     Expr
	Insert   bool
	IfAbsent bool
	Upsert   []Assign
}

// Assign is one `field: expr` or `path.into.json: expr` of a set's patch.
type Assign struct {
	Pos   Pos
	Path  []string
	Value Expr
}

// OrderKey is one key of an order clause.
type OrderKey struct {
	Expr Expr
	Desc bool
}

// Column is one item of a select or returning list. Name is the alias
// given with `as`, or else the item's own text (`payload.to`).
type Column struct {
	Expr Expr
	Name string
}

// Returning is a set or del's returning clause: `*` or a list of columns.
type Returning struct {
	Star    bool
	Columns []Column
}

// Clauses are the row-picking clauses shared by get, set and del.
// Limit, Offset and Require are nil when absent; they are integer
// literals or parameters. Near, when not nil, stands in place of Order.
type Clauses struct {
	Where   Expr
	Order   []OrderKey
	Near    *Near
	Limit   Expr
	Offset  Expr
	Require Expr
}

// Near is `near <field> <point> [exact]`: the rows whose field holds a
// point, nearest to point first. Exact measures every row rather than
// walking the field's @geo index; both answer the same rows.
type Near struct {
	Pos      Pos
	Field    string
	FieldPos Pos
	Point    Expr
	Exact    bool
}

// Set is `set c {patch} [where] [order] [limit] [returning] [require]`.
type Set struct {
	Pos   Pos
	Coll  string
	Patch []Assign
	Clauses
	Returning *Returning
}

// Del is `del c [where] [order] [limit] [returning] [require]`.
type Del struct {
	Pos  Pos
	Coll string
	Clauses
	Returning *Returning
}

// Get is `get c [select ...] [where] [order] [limit] [offset] [count] [require]`.
// Columns is nil for `select *` or no select.
type Get struct {
	Pos     Pos
	Coll    string
	Columns []Column
	Clauses
	Count bool
}

// Explain is `explain <stmt>`: the plan of a get, set or del, run without
// writing.
type Explain struct {
	Pos  Pos
	Stmt Stmt
}

func (s *CreateCollection) Position() Pos { return s.Pos }
func (s *DropCollection) Position() Pos   { return s.Pos }
func (s *Put) Position() Pos              { return s.Pos }
func (s *Set) Position() Pos              { return s.Pos }
func (s *Del) Position() Pos              { return s.Pos }
func (s *Get) Position() Pos              { return s.Pos }
func (s *Explain) Position() Pos          { return s.Pos }

func (*CreateCollection) stmt() {}
func (*DropCollection) stmt()   {}
func (*Put) stmt()              {}
func (*Set) stmt()              {}
func (*Del) stmt()              {}
func (*Get) stmt()              {}
func (*Explain) stmt()          {}

// Expr is an expression node.
type Expr interface {
	Position() Pos
	expr()
}

// Op is a unary or binary operator.
type Op uint8

const (
	OpNeg Op = iota + 1 // -x
	OpNot               // not x
	OpMul
	OpDiv
	OpMod
	OpAdd
	OpSub
	OpEq
	OpNe
	OpLt
	OpLe
	OpGt
	OpGe
	OpAnd
	OpOr
)

var opNames = [...]string{"", "-", "not", "*", "/", "%", "+", "-", "=", "!=", "<", "<=", ">", ">=", "and", "or"}

func (o Op) String() string {
	if int(o) < len(opNames) {
		return opNames[o]
	}
	return "op?"
}

// Lit is a literal value: a number, a string, true, false or null.
type Lit struct {
	Pos Pos
	Val Value
}

// Param is `$n`, 1-based.
type Param struct {
	Pos Pos
	N   int
}

// Ref reads a field, or a path into a json field (`payload.to`). In a
// policy filter, a first element "new" reads the row as it would be
// written.
type Ref struct {
	Pos  Pos
	Path []string
}

// Claim is `$jwt.<claim>` in a policy filter: a claim of the request's token.
type Claim struct {
	Pos  Pos
	Name string
}

// Unary is `-x` or `not x`.
type Unary struct {
	Pos Pos
	Op  Op
	X   Expr
}

// Binary is `l op r` for arithmetic, comparison and logic.
type Binary struct {
	Pos  Pos
	Op   Op
	L, R Expr
}

// In is `x [not] in list`, where list is a list literal or a parameter.
type In struct {
	Pos  Pos
	X    Expr
	List Expr
	Not  bool
}

// IsNull is `x is [not] null`.
type IsNull struct {
	Pos Pos
	X   Expr
	Not bool
}

// Call is a function call, Name lower-cased.
type Call struct {
	Pos  Pos
	Name string
	Args []Expr
}

// When is one `when cond then value` arm of a case.
type When struct {
	Cond, Then Expr
}

// Case is `case when c then v ... [else e] end`; Else is nil when absent.
type Case struct {
	Pos   Pos
	Whens []When
	Else  Expr
}

// ListLit is `[a, b, ...]`.
type ListLit struct {
	Pos   Pos
	Items []Expr
}

// ObjectLit is `{key: value, ...}`; keys are identifiers or strings.
type ObjectLit struct {
	Pos  Pos
	Keys []string
	Vals []Expr
}

func (e *Lit) Position() Pos       { return e.Pos }
func (e *Param) Position() Pos     { return e.Pos }
func (e *Ref) Position() Pos       { return e.Pos }
func (e *Claim) Position() Pos     { return e.Pos }
func (e *Unary) Position() Pos     { return e.Pos }
func (e *Binary) Position() Pos    { return e.Pos }
func (e *In) Position() Pos        { return e.Pos }
func (e *IsNull) Position() Pos    { return e.Pos }
func (e *Call) Position() Pos      { return e.Pos }
func (e *Case) Position() Pos      { return e.Pos }
func (e *ListLit) Position() Pos   { return e.Pos }
func (e *ObjectLit) Position() Pos { return e.Pos }

func (*Lit) expr()       {}
func (*Param) expr()     {}
func (*Ref) expr()       {}
func (*Claim) expr()     {}
func (*Unary) expr()     {}
func (*Binary) expr()    {}
func (*In) expr()        {}
func (*IsNull) expr()    {}
func (*Call) expr()      {}
func (*Case) expr()      {}
func (*ListLit) expr()   {}
func (*ObjectLit) expr() {}

// Walk calls fn on e and every expression under it, parents first.
func Walk(e Expr, fn func(Expr)) {
	if e == nil {
		return
	}
	fn(e)
	Children(e, func(x Expr) { Walk(x, fn) })
}

// Children calls fn on each expression directly under e.
func Children(e Expr, fn func(Expr)) {
	switch e := e.(type) {
	case *Unary:
		fn(e.X)
	case *Binary:
		fn(e.L)
		fn(e.R)
	case *In:
		fn(e.X)
		fn(e.List)
	case *IsNull:
		fn(e.X)
	case *Call:
		for _, a := range e.Args {
			fn(a)
		}
	case *Case:
		for _, w := range e.Whens {
			fn(w.Cond)
			fn(w.Then)
		}
		if e.Else != nil {
			fn(e.Else)
		}
	case *ListLit:
		for _, x := range e.Items {
			fn(x)
		}
	case *ObjectLit:
		for _, x := range e.Vals {
			fn(x)
		}
	}
}
