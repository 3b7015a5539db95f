package fenecql

import (
	"math"
	"strings"
)

// Truthy reports whether v passes a filter or a case arm: only true does.
// Null and false both fail, which is how a comparison with null comes to
// be "not true".
func Truthy(v Value) bool { return v.kind == KindBool && v.n != 0 }

// Eval computes e over env. Every error is an *Error (bad_request) placed
// at the node that failed, so a user sees which part of the statement is
// wrong.
func Eval(e Expr, env *Env) (Value, error) {
	if env == nil {
		env = &Env{}
	}
	v, err := eval(e, env)
	if err != nil {
		return Null, err
	}
	return v, nil
}

// eval returns *Error rather than error so that a nil error never turns
// into a non-nil interface on the way up.
func eval(e Expr, env *Env) (Value, *Error) {
	switch e := e.(type) {
	case *Lit:
		return e.Val, nil
	case *Param:
		if e.N < 1 || e.N > len(env.Params) {
			return Null, Errorf(e.Pos, "$%d given no value (%d parameters)", e.N, len(env.Params))
		}
		return env.Params[e.N-1], nil
	case *Ref:
		return evalRef(e, env), nil
	case *Claim:
		return env.Claims[e.Name], nil
	case *Unary:
		x, err := eval(e.X, env)
		if err != nil {
			return Null, err
		}
		if e.Op == OpNot {
			return not(e.Pos, x)
		}
		return neg(e.Pos, x)
	case *Binary:
		return evalBinary(e, env)
	case *In:
		return evalIn(e, env)
	case *IsNull:
		x, err := eval(e.X, env)
		if err != nil {
			return Null, err
		}
		return Bool(x.IsNull() != e.Not), nil
	case *Call:
		return evalCall(e, env)
	case *Case:
		return evalCase(e, env)
	case *ListLit:
		items := make([]Value, len(e.Items))
		for i, it := range e.Items {
			v, err := eval(it, env)
			if err != nil {
				return Null, err
			}
			items[i] = v
		}
		return List(items), nil
	case *ObjectLit:
		return evalObject(e, env)
	case nil:
		return Null, Errorf(0, "missing expression")
	}
	return Null, Errorf(e.Position(), "cannot evaluate %T", e)
}

func evalRef(e *Ref, env *Env) Value {
	if len(e.Path) == 0 {
		return Null
	}
	row, path := env.Row, e.Path
	// `new.f` reads the row as it would be written; a lone `new` is an
	// ordinary field that happens to be called new.
	if len(path) >= 2 && path[0] == "new" {
		row, path = env.New, path[1:]
	}
	if row == nil {
		return Null
	}
	return row.Field(path[0]).Path(path[1:])
}

func evalObject(e *ObjectLit, env *Env) (Value, *Error) {
	o := NewObject(len(e.Keys))
	var keys nameSet
	for i, k := range e.Keys {
		if !keys.add(k) {
			return Null, Errorf(e.Pos, "duplicate key %q in object", k)
		}
		v, err := eval(e.Vals[i], env)
		if err != nil {
			return Null, err
		}
		o.Keys = append(o.Keys, k)
		o.Vals = append(o.Vals, v)
	}
	return ObjectOf(o), nil
}

func evalCase(e *Case, env *Env) (Value, *Error) {
	for _, w := range e.Whens {
		c, err := eval(w.Cond, env)
		if err != nil {
			return Null, err
		}
		// A condition that is neither bool nor null is a mistake (case
		// when attempts then ...) that would otherwise silently pick else.
		if c.kind != KindBool && c.kind != KindNull {
			return Null, Errorf(w.Cond.Position(), "case when takes bool, found %s", c.kind)
		}
		if Truthy(c) {
			return eval(w.Then, env)
		}
	}
	if e.Else == nil {
		return Null, nil
	}
	return eval(e.Else, env)
}

