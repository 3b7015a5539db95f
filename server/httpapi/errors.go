package httpapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"

	"github.com/fenecdb/fenec/server/engine"
	"github.com/fenecdb/fenec/server/fenecql"
	"github.com/fenecdb/fenec/server/httpapi/gen"
)

// statuses is the HTTP status of each of the API's error codes
// (openapi.yaml's ErrorCode, generated as gen.ErrorCode). A new code is its
// line here, after its value in openapi.yaml and make generate; errorCode
// says which errors of the parts below answer it.
var statuses = map[gen.ErrorCode]int{
	gen.ErrorCodeBadRequest:         http.StatusBadRequest,
	gen.ErrorCodeUnauthorized:       http.StatusUnauthorized,
	gen.ErrorCodeForbidden:          http.StatusForbidden,
	gen.ErrorCodeNotFound:           http.StatusNotFound,
	gen.ErrorCodeMethodNotAllowed:   http.StatusMethodNotAllowed,
	gen.ErrorCodeConflict:           http.StatusConflict,
	gen.ErrorCodeUnmet:              http.StatusPreconditionFailed,
	gen.ErrorCodeTooLarge:           http.StatusRequestEntityTooLarge,
	gen.ErrorCodeKeyReused:          http.StatusUnprocessableEntity,
	gen.ErrorCodeInternal:           http.StatusInternalServerError,
	gen.ErrorCodeUnavailable:        http.StatusServiceUnavailable,
	gen.ErrorCodeStatementTimeout:   http.StatusServiceUnavailable,
	gen.ErrorCodeKeyLimit:           http.StatusServiceUnavailable,
	gen.ErrorCodeTooBusy:            http.StatusTooManyRequests,
	gen.ErrorCodeBehind:             http.StatusGatewayTimeout,
	gen.ErrorCodeNoLeader:           http.StatusServiceUnavailable,
	gen.ErrorCodeOriginNotAllowed:   http.StatusForbidden,
	gen.ErrorCodeHostNotAllowed:     http.StatusMisdirectedRequest,
	gen.ErrorCodeRequestTimeout:     http.StatusRequestTimeout,
	gen.ErrorCodeTooManyConnections: http.StatusServiceUnavailable,
	gen.ErrorCodeConsumerBusy:       http.StatusConflict,
	gen.ErrorCodeChangesGone:        http.StatusGone,
}

// fenecqlCodes is the API's code for each kind of FenecQL error.
var fenecqlCodes = map[fenecql.Code]gen.ErrorCode{
	fenecql.CodeInvalid:   gen.ErrorCodeBadRequest,
	fenecql.CodeUnknown:   gen.ErrorCodeNotFound,
	fenecql.CodeTaken:     gen.ErrorCodeConflict,
	fenecql.CodeUnmet:     gen.ErrorCodeUnmet,
	fenecql.CodeForbidden: gen.ErrorCodeForbidden,
}

// errorCode returns the API's code for an error of the engine: a FenecQL
// error's by its kind, unavailable for a store failure or a request given
// up, internal for anything else.
func errorCode(err error) gen.ErrorCode {
	if c, ok := fenecqlCodes[fenecql.CodeOf(err)]; ok {
		return c
	}
	if errors.Is(err, engine.ErrUnavailable) {
		return gen.ErrorCodeUnavailable
	}
	if leader, ok := leaderOf(err); ok {
		if leader == "" {
			// Unrun, and no leader to name: an election, or a leader
			// just elected (docs/cluster.md). Sent again shortly it is
			// taken, so 503 rather than a 403 no retry can change.
			return gen.ErrorCodeNoLeader
		}
		return gen.ErrorCodeForbidden
	}
	if errors.Is(err, engine.ErrScopeEnded) {
		return gen.ErrorCodeUnauthorized
	}
	if errors.Is(err, engine.ErrStatementTimeout) {
		return gen.ErrorCodeStatementTimeout
	}
	return gen.ErrorCodeInternal
}

// readTimedOut is a read stopped at --read-timeout: its message names
// that flag rather than --statement-timeout.
type readTimedOut struct{ error }

func (e readTimedOut) Unwrap() error { return e.error }

// apiError is an answer of the error form (gen.Error; docs/http.md).
type apiError struct {
	code  gen.ErrorCode
	msg   string
	at    *int   // the refused statement of a batch
	allow string // the Allow header of a 405
	// leader is the Fenec-Leader header of a cluster follower's refusal
	// (docs/cluster.md); "" when none is known.
	leader string
}

func (e *apiError) Error() string { return e.msg }

func newError(code gen.ErrorCode, format string, args ...any) *apiError {
	return &apiError{code: code, msg: fmt.Sprintf(format, args...)}
}

