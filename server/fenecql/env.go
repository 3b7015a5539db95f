package fenecql

// Row is what an expression reads its fields from. Field answers the
// named field's value (null when missing); "id" is the document's id.
type Row interface {
	Field(name string) Value
}

// Env is everything an expression may read: the row, the statement's
// parameters and its time, and — in policy filters — the token's claims
// and the row as it would be written.
type Env struct {
	Row    Row              // nil where no row is in scope
	New    Row              // policy filters: the row as written (`new.f`)
	Params []Value          // $1 is Params[0]
	Now    int64            // now(), fixed once per statement
	Claims map[string]Value // policy filters: $jwt.<claim>
}
