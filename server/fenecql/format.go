package fenecql

import (
	"strconv"
	"strings"
)

// Format renders an expression as canonical FenecQL text: one spelling
// for one meaning, whatever spacing or case it was written with. Held
// claims use it to tell whether two claims filter alike.
func Format(e Expr) string {
	var b strings.Builder
	format(&b, e)
	return b.String()
}

func format(b *strings.Builder, e Expr) {
	switch e := e.(type) {
	case nil:
	case *Lit:
		b.Write(AppendJSON(nil, e.Val))
	case *Param:
		b.WriteString("$" + strconv.Itoa(e.N))
	case *Claim:
		b.WriteString("$jwt." + e.Name)
	case *Ref:
		b.WriteString(strings.Join(e.Path, "."))
	case *Unary:
		if e.Op == OpNot {
			b.WriteString("not ")
		} else {
			b.WriteString("-")
		}
		format(b, e.X)
	case *Binary:
		b.WriteString("(")
		format(b, e.L)
		b.WriteString(" " + e.Op.String() + " ")
		format(b, e.R)
		b.WriteString(")")
	case *In:
		b.WriteString("(")
		format(b, e.X)
		if e.Not {
			b.WriteString(" not")
		}
		b.WriteString(" in ")
		format(b, e.List)
		b.WriteString(")")
	case *IsNull:
		b.WriteString("(")
		format(b, e.X)
		if e.Not {
			b.WriteString(" is not null)")
		} else {
			b.WriteString(" is null)")
		}
	case *Call:
		b.WriteString(e.Name + "(")
		for i, a := range e.Args {
			if i > 0 {
				b.WriteString(", ")
			}
			format(b, a)
		}
		b.WriteString(")")
	case *Case:
		b.WriteString("case")
		for _, w := range e.Whens {
			b.WriteString(" when ")
			format(b, w.Cond)
			b.WriteString(" then ")
			format(b, w.Then)
		}
		if e.Else != nil {
			b.WriteString(" else ")
			format(b, e.Else)
		}
		b.WriteString(" end")
	case *ListLit:
		b.WriteString("[")
		for i, x := range e.Items {
			if i > 0 {
				b.WriteString(", ")
			}
			format(b, x)
		}
		b.WriteString("]")
	case *ObjectLit:
		b.WriteString("{")
		for i, k := range e.Keys {
			if i > 0 {
				b.WriteString(", ")
			}
			b.WriteString(strconv.Quote(k) + ": ")
			format(b, e.Vals[i])
		}
		b.WriteString("}")
	}
}
