package fenecdb

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
)

// The codes of [Error.Code]: what kind of refusal the server answered.
const (
	CodeBadRequest       = "bad_request"        // 400: a parse, type, parameter or header error
	CodeUnauthorized     = "unauthorized"       // 401: a missing or wrong token
	CodeForbidden        = "forbidden"          // 403: not allowed by the token's rules, or a replica's write
	CodeNotFound         = "not_found"          // 404: an unknown collection or field
	CodeMethodNotAllowed = "method_not_allowed" // 405
	CodeConflict         = "conflict"           // 409: a taken id or @unique value
	CodeUnmet            = "unmet"              // 412: a require n was not met
	CodeTooLarge         = "too_large"          // 413: the body is over the server's --max-body
	CodeKeyReused        = "key_reused"         // 422: an Idempotency-Key used for another request
	CodeKeyLimit         = "key_limit"          // 503: as many Idempotency-Keys held as the server may; the write was not run
	CodeInternal         = "internal"           // 500: a fault in the server
	CodeUnavailable      = "unavailable"        // 503: the store failed, or the request was given up
	CodeStatementTimeout = "statement_timeout"  // 503: the statements ran past the server's --statement-timeout
)

// Error is a refusal answered by the server. A refused statement, or a
// refused batch, changed nothing.
//
//	var fe *fenecdb.Error
//	if errors.As(err, &fe) && fe.Code == fenecdb.CodeUnmet {
//		// the job is no longer ours
//	}
type Error struct {
	// Status is the HTTP status, 400 to 599.
	Status int
	// Code is the kind of refusal, one of the Code constants.
	Code string
	// Message says what is wrong and where, as the server wrote it.
	Message string
	// At is, for a refused [DB.Batch], the 0-based index of the statement
	// refused; -1 otherwise.
	At int
}

// Error implements the error interface.
func (e *Error) Error() string {
	at := ""
	if e.At >= 0 {
		at = fmt.Sprintf(" (statement %d)", e.At)
	}
	return fmt.Sprintf("fenecdb: %d %s%s: %s", e.Status, e.Code, at, e.Message)
}

// errorOf reads a refusal's body: {"error", "code"[, "at"]}. A body that is
// not one keeps its text as the message.
func errorOf(status int, body []byte) *Error {
	var b struct {
		Error string `json:"error"`
		Code  string `json:"code"`
		At    *int   `json:"at"`
	}
	e := &Error{Status: status, At: -1}
	if json.Unmarshal(body, &b) == nil && b.Code != "" {
		e.Code, e.Message = b.Code, b.Error
		if b.At != nil {
			e.At = *b.At
		}
		return e
	}
	e.Message = strings.TrimSpace(string(body))
	if e.Message == "" {
		e.Message = http.StatusText(status)
	}
	return e
}
