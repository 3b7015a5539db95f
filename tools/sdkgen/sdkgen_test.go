package main

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

func TestNames(t *testing.T) {
	for _, c := range []struct{ in, camel, pascal, snake string }{
		{"Fenec-Wait", "fenecWait", "FenecWait", "fenec_wait"},
		{"Idempotent-Replayed", "idempotentReplayed", "IdempotentReplayed", "idempotent_replayed"},
		{"moveClock", "moveClock", "MoveClock", "move_clock"},
		{"advance_ms", "advanceMs", "AdvanceMs", "advance_ms"},
		{"query", "query", "Query", "query"},
	} {
		if got := camel(c.in); got != c.camel {
			t.Errorf("camel(%q) = %q, want %q", c.in, got, c.camel)
		}
		if got := pascal(c.in); got != c.pascal {
			t.Errorf("pascal(%q) = %q, want %q", c.in, got, c.pascal)
		}
		if got := snake(c.in); got != c.snake {
			t.Errorf("snake(%q) = %q, want %q", c.in, got, c.snake)
		}
	}
}

// TestModel checks what the templates rely on in the repository's spec.
func TestModel(t *testing.T) {
	m, err := Load("../../openapi.yaml")
	if err != nil {
		t.Fatal(err)
	}
	ids := map[string]Operation{}
	for _, op := range m.Operations {
		ids[op.ID] = op
	}
	q, ok := ids["query"]
	if !ok || q.Method != "POST" || q.Path != "/query" || q.Body == nil || q.Body.Ref != "QueryRequest" || q.Answer.Ref != "Answer" {
		t.Errorf("query: %+v", q)
	}
	if len(q.Headers) != 3 || q.Headers[0].Name != "Fenec-Wait" || q.Headers[1].Name != "Idempotency-Key" || q.Headers[2].Name != "Fenec-After" {
		t.Errorf("query headers: %+v", q.Headers)
	}
	if h := ids["health"]; h.Auth || !ids["query"].Auth {
		t.Errorf("auth: health %v, query %v", h.Auth, q.Auth)
	}
	if !ids["metrics"].AnswerText {
		t.Error("metrics answers text")
	}
	var names []string
	for _, h := range m.Headers {
		names = append(names, h.Name)
	}
	want := []string{"Authorization", "Fenec-After", "Fenec-Seq", "Fenec-Wait", "Idempotency-Key", "Idempotent-Replayed"}
	if len(names) != len(want) {
		t.Fatalf("headers %v, want %v", names, want)
	}
	for i := range want {
		if names[i] != want[i] {
			t.Errorf("headers %v, want %v", names, want)
		}
	}
	if m.ErrorCodes[0] != "bad_request" {
		t.Errorf("error codes %v", m.ErrorCodes)
	}
}

// TestCheckedIn fails when a checked-in generated file is stale.
func TestCheckedIn(t *testing.T) {
	m, err := Load("../../openapi.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range languages {
		out, err := Render(l, m)
		if err != nil {
			t.Fatal(err)
		}
		old, err := os.ReadFile(filepath.Join("../..", l.Out))
		if err != nil || !bytes.Equal(old, out) {
			t.Errorf("%s is stale: run make generate", l.Out)
		}
	}
}
