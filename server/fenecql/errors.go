package fenecql

import (
	"errors"
	"fmt"
)

// Code is what a statement did wrong, in the language's terms. The API's
// codes, and their HTTP statuses, are httpapi's: it maps these to them.
type Code uint8

const (
	codeNone      Code = iota // not a FenecQL error
	CodeInvalid               // a parse, type or parameter error
	CodeUnknown               // an unknown collection or field
	CodeTaken                 // a taken id, or a taken @unique value
	CodeUnmet                 // require n not met
	CodeForbidden             // the token's policy does not allow it
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

// Errorf makes an invalid-statement error at pos (0 for none).
func Errorf(pos Pos, format string, args ...any) *Error {
	return &Error{Code: CodeInvalid, Pos: pos, Msg: fmt.Sprintf(format, clipArgs(args)...)}
}

// CodeErrorf makes an error of the given code at pos (0 for none).
func CodeErrorf(code Code, pos Pos, format string, args ...any) *Error {
	return &Error{Code: code, Pos: pos, Msg: fmt.Sprintf(format, clipArgs(args)...)}
}

// clipArgs clips the texts among an error's arguments (Clip): the names,
// paths and literals a statement's errors echo are the client's, and may
// be of any length.
func clipArgs(args []any) []any {
	for i, a := range args {
		if s, ok := a.(string); ok && len(s) > ClipLen {
			args[i] = Clip(s)
		}
	}
	return args
}

// CodeOf returns the code of a FenecQL error in err's chain; 0, which is
// no code, when there is none.
func CodeOf(err error) Code {
	var fe *Error
	if errors.As(err, &fe) {
		return fe.Code
	}
	return codeNone
}

func (c Code) String() string {
	switch c {
	case CodeInvalid:
		return "invalid"
	case CodeUnknown:
		return "unknown"
	case CodeTaken:
		return "taken"
	case CodeUnmet:
		return "unmet"
	case CodeForbidden:
		return "forbidden"
	}
	return "none"
}
