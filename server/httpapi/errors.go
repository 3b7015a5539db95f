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
)

// The error kinds of SPEC §3 that the engine does not name itself.
const (
	codeUnauthorized     = "unauthorized"
	codeNotFound         = "not_found"
	codeMethodNotAllowed = "method_not_allowed"
	codeTooLarge         = "too_large"
	codeKeyReused        = "key_reused"
	codeKeyLimit         = "key_limit"
	codeInternal         = "internal"
)

// apiError is an answer of SPEC §3's error form.
type apiError struct {
	status int
	code   string
	msg    string
	at     *int   // the refused statement of a batch
	allow  string // the Allow header of a 405
}

func (e *apiError) Error() string { return e.msg }

func badRequest(format string, args ...any) *apiError {
	return &apiError{status: http.StatusBadRequest, code: string(fenecql.CodeBadRequest), msg: fmt.Sprintf(format, args...)}
}

// engineError maps an error of the engine to its answer. In a batch a
// *engine.BatchError names the statement with "at"; a single /query has
// only the one, so it is left out.
func engineError(err error, batch bool) *apiError {
	e := &apiError{msg: err.Error()}
	var be *engine.BatchError
	if errors.As(err, &be) {
		e.msg = be.Err.Error()
		if batch {
			at := be.At
			e.at = &at
		}
	}
	code := engine.Code(err)
	e.code, e.status = string(code), code.Status()
	return e
}

func writeError(w http.ResponseWriter, e *apiError) {
	body := struct {
		Error string `json:"error"`
		Code  string `json:"code"`
		At    *int   `json:"at,omitempty"`
	}{e.msg, e.code, e.at}
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
	w.WriteHeader(e.status)
	_, _ = w.Write(append(b, '\n'))
}

// invalid answers a request that breaks the spec. A /batch statement's
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
