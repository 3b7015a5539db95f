// Command extract writes the conformance cases of Fenec's docs: one
// <out>/<page>.json for every <docs>/*.md holding ```fenecql blocks, and
// removes the .json files of pages that no longer have any.
//
//	go run ./cmd/extract -docs ../docs -out cases
//
// With -check it writes nothing and fails when the files are not what it
// would write.
package main

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"sort"

	"github.com/fenecdb/fenec/conformance"
)

func main() {
	docs := flag.String("docs", "../docs", "directory of the Markdown docs")
	out := flag.String("out", "cases", "directory the cases are written to")
	check := flag.Bool("check", false, "fail if the cases are stale instead of writing them")
	flag.Parse()
	stale, err := run(*docs, *out, *check)
	if err != nil {
		fmt.Fprintln(os.Stderr, "extract:", err)
		os.Exit(1)
	}
	if *check && len(stale) > 0 {
		for _, f := range stale {
			fmt.Fprintln(os.Stderr, "extract: stale:", f)
		}
		fmt.Fprintln(os.Stderr, "extract: run make generate")
		os.Exit(1)
	}
}

func run(docs, out string, check bool) (stale []string, err error) {
	files, err := conformance.CaseFiles(docs)
	if err != nil {
		return nil, err
	}
	want := map[string][]byte{}
	for name, b := range files {
		want[filepath.Join(out, name)] = b
	}
	if !check {
		if err := os.MkdirAll(out, 0o755); err != nil {
			return nil, err
		}
	}
	old, err := filepath.Glob(filepath.Join(out, "*.json"))
	if err != nil {
		return nil, err
	}
	for _, f := range old {
		if _, keep := want[f]; !keep {
			stale = append(stale, f)
			if !check {
				if err := os.Remove(f); err != nil {
					return nil, err
				}
			}
		}
	}
	for _, f := range sortedKeys(want) {
		b := want[f]
		cur, err := os.ReadFile(f)
		if err == nil && bytes.Equal(cur, b) {
			continue
		}
		stale = append(stale, f)
		if !check {
			if err := os.WriteFile(f, b, 0o644); err != nil {
				return nil, err
			}
		}
	}
	return stale, nil
}

func sortedKeys(m map[string][]byte) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
