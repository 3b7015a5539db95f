package fenecql

import "fmt"

// Code is the kind of an error, as the HTTP API names it.
type Code string

const (
	CodeBadRequest  Code = "bad_request" // parse, type, bad parameter
	CodeNotFound    Code = "not_found"   // unknown collection or field
	CodeConflict    Code = "conflict"    // taken id, @unique value
	CodeUnmet       Code = "unmet"       // require n not met
	CodeForbidden   Code = "forbidden"   // policy
	CodeInternal    Code = "internal"
	CodeUnavailable Code = "unavailable"
	// CodeStatementTimeout: a statement ran past the server's
	// --statement-timeout and was stopped, writing nothing.
	CodeStatementTimeout Code = "statement_timeout"
)

// Error is a FenecQL error: what is wrong and, when it is in the text,
// where. Pos is 0 when the error has no place in the text.
type Error struct {
	Code Code
	Pos  Pos
	Msg  string
}

func (e *Error) Error() string {
	if e.Pos > 0 {
		return fmt.Sprintf("position %d: %s", e.Pos, e.Msg)
	}
	return e.Msg
}

// Errorf makes a bad_request error at pos (0 for none).
func Errorf(pos Pos, format string, args ...any) *Error {
	return &Error{Code: CodeBadRequest, Pos: pos, Msg: fmt.Sprintf(format, args...)}
}

// CodeErrorf makes an error of the given code at pos (0 for none).
func CodeErrorf(code Code, pos Pos, format string, args ...any) *Error {
	return &Error{Code: code, Pos: pos, Msg: fmt.Sprintf(format, args...)}
}

// Status answers the HTTP status the API answers an error of this kind with.
func (c Code) Status() int {
	switch c {
	case CodeBadRequest:
		return 400
	case CodeForbidden:
		return 403
	case CodeNotFound:
		return 404
	case CodeConflict:
		return 409
	case CodeUnmet:
		return 412
	case CodeUnavailable, CodeStatementTimeout:
		return 503
	}
	return 500
}
