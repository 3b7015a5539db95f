// Package conformance turns the FenecQL blocks of Fenec's user docs into
// language-neutral test cases, and holds the one rule every runner checks
// an answer by.
//
// A page of docs (docs/<page>.md) becomes a Page: its ```fenecql blocks,
// statement by statement and in order, as Steps. A Step either moves the
// test's manual clock (AdvanceMS) or sends a statement (Query, Params) and,
// when the doc says what it answers, checks the answer against Expect.
// Every page is replayed on a fresh database whose manual clock starts at
// ClockStartMS. README.md describes the JSON form of the cases written to
// cases/ and how a runner in any language replays them.
package conformance

import (
	"encoding/json"
	"fmt"
	"strconv"
)

//go:generate go run ./cmd/extract -docs ../docs -out cases

// ClockStartMS is where the manual clock of every replay starts:
// 2026-05-03T09:20:00.000Z, in UTC epoch milliseconds.
const ClockStartMS int64 = 1777800000000

// Page is the replayable content of one doc page.
type Page struct {
	// Page is the page's name: the file name without ".md" ("queues").
	Page string `json:"page"`
	// Source is the file the steps come from ("docs/queues.md"); Step.Line
	// numbers are lines of it.
	Source string `json:"source"`
	// Steps are run in order, on one fresh database.
	Steps []Step `json:"steps"`
}

// Step is one thing a runner does: a clock move when AdvanceMS > 0, else a
// statement.
type Step struct {
	// Line is the 1-based line of Source the step starts on.
	Line int `json:"line"`
	// Query is the statement's text, sent as is (comments other than the
	// expectation are kept: the server must parse them).
	Query string `json:"query,omitempty"`
	// Params are the statement's $1..$n, JSON values.
	Params []any `json:"params,omitempty"`
	// AdvanceMS moves the manual clock on by this many milliseconds.
	AdvanceMS int64 `json:"advance_ms,omitempty"`
	// Expect is what the statement answers; nil means only that it must
	// succeed.
	Expect *Expect `json:"expect,omitempty"`
}

// IsClock reports whether the step is a clock move.
func (s Step) IsClock() bool { return s.AdvanceMS > 0 }

// Expect is a statement's expected answer. Exactly one of its fields is set.
type Expect struct {
	// Value is the write's count ({"affected": n}) or, for an answer of
	// rows, the first value of the first row. Always a JSON scalar:
	// a number, a string, true, false or null.
	Value json.RawMessage `json:"value,omitempty"`
	// NoRow: the answer is an empty array of rows.
	NoRow bool `json:"no_row,omitempty"`
	// Refused is the HTTP status the statement is refused with.
	Refused int `json:"refused,omitempty"`
}

// String renders e the way the docs write it after "-- →".
func (e *Expect) String() string {
	switch {
	case e == nil:
		return "success"
	case e.Refused != 0:
		return "refused: " + strconv.Itoa(e.Refused)
	case e.NoRow:
		return "no row"
	case e.Value != nil:
		return string(e.Value)
	}
	return "success"
}

func (e *Expect) validate() error {
	if e == nil {
		return nil
	}
	n := 0
	if e.Value != nil {
		n++
		if !json.Valid(e.Value) {
			return fmt.Errorf("expectation value %q is not JSON", e.Value)
		}
	}
	if e.NoRow {
		n++
	}
	if e.Refused != 0 {
		n++
		if e.Refused < 400 || e.Refused > 599 {
			return fmt.Errorf("expectation refused: %d is not an error status (400-599)", e.Refused)
		}
	}
	if n > 1 {
		return fmt.Errorf("expectation sets more than one of value, no_row and refused")
	}
	return nil
}