func evalIn(e *In, env *Env) (Value, *Error) {
	x, err := eval(e.X, env)
	if err != nil {
		return Null, err
	}
	l, err := eval(e.List, env)
	if err != nil {
		return Null, err
	}
	if l.kind != KindList {
		return Null, Errorf(e.List.Position(), "in takes a list, found %s", l.kind)
	}
	if x.IsNull() {
		return Null, nil
	}
	// SQL's rule: no match, but a null among the items, might have been a
	// match, so the answer is null rather than false.
	sawNull := false
	for _, it := range l.List() {
		if it.IsNull() {
			sawNull = true
			continue
		}
		eq, err := compare(e.Pos, OpEq, x, it)
		if err != nil {
			return Null, err
		}
		if Truthy(eq) {
			return Bool(!e.Not), nil
		}
	}
	if sawNull {
		return Null, nil
	}
	return Bool(e.Not), nil
}

func evalBinary(e *Binary, env *Env) (Value, *Error) {
	l, err := eval(e.L, env)
	if err != nil {
		return Null, err
	}
	if e.Op == OpAnd || e.Op == OpOr {
		return logic(e, l, env)
	}
	r, err := eval(e.R, env)
	if err != nil {
		return Null, err
	}
	switch e.Op {
	case OpEq, OpNe, OpLt, OpLe, OpGt, OpGe:
		return compare(e.Pos, e.Op, l, r)
	case OpAdd, OpSub, OpMul, OpDiv, OpMod:
		return arith(e.Pos, e.Op, l, r)
	}
	return Null, Errorf(e.Pos, "unknown operator %s", e.Op)
}

// logic is SQL's three-valued and/or. The right side is evaluated only
// when it can change the answer, so `x != 0 and 10 / x > 1` is safe.
func logic(e *Binary, l Value, env *Env) (Value, *Error) {
	if l.kind != KindBool && l.kind != KindNull {
		return Null, Errorf(e.Pos, "%s takes bool, found %s", e.Op, l.kind)
	}
	decided := e.Op == OpOr // or is decided by true, and by false
	if l.kind == KindBool && l.Bool() == decided {
		return l, nil
	}
	r, err := eval(e.R, env)
	if err != nil {
		return Null, err
	}
	switch {
	case r.kind != KindBool && r.kind != KindNull:
		return Null, Errorf(e.Pos, "%s takes bool, found %s", e.Op, r.kind)
	case r.kind == KindBool && r.Bool() == decided:
		return r, nil
	case l.IsNull() || r.IsNull():
		return Null, nil
	}
	return Bool(!decided), nil
}

func not(pos Pos, x Value) (Value, *Error) {
	switch x.kind {
	case KindNull:
		return Null, nil
	case KindBool:
		return Bool(!x.Bool()), nil
	}
	return Null, Errorf(pos, "not takes bool, found %s", x.kind)
}

func neg(pos Pos, x Value) (Value, *Error) {
	switch x.kind {
	case KindNull:
		return Null, nil
	case KindInt:
		if x.Int() == math.MinInt64 {
			return Null, Errorf(pos, "integer overflow: -(%d)", x.Int())
		}
		return Int(-x.Int()), nil
	case KindFloat:
		return Float(-x.Float()), nil
	}
	return Null, Errorf(pos, "cannot negate %s", x.kind)
}

// arith applies + - * / % with null propagation, checked integer
// arithmetic and millisecond timestamp shifts.
func arith(pos Pos, op Op, l, r Value) (Value, *Error) {
	if l.IsNull() || r.IsNull() {
		return Null, nil
	}
	switch {
	case l.kind == KindInt && r.kind == KindInt:
		n, err := intOp(pos, op, l.Int(), r.Int())
		return Int(n), err
	case l.IsNumber() && r.IsNumber():
		return floatOp(pos, op, l.Number(), r.Number())
	case l.kind == KindTime && r.kind == KindInt && (op == OpAdd || op == OpSub),
		l.kind == KindInt && r.kind == KindTime && op == OpAdd:
		n, err := intOp(pos, op, int64(l.n), int64(r.n))
		if err == nil {
			err = checkTime(pos, n)
		}
		return Time(n), err
	case l.kind == KindTime && r.kind == KindTime && op == OpSub:
		n, err := intOp(pos, op, l.Time(), r.Time())
		return Int(n), err
	}
	return Null, Errorf(pos, arithVerbs[op], l.kind, r.kind)
}

var arithVerbs = map[Op]string{
	OpAdd: "cannot add %s and %s",
	OpSub: "cannot subtract %[2]s from %[1]s",
	OpMul: "cannot multiply %s by %s",
	OpDiv: "cannot divide %s by %s",
	OpMod: "cannot take %s modulo %s",
}

