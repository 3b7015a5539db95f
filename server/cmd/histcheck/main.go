// Command histcheck checks histories of queue operations recorded under
// faults by the cluster tests (docs/cluster.md, Tests):
//
//	histcheck <history.jsonl | directory> ...
//
// A directory stands for every *.jsonl file in it; each file is one
// history, checked on its own. It prints each broken promise and exits 1
// if there is any.
package main

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"

	"github.com/fenecdb/fenec/server/cluster/history"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: histcheck <history.jsonl | directory> ...")
		os.Exit(2)
	}
	var files []string
	for _, arg := range os.Args[1:] {
		fi, err := os.Stat(arg)
		if err != nil {
			fmt.Fprintln(os.Stderr, "histcheck:", err)
			os.Exit(2)
		}
		if !fi.IsDir() {
			files = append(files, arg)
			continue
		}
		m, err := filepath.Glob(filepath.Join(arg, "*.jsonl"))
		if err != nil || len(m) == 0 {
			fmt.Fprintf(os.Stderr, "histcheck: %s holds no history (*.jsonl)\n", arg)
			os.Exit(2)
		}
		sort.Strings(m)
		files = append(files, m...)
	}
	broken := false
	for _, file := range files {
		broken = check(file) || broken
	}
	if broken {
		os.Exit(1)
	}
}

// check checks one history file and returns whether it breaks a promise.
func check(file string) bool {
	f, err := os.Open(file)
	if err != nil {
		fmt.Fprintln(os.Stderr, "histcheck:", err)
		os.Exit(2)
	}
	ops, err := history.Read(f)
	f.Close()
	if err != nil {
		fmt.Fprintln(os.Stderr, "histcheck:", file, err)
		os.Exit(2)
	}
	vs := history.Check(ops)
	counts := map[string]int{}
	for _, op := range ops {
		counts[op.Kind+" "+op.Result]++
	}
	fmt.Printf("%s: %d operations: %v\n", file, len(ops), counts)
	for _, v := range vs {
		fmt.Println("VIOLATION:", v)
	}
	if len(vs) > 0 {
		return true
	}
	fmt.Println("ok: no acknowledged put lost, no job answered to two claims with overlapping leases, no job acked twice")
	return false
}
