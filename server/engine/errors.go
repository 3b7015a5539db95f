package engine

import (
	"errors"
	"fmt"

	"github.com/fenecdb/fenec/server/fenecql"
)

// ErrUnavailable is in the chain of every error of a request the database
// could not serve — the store failed, or the request was given up — as
// against one FenecQL refused (a *fenecql.Error). The cause, the store's
// error or the context's, is in the chain too.
var ErrUnavailable = errors.New("the database cannot serve the request now")

// unavailable is such an error: what could not be done, and why.
type unavailable struct {
	msg   string
	cause error
}

func (e *unavailable) Error() string   { return e.msg }
func (e *unavailable) Unwrap() []error { return []error{ErrUnavailable, e.cause} }

// unavailableError says what could not be done, with its cause.
func unavailableError(cause error, what string) error {
	return &unavailable{msg: fmt.Sprintf("%s: %v", what, cause), cause: cause}
}

// ErrScopeEnded is in the chain of the error of a statement whose scope
// (a token's access) ended before the statement ran: a held claim whose
// token expired while it waited.
var ErrScopeEnded = errors.New("the statement's scope has ended")

// scopeEnded says when the scope ended.
type scopeEnded struct{ until int64 }

func (e *scopeEnded) Error() string {
	return fmt.Sprintf("token expired (exp %s) before the statement ran", fenecql.FormatTime(e.until))
}
func (e *scopeEnded) Unwrap() error { return ErrScopeEnded }

// ErrStatementTimeout is in the chain of the error of a statement stopped
// at its context's deadline: it wrote nothing.
var ErrStatementTimeout = errors.New("the statement ran past its time limit and was stopped; nothing was written")
