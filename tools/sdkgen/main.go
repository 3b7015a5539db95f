// Command sdkgen writes each SDK's generated transport from openapi.yaml:
// the request and answer types, the error codes, the header names and one
// call per operation, rendered from a text/template per language.
//
// A language is a template in templates/ and a line in languages below.
//
//	go run . -root ../..            # write every language's file
//	go run . -root ../.. -lang ts   # one language
//	go run . -root ../.. -check     # exit 1 if a checked-in file is stale
package main

import (
	"bytes"
	"embed"
	"flag"
	"fmt"
	"go/format"
	"os"
	"path/filepath"
	"text/template"
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
var templates embed.FS

func main() {
	root := flag.String("root", ".", "the repository root")
	spec := flag.String("spec", "openapi.yaml", "the HTTP contract, relative to -root")
	lang := flag.String("lang", "all", "the language to generate, or all")
	check := flag.Bool("check", false, "write nothing; exit 1 when a generated file is not what it would be")
	flag.Parse()
	if err := run(*root, *spec, *lang, *check); err != nil {
		fmt.Fprintln(os.Stderr, "sdkgen:", err)
		os.Exit(1)
	}
}

func run(root, spec, lang string, check bool) error {
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
		out, err := Render(l, model)
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
func Render(l Language, m *Model) ([]byte, error) {
	t, err := template.New(l.Template).Funcs(funcs).ParseFS(templates, "templates/"+l.Template)
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