func badRequest(format string, args ...any) *apiError {
	return newError(gen.ErrorCodeBadRequest, format, args...)
}

// engineError maps an error of the engine to its answer. In a batch a
// *engine.BatchError names the statement with "at"; a single /query has
// only the one, so it is left out.
func engineError(err error, batch bool) *apiError {
	e := &apiError{msg: err.Error(), code: errorCode(err)}
	e.leader, _ = leaderOf(err)
	var be *engine.BatchError
	if errors.As(err, &be) {
		e.msg = be.Err.Error()
		if batch {
			at := be.At
			e.at = &at
		}
	}
	if e.code == gen.ErrorCodeStatementTimeout {
		// The limit is the server's flag.
		if errors.As(err, new(readTimedOut)) {
			e.msg += " (fenec serve --read-timeout)"
		} else {
			e.msg += " (fenec serve --statement-timeout)"
		}
	}
	return e
}

func writeError(w http.ResponseWriter, e *apiError) {
	if sw, ok := w.(*statusWriter); ok {
		sw.refused = e
	}
	body := gen.Error{Error: e.msg, Code: e.code, At: e.at}
	// Messages quote FenecQL (`run_at <= now()`), which HTML escaping
	// would garble for every reader that is not a browser.
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(body) // two strings and an int: cannot fail
	b := bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", strconv.Itoa(len(b)+1))
	if e.allow != "" {
		h.Set("Allow", e.allow)
	}
	if e.leader != "" {
		h.Set("Fenec-Leader", e.leader)
	}
	if e.code == gen.ErrorCodeTooBusy {
		h.Set("Retry-After", "1")
	}
	w.WriteHeader(statuses[e.code])
	_, _ = w.Write(append(b, '\n'))
}

// invalid returns the refusal of a request that breaks the spec. A /batch statement's
// error names it with "at", as the engine's errors do.
func invalid(err error) *apiError {
	e := badRequest("%s", describeInvalid(err))
	var se *openapi3.SchemaError
	if errors.As(err, &se) {
		if ptr := se.JSONPointer(); len(ptr) > 1 && ptr[0] == "statements" {
			if at, err := strconv.Atoi(ptr[1]); err == nil {
				e.at = &at
			}
		}
	}
	return e
}

// describeInvalid turns kin-openapi's validation error into a message a
// person can act on: which header or which part of the body, and why.
func describeInvalid(err error) string {
	var re *openapi3filter.RequestError
	if !errors.As(err, &re) {
		return err.Error()
	}
	if p := re.Parameter; p != nil {
		switch p.Name {
		case "Fenec-Wait":
			return "Fenec-Wait must be a whole number of milliseconds from 0 to 30000"
		case "Idempotency-Key":
			return "Idempotency-Key must be 1 to 255 bytes"
		}
		return fmt.Sprintf("header %s: %s", p.Name, reason(re))
	}
	if errors.Is(re.Err, openapi3filter.ErrInvalidRequired) {
		return "the request needs a JSON body"
	}
	var pe *openapi3filter.ParseError
	if errors.As(re.Err, &pe) {
		cause := pe.Cause
		if cause == nil {
			return "the body is not valid JSON: " + pe.Error()
		}
		return "the body is not valid JSON: " + strings.TrimPrefix(cause.Error(), "json: ")
	}
	var se *openapi3.SchemaError
	if errors.As(re.Err, &se) {
		if re.Input != nil && re.Input.Route != nil && re.Input.Route.Path == "/_clock" {
			return `send {"advance_ms": n} or {"set_ms": t}: one whole number of milliseconds, 0 or more`
		}
		ptr, why := se.JSONPointer(), se.Reason
		if n, ok := se.Value.(json.Number); ok && strings.HasPrefix(why, "cannot convert") {
			why = fmt.Sprintf("number %s is out of range", n)
		}
		// A missing property is reported at its own name; say it of its parent.
		if len(ptr) > 0 && strings.Contains(why, fmt.Sprintf("property %q is missing", ptr[len(ptr)-1])) {
			ptr = ptr[:len(ptr)-1]
		}
		if len(ptr) == 0 {
			return "the body: " + why
		}
		return "body field " + fieldPath(ptr) + ": " + why
	}
	return reason(re)
}

func reason(re *openapi3filter.RequestError) string {
	if re.Err != nil {
		return re.Err.Error()
	}
	return re.Reason
}

// fieldPath writes a JSON pointer as a person reads it: statements[0].params.
func fieldPath(ptr []string) string {
	var b strings.Builder
	for i, p := range ptr {
		if _, err := strconv.Atoi(p); err == nil {
			b.WriteString("[" + p + "]")
			continue
		}
		if i > 0 {
			b.WriteByte('.')
		}
		b.WriteString(p)
	}
	return b.String()
}
