// Command sdkgen writes each SDK's generated transport from openapi.yaml:
// the request and answer types, the error codes, the header names and one
// call per operation, rendered from a text/template per language.
//
// A language is a template in templates/ and a line in languages below.
//
//	go run . -root ../..            # write every language's file
//	go run . -root ../.. -lang ts   # one language
//	go run . -root ../.. -check     # exit 1 if a checked-in file is stale
//	sdkgen -version                 # a prebuilt binary's version and commit
//
// The templates are embedded, so a binary from `make dist` (dist/sdkgen)
// generates from any checkout without Go. It refuses a checkout whose
// tools/sdkgen/templates differ from the ones it carries: those are newer
// (or other) than the binary, which would write old code.
package main

import (
	"bytes"
	"embed"
	"errors"
	"flag"
	"fmt"
	"go/format"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"text/template"
)

// version and commit are stamped by `make dist` (-ldflags -X).
var (
	version = "dev"
	commit  = "unknown"
)

// Language is one SDK's generated file: the template that renders it and
// where it goes, relative to the repository root.
type Language struct {
	Name     string
	Template string
	Out      string
	// Format, if set, rewrites the rendered file (gofmt for Go).
	Format func([]byte) ([]byte, error)
}

// languages are every SDK's generated transports. Add a language with a
// template in templates/ and a line here.
var languages = []Language{
	{Name: "ts", Template: "ts.tmpl", Out: "sdks/js/src/generated/transport.ts"},
	{Name: "python", Template: "python.tmpl", Out: "sdks/python/src/fenecdb/_generated.py"},
	{Name: "go", Template: "go.tmpl", Out: "sdks/go/api.gen.go", Format: format.Source},
	{Name: "kotlin", Template: "kotlin.tmpl", Out: "sdks/kotlin/src/main/kotlin/com/fenecdb/Transport.gen.kt"},
	{Name: "csharp", Template: "csharp.tmpl", Out: "sdks/dotnet/src/FenecDb/Transport.g.cs"},
	{Name: "swift", Template: "swift.tmpl", Out: "sdks/swift/Sources/FenecDB/Transport.swift"},
	{Name: "dart", Template: "dart.tmpl", Out: "sdks/dart/lib/src/transport.g.dart"},
}

//go:embed templates/*.tmpl
var embedded embed.FS

// templatesDir is where a checkout keeps the templates, relative to -root.
const templatesDir = "tools/sdkgen/templates"

func main() {
	root := flag.String("root", ".", "the repository root")
	spec := flag.String("spec", "openapi.yaml", "the HTTP contract, relative to -root")
	lang := flag.String("lang", "all", "the language to generate, or all")
	check := flag.Bool("check", false, "write nothing; exit 1 when a generated file is not what it would be")
	showVersion := flag.Bool("version", false, "print the version and commit, and exit")
	flag.Parse()
	if *showVersion {
		fmt.Printf("sdkgen %s\ncommit %s\n", version, commit)
		return
	}
	tmpl, err := fs.Sub(embedded, "templates")
	if err != nil {
		panic(err)
	}
	if err := sameTemplates(tmpl, filepath.Join(*root, templatesDir)); err != nil {
		fmt.Fprintln(os.Stderr, "sdkgen:", err)
		os.Exit(1)
	}
	if err := run(*root, *spec, *lang, *check, tmpl); err != nil {
		fmt.Fprintln(os.Stderr, "sdkgen:", err)
		os.Exit(1)
	}
}

// sameTemplates returns an error when dir (a checkout's templates) exists
// and holds other templates than tmpl (the binary's): a file missing from
// either side, or one that differs. A root without the directory (an SDK
// outside this repository) is not compared.
func sameTemplates(tmpl fs.FS, dir string) error {
	if _, err := os.Stat(dir); errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	mine, err := fs.Glob(tmpl, "*.tmpl")
	if err != nil {
		return err
	}
	theirs, err := filepath.Glob(filepath.Join(dir, "*.tmpl"))
	if err != nil {
		return err
	}
	for i, p := range theirs {
		theirs[i] = filepath.Base(p)
	}
	var differ []string
	for _, name := range mine {
		a, _ := fs.ReadFile(tmpl, name)
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil || !bytes.Equal(a, b) {
			differ = append(differ, name)
		}
	}
	for _, name := range theirs {
		if !slices.Contains(mine, name) {
			differ = append(differ, name)
		}
	}
	if len(differ) > 0 {
		return fmt.Errorf("this sdkgen (%s, commit %s) carries templates older than or different from the checkout's %s (%v): it would write old code; rebuild it (make dist) or run go run ./tools/sdkgen", version, commit, dir, differ)
	}
	return nil
}

// run renders every language picked by lang from the templates in tmpl
// into root, or with check only compares.
func run(root, spec, lang string, check bool, tmpl fs.FS) error {
	model, err := Load(filepath.Join(root, spec))
	if err != nil {
		return err
	}
	picked := 0
	stale := false
	for _, l := range languages {
		if lang != "all" && lang != l.Name {
			continue
		}
		picked++
		out, err := Render(l, model, tmpl)
		if err != nil {
			return err
		}
		path := filepath.Join(root, l.Out)
		if check {
			old, err := os.ReadFile(path)
			if err != nil || !bytes.Equal(old, out) {
				fmt.Fprintf(os.Stderr, "%s is stale: run make generate\n", l.Out)
				stale = true
			}
			continue
		}
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(path, out, 0o644); err != nil {
			return err
		}
	}
	if picked == 0 {
		return fmt.Errorf("no language %q", lang)
	}
	if stale {
		return fmt.Errorf("generated files are stale")
	}
	return nil
}

// Render renders one language's file from the model.
func Render(l Language, m *Model, tmpl fs.FS) ([]byte, error) {
	t, err := template.New(l.Template).Funcs(funcs).ParseFS(tmpl, l.Template)
	if err != nil {
		return nil, err
	}
	var b bytes.Buffer
	if err := t.Execute(&b, m); err != nil {
		return nil, fmt.Errorf("%s: %w", l.Name, err)
	}
	if l.Format != nil {
		out, err := l.Format(b.Bytes())
		if err != nil {
			return nil, fmt.Errorf("%s: formatting: %w", l.Name, err)
		}
		return out, nil
	}
	return b.Bytes(), nil
}
