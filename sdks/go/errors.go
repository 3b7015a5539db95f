package fenecdb

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"syscall"
	"unicode/utf8"
)

// The client's own codes, beside the API's (generated in api.gen.go from
// openapi.yaml): docs/sdks.md names them for every SDK.
const (
	// CodeNetwork: no answer came: the connection was refused or reset,
	// or the host is unknown. The message names host:port and the cause.
	CodeNetwork ErrorCode = "network"
	// CodeTimeout: no whole answer came within the call's timeout (plus
	// its wait, for a held claim). The message says how long.
	CodeTimeout ErrorCode = "timeout"
	// CodeUnexpected: an answer that is not the API's JSON, such as a
	// proxy's 502 with an HTML body. The message has the status and the
	// start of the body.
	CodeUnexpected ErrorCode = "unexpected"
)

// Sentinels of the client's own codes, for errors.Is.
var (
	ErrNetwork    = &Error{Code: CodeNetwork, At: -1}
	ErrTimeout    = &Error{Code: CodeTimeout, At: -1}
	ErrUnexpected = &Error{Code: CodeUnexpected, At: -1}
)

// Error is every error a call answers, but for the caller's own context
// being cancelled or done (which answers ctx's error, wrapped) and a
// mistake along a builder chain (answered before anything is sent): a
// refusal of the server (Status and one of the API's codes), or one of
// [CodeNetwork], [CodeTimeout] and [CodeUnexpected]. A refused statement,
// or a refused batch, changed nothing. Match a code with errors.Is:
//
//	if errors.Is(err, fenecdb.ErrUnmet) {
//		// the job is no longer ours
//	}
//
// and read the fields with errors.As.
type Error struct {
	// Status is the HTTP status, or 0 when no answer came.
	Status int
	// Code is the kind of error.
	Code ErrorCode
	// Message says what is wrong and where.
	Message string
	// At is, for a refused [Client.Batch], the 0-based index of the
	// statement refused; -1 otherwise.
	At int
	// Cause is the error underneath (a network error, the deadline), or nil.
	Cause error
	// Leader is, on a 403 [CodeForbidden] of a cluster's node that is not
	// the leader, the leader's URL it named (its Fenec-Leader header); ""
	// when none. A call follows it itself ([Connect]): an error naming
	// one was not followed (a fourth follow in one call, https to http, or
	// a leader that refused the connection).
	Leader string
	// Method is what the call asked: "POST /query", "POST /batch", "GET
	// /collections"; "" for an error made before anything was sent.
	Method string
	// Node is the URL of the node the call was last sent to.
	Node string
	// Statement is the statement sent (a batch's joined with "; "), cut
	// to 200 bytes with … when longer.
	Statement string
	// IdempotencyKey is the key the call was sent under: the caller's
	// [IdempotencyKey], or one of its own for a write under
	// [WithRetries]; "" when none.
	IdempotencyKey string
	// Retryable says the same call may be sent again as it was, and the
	// retry could succeed: a fault (no answer, [CodeUnavailable],
	// [CodeInternal], a proxy's 502, 503 or 504) of a read, or of a write
	// under an idempotency key. A write without a key is never retryable:
	// whether it applied is not known.
	Retryable bool
}

// Error implements the error interface.
func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString("fenecdb: ")
	if e.Status != 0 {
		fmt.Fprintf(&b, "%d ", e.Status)
	}
	b.WriteString(string(e.Code))
	if e.At >= 0 {
		fmt.Fprintf(&b, " (statement %d)", e.At)
	}
	if e.Message != "" {
		b.WriteString(": " + e.Message)
	}
	return b.String()
}

// Unwrap returns the cause.
func (e *Error) Unwrap() error { return e.Cause }

// Is reports whether target is an *Error of the same code: the sentinels
// [ErrUnmet] and its siblings match every error of their code.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.Code == e.Code
}

// refusal reads an answer that is not a 2xx: the API's error body
// {"error", "code"[, "at"]}, or anything else as [CodeUnexpected].
func refusal(host, what string, status int, body []byte) *Error {
	var b apiError
	if json.Unmarshal(body, &b) == nil && slices.Contains(apiErrorCodes, ErrorCode(b.Code)) {
		e := &Error{Status: status, Code: ErrorCode(b.Code), Message: b.Error, At: -1}
		if b.At != nil {
			e.At = int(*b.At)
		}
		return e
	}
	return unexpected(host, what, status, body)
}

// unexpected is an answer that is not the API's.
func unexpected(host, what string, status int, body []byte) *Error {
	start := strings.TrimSpace(string(body))
	if len(start) > 200 {
		start = start[:200]
		for !utf8.ValidString(start) {
			start = start[:len(start)-1]
		}
		start += "…"
	}
	if start == "" {
		start = "(empty)"
	}
	return &Error{Status: status, Code: CodeUnexpected, At: -1,
		Message: fmt.Sprintf("unexpected answer from %s to %s, not the API's JSON: HTTP %d %s: %s", host, what, status, http.StatusText(status), start)}
}

// errTimedOut is the cause of a request context the call's own timeout
// ended, told apart from the caller's context ending.
var errTimedOut = errors.New("the call's timeout")

// sendFailure turns a failure to get an answer into the error a call
// returns: the caller's context error (wrapped), a [CodeTimeout] or a
// [CodeNetwork].
func sendFailure(caller, req context.Context, what, host, bound string, err error) error {
	if caller.Err() != nil {
		return fmt.Errorf("fenecdb: %s: %w", what, context.Cause(caller))
	}
	if errors.Is(context.Cause(req), errTimedOut) {
		return &Error{Code: CodeTimeout, At: -1, Cause: context.DeadlineExceeded,
			Message: fmt.Sprintf("%s: no answer from %s in %s", what, host, bound)}
	}
	return &Error{Code: CodeNetwork, At: -1, Cause: err,
		Message: fmt.Sprintf("%s: cannot reach %s: %s", what, host, networkCause(err))}
}

// networkCause names what went wrong on the wire in a few words:
// "connection refused", "no such host", "connection reset by peer".
func networkCause(err error) string {
	var dns *net.DNSError
	if errors.As(err, &dns) {
		return dns.Err
	}
	var errno syscall.Errno
	if errors.As(err, &errno) {
		return errno.Error()
	}
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err.Error()
	}
	return err.Error()
}
