package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
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

func TestSwiftName(t *testing.T) {
	for in, want := range map[string]string{"internal": "`internal`", "default": "`default`", "fenec-wait": "fenecWait", "type": "type"} {
		if got := swiftName(in); got != want {
			t.Errorf("swiftName(%q) = %q, want %q", in, got, want)
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
		out, err := Render(l, m, os.DirFS("templates"))
		if err != nil {
			t.Fatal(err)
		}
		old, err := os.ReadFile(filepath.Join("../..", l.Out))
		if err != nil || !bytes.Equal(old, out) {
			t.Errorf("%s is stale: run make generate", l.Out)
		}
	}
}

// TestResolve checks what the C#, Swift and Dart templates ask of a type:
// the schema a ref names, and whether it is raw JSON, a record of its own,
// or allows null.
func TestResolve(t *testing.T) {
	m, err := Load("../../openapi.yaml")
	if err != nil {
		t.Fatal(err)
	}
	named := map[string]*Type{}
	for _, n := range m.Types {
		named[n.Name] = n.Type
	}
	for _, c := range []struct {
		ref         string
		raw, record bool
	}{
		{"Value", true, false},
		{"Answer", true, false},
		{"ClockMove", true, false},
		{"Row", false, false},
		{"Rows", false, false},
		{"QueryRequest", false, true},
		{"Error", false, true},
	} {
		ref := &Type{Kind: "ref", Ref: c.ref, Target: named[c.ref]}
		if ref.Raw() != c.raw || ref.Record() != c.record {
			t.Errorf("%s: raw %v record %v, want %v %v", c.ref, ref.Raw(), ref.Record(), c.raw, c.record)
		}
	}
	for _, op := range m.Operations {
		if op.Body != nil && op.Body.Kind == "ref" && op.Body.Target == nil {
			t.Errorf("%s: body ref %s not resolved", op.ID, op.Body.Ref)
		}
	}
	var index *Type
	for _, p := range named["Field"].Props {
		if p.Name == "index" {
			index = p.Type
		}
	}
	if index == nil || !index.AllowsNull() || index.Nullable {
		t.Errorf("Field.index allows null through its enum: %+v", index)
	}
	if named["Rows"].AllowsNull() {
		t.Error("Rows allows no null")
	}
}

// TestNewTransports checks a line of each call, header and code in the
// C#, Swift and Dart transports (the parse check, make
// test-generated-parse, reads the whole files).
func TestNewTransports(t *testing.T) {
	m, err := Load("../../openapi.yaml")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][]string{
		"csharp": {
			"namespace FenecDb;",
			"#nullable enable",
			"public sealed class Transport : IDisposable, IAsyncDisposable",
			"public Task<Reply<JsonElement>> QueryAsync(QueryRequest body, QueryHeaders? headers = null, CancellationToken cancellationToken = default)",
			"public Task<Reply<string>> MetricsAsync(CancellationToken cancellationToken = default)",
			`new("Fenec-Wait", headers?.FenecWait?.ToString(CultureInfo.InvariantCulture)),`,
			`public const string FenecSeq = "Fenec-Seq";`,
			`public static readonly Route Health = new("GET", "/_health", false);`,
			`[JsonPropertyName("raft_address")]`,
			"public required long AffectedValue { get; init; }",
			`"no_leader" => ErrorCode.NoLeader,`,
		},
		"swift": {
			"public func query(_ body: QueryRequest, headers: QueryHeaders = QueryHeaders()) async throws -> Reply<Answer>",
			"public func metrics() async throws -> Reply<String>",
			`("Fenec-After", headers.fenecAfter.map { String($0) }),`,
			"public struct ClusterMember: Codable, Sendable, Hashable {",
			`case raftAddress = "raft_address"`,
			"public var index: String?",
			`case noLeader = "no_leader"`,
			"case `internal` = \"internal\"",
			"public typealias Rows = [Row]",
			"public struct Transport: Sendable {",
		},
		"dart": {
			"import 'package:http/http.dart' as http;",
			"Future<Reply<Answer>> query(QueryRequest body, {QueryHeaders headers = const QueryHeaders(), Future<void>? abortTrigger}) async {",
			`"Idempotency-Key": headers.idempotencyKey,`,
			`raftAddress: json["raft_address"] as String,`,
			`if (leaderId != null) "leader_id": leaderId!,`,
			`"members": members.map((e) => e.toJson()).toList(),`,
			"final String? index;",
			`noLeader("no_leader"),`,
			"typedef Value = Object?;",
		},
	}
	for _, l := range languages {
		lines, ok := want[l.Name]
		if !ok {
			continue
		}
		out, err := Render(l, m, os.DirFS("templates"))
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range lines {
			if !bytes.Contains(out, []byte(line)) {
				t.Errorf("%s lacks %q", l.Out, line)
			}
		}
		for _, code := range m.ErrorCodes {
			if !bytes.Contains(out, []byte(`"`+code+`"`)) {
				t.Errorf("%s lacks the code %s", l.Out, code)
			}
		}
		for _, h := range m.Headers {
			if !bytes.Contains(out, []byte(`"`+h.Name+`"`)) {
				t.Errorf("%s lacks the header %s", l.Out, h.Name)
			}
		}
		delete(want, l.Name)
	}
	if len(want) > 0 {
		t.Errorf("no language for %v", want)
	}
}