func intOp(pos Pos, op Op, a, b int64) (int64, *Error) {
	var c int64
	overflow := false
	switch op {
	case OpAdd:
		c = a + b
		overflow = (c > a) != (b > 0)
	case OpSub:
		c = a - b
		overflow = (c < a) != (b > 0)
	case OpMul:
		c = a * b
		overflow = a != 0 && (c/a != b || (a == -1 && b == math.MinInt64) || (b == -1 && a == math.MinInt64))
	case OpDiv, OpMod:
		if b == 0 {
			return 0, Errorf(pos, "%s by zero", divWord(op))
		}
		// MinInt64 / -1 is the one quotient that does not fit; Go would
		// hand back MinInt64 without a word.
		if op == OpDiv && a == math.MinInt64 && b == -1 {
			overflow = true
		} else if op == OpDiv {
			c = a / b
		} else {
			c = a % b
		}
	}
	if overflow {
		return 0, Errorf(pos, "integer overflow: %d %s %d", a, op, b)
	}
	return c, nil
}

func divWord(op Op) string {
	if op == OpMod {
		return "modulo"
	}
	return "division"
}

func floatOp(pos Pos, op Op, a, b float64) (Value, *Error) {
	var c float64
	switch op {
	case OpAdd:
		c = a + b
	case OpSub:
		c = a - b
	case OpMul:
		c = a * b
	case OpDiv, OpMod:
		if b == 0 {
			return Null, Errorf(pos, "%s by zero", divWord(op))
		}
		if op == OpDiv {
			c = a / b
		} else {
			c = math.Mod(a, b)
		}
	}
	// Infinities and NaN are refused: JSON cannot carry them, and the
	// sorted indexes would order them oddly.
	if math.IsInf(c, 0) || math.IsNaN(c) {
		return Null, Errorf(pos, "float overflow: %s %s %s", short(Float(a)), op, short(Float(b)))
	}
	return Float(c), nil
}

// compare applies a comparison operator. Null on either side gives null;
// ints, floats and timestamps compare as numbers; a text meeting a
// timestamp is read as ISO-8601; = and != hold between any two kinds
// (values of different kinds are unequal), ordering only within one.
func compare(pos Pos, op Op, l, r Value) (Value, *Error) {
	if l.IsNull() || r.IsNull() {
		return Null, nil
	}
	var err *Error
	if l.kind == KindText && r.kind == KindTime {
		l, err = textAsTime(pos, l)
	} else if l.kind == KindTime && r.kind == KindText {
		r, err = textAsTime(pos, r)
	}
	if err != nil {
		return Null, err
	}
	ordered := op != OpEq && op != OpNe
	var c int
	switch {
	case rank(l.kind) == 2 && rank(r.kind) == 2,
		l.kind == KindText && r.kind == KindText,
		l.kind == KindBool && r.kind == KindBool:
		c = Compare(l, r)
	case ordered && (l.kind == KindList || l.kind == KindObject) && l.kind == r.kind:
		return Null, Errorf(pos, "cannot order %ss with %s: only = and != compare them", l.kind, op)
	case ordered:
		return Null, Errorf(pos, "cannot compare %s with %s", l.kind, r.kind)
	case l.kind == r.kind: // lists and objects: deep equality
		c = Compare(l, r)
	default:
		c = 1 // different kinds are simply unequal
	}
	switch op {
	case OpEq:
		return Bool(c == 0), nil
	case OpNe:
		return Bool(c != 0), nil
	case OpLt:
		return Bool(c < 0), nil
	case OpLe:
		return Bool(c <= 0), nil
	case OpGt:
		return Bool(c > 0), nil
	}
	return Bool(c >= 0), nil
}

func textAsTime(pos Pos, v Value) (Value, *Error) {
	ms, err := ParseTime(v.Text())
	if err != nil {
		if strings.Contains(err.Error(), timeRange) {
			return Null, Errorf(pos, "cannot compare text %s with timestamp: %s", short(v), timeRange)
		}
		return Null, Errorf(pos, "cannot compare text %s with timestamp: not an ISO-8601 timestamp", short(v))
	}
	return Time(ms), nil
}
