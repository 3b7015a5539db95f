package httpapi

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/fenecdb/fenec/server/engine"
	"github.com/fenecdb/fenec/server/fenecql"
	"github.com/fenecdb/fenec/server/httpapi/gen"
)

// TestEveryCodeHasAStatus: each code of openapi.yaml's ErrorCode has its
// status here, and the responses the spec names for it; a code added to
// the spec without its line in statuses fails here.
func TestEveryCodeHasAStatus(t *testing.T) {
	t.Parallel()
	spec, err := LoadSpec()
	if err != nil {
		t.Fatal(err)
	}
	enum := spec.Components.Schemas["Error"].Value.Properties["code"].Value.Enum
	if len(enum) == 0 {
		t.Fatal("openapi.yaml's Error.code has no enum")
	}
	for _, v := range enum {
		code := gen.ErrorCode(fmt.Sprint(v))
		if !code.Valid() {
			t.Errorf("%s: not a gen.ErrorCode (run make generate)", code)
		}
		if statuses[code] == 0 {
			t.Errorf("%s: no status in statuses", code)
		}
	}
	if len(statuses) != len(enum) {
		t.Errorf("statuses has %d codes, openapi.yaml %d", len(statuses), len(enum))
	}
}

// TestErrorCode: the engine's errors answer the API's codes: a FenecQL
// error's by its kind, unavailable for a store failure or a request given
// up, internal for anything else.
func TestErrorCode(t *testing.T) {
	t.Parallel()
	db, err := engine.Open(engine.Options{File: ":memory:"})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	gone, cancel := context.WithCancel(context.Background())
	cancel()
	_, givenUp := db.Batch(gone, []engine.Statement{{Query: "create collection x (a int)"}})
	if !errors.Is(givenUp, context.Canceled) {
		t.Errorf("a request given up: %v, without its cause", givenUp)
	}
	for _, tc := range []struct {
		err  error
		want gen.ErrorCode
	}{
		{fenecql.Errorf(3, "expected a value"), gen.ErrorCodeBadRequest},
		{fenecql.CodeErrorf(fenecql.CodeUnknown, 1, "no collection x"), gen.ErrorCodeNotFound},
		{&engine.BatchError{At: 1, Err: fenecql.CodeErrorf(fenecql.CodeTaken, 1, "id 1 is taken")}, gen.ErrorCodeConflict},
		{fenecql.CodeErrorf(fenecql.CodeUnmet, 0, "wrote 0 rows"), gen.ErrorCodeUnmet},
		{fenecql.CodeErrorf(fenecql.CodeForbidden, 0, "policy"), gen.ErrorCodeForbidden},
		{givenUp, gen.ErrorCodeUnavailable},
		{errors.New("a fault"), gen.ErrorCodeInternal},
	} {
		if got := errorCode(tc.err); got != tc.want {
			t.Errorf("%v: %s, want %s", tc.err, got, tc.want)
		}
	}
}