// TestCheckStale: -check fails on a generated file that differs from what
// it would write, and passes once it is written.
func TestCheckStale(t *testing.T) {
	root := t.TempDir()
	spec, err := os.ReadFile("../../openapi.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "openapi.yaml"), spec, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, lang := range []string{"csharp", "swift", "dart"} {
		if err := run(root, "openapi.yaml", lang, true, os.DirFS("templates")); err == nil {
			t.Errorf("%s: -check passes with no file", lang)
		}
		if err := run(root, "openapi.yaml", lang, false, os.DirFS("templates")); err != nil {
			t.Fatal(err)
		}
		if err := run(root, "openapi.yaml", lang, true, os.DirFS("templates")); err != nil {
			t.Errorf("%s: -check fails on what it wrote: %v", lang, err)
		}
	}
	path := filepath.Join(root, "sdks/swift/Sources/FenecDB/Transport.swift")
	b, _ := os.ReadFile(path)
	if err := os.WriteFile(path, append(b, '\n'), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := run(root, "openapi.yaml", "swift", true, os.DirFS("templates")); err == nil {
		t.Error("-check passes on an edited Transport.swift")
	}
}

// checkout copies what sdkgen reads and writes of the repository into a
// temporary root: openapi.yaml, the templates and every generated file.
func checkout(t *testing.T) string {
	t.Helper()
	root := t.TempDir()
	files := []string{"openapi.yaml"}
	for _, l := range languages {
		files = append(files, l.Out)
	}
	tmpls, err := filepath.Glob("templates/*.tmpl")
	if err != nil || len(tmpls) == 0 {
		t.Fatalf("templates: %v %v", tmpls, err)
	}
	for _, p := range tmpls {
		files = append(files, filepath.Join(templatesDir, filepath.Base(p)))
	}
	for _, f := range files {
		b, err := os.ReadFile(filepath.Join("../..", f))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(filepath.Dir(filepath.Join(root, f)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(root, f), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

// edit appends a line to a template of root's checkout, as a hand would.
func edit(t *testing.T, root, name, line string) {
	t.Helper()
	p := filepath.Join(root, templatesDir, name)
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, append(b, line...), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestTemplateEditedIsStale: a template changed by hand (rendered from the
// checkout's templates, as `go run . -check` does) makes -check fail and
// names the file.
func TestTemplateEditedIsStale(t *testing.T) {
	root := checkout(t)
	tmpl := os.DirFS(filepath.Join(root, templatesDir))
	if err := run(root, "openapi.yaml", "all", true, tmpl); err != nil {
		t.Fatalf("a fresh copy: %v", err)
	}
	edit(t, root, "ts.tmpl", "// edited by hand\n")
	err := run(root, "openapi.yaml", "all", true, tmpl)
	if err == nil || !strings.Contains(err.Error(), "stale") {
		t.Fatalf("after editing ts.tmpl: %v, want stale", err)
	}
}

// sdkgenBinary returns $SDKGEN_BIN (a prebuilt sdkgen, such as dist/sdkgen),
// or this package built into a temporary directory.
func sdkgenBinary(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("SDKGEN_BIN"); p != "" {
		abs, err := filepath.Abs(p)
		if err != nil {
			t.Fatal(err)
		}
		return abs
	}
	out := filepath.Join(t.TempDir(), "sdkgen")
	if b, err := exec.Command("go", "build", "-o", out, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, b)
	}
	return out
}

// TestBinary runs a built sdkgen on a copy of the checkout: -check passes,
// a deleted transport is written again as it was, and once the checkout's
// templates differ from the ones the binary carries (a newer checkout, an
// older binary) it refuses, writing nothing, and says to rebuild.
func TestBinary(t *testing.T) {
	bin := sdkgenBinary(t)
	root := checkout(t)
	if out, err := exec.Command(bin, "-root", root, "-check").CombinedOutput(); err != nil {
		t.Fatalf("-check on a fresh copy: %v\n%s", err, out)
	}
	ts := filepath.Join(root, languages[0].Out)
	want, err := os.ReadFile(ts)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(ts); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(bin, "-root", root).CombinedOutput(); err != nil {
		t.Fatalf("writing: %v\n%s", err, out)
	}
	if got, err := os.ReadFile(ts); err != nil || !bytes.Equal(got, want) {
		t.Fatalf("%s written again differs (%v)", languages[0].Out, err)
	}

	edit(t, root, "python.tmpl", "# a newer template\n")
	if err := os.Remove(ts); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"-root", root}, {"-root", root, "-check"}} {
		out, err := exec.Command(bin, args...).CombinedOutput()
		if err == nil {
			t.Fatalf("sdkgen %v with other templates succeeded:\n%s", args, out)
		}
		if !strings.Contains(string(out), "python.tmpl") || !strings.Contains(string(out), "rebuild it (make dist)") {
			t.Errorf("sdkgen %v: %s", args, out)
		}
	}
	if _, err := os.Stat(ts); !os.IsNotExist(err) {
		t.Errorf("a refusing sdkgen wrote %s (%v)", languages[0].Out, err)
	}
	// A template the binary does not know of refuses too.
	if err := os.WriteFile(filepath.Join(root, templatesDir, "zz.tmpl"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	orig, err := os.ReadFile("templates/python.tmpl")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, templatesDir, "python.tmpl"), orig, 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(bin, "-root", root, "-check").CombinedOutput(); err == nil || !strings.Contains(string(out), "[zz.tmpl]") {
		t.Errorf("an unknown template: %v %s", err, out)
	}

	out, err := exec.Command(bin, "-version").Output()
	if err != nil || !strings.HasPrefix(string(out), "sdkgen ") || !strings.Contains(string(out), "\ncommit ") {
		t.Errorf("-version: %v %q", err, out)
	}
}
