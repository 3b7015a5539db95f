package fenecql

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
