// Command histcheck checks a history of queue operations recorded under
// faults by the cluster tests (docs/cluster.md, Tests):
//
//	histcheck history.jsonl
//
// It prints each broken promise and exits 1 if there is any.
package main

import (
	"fmt"
	"os"

	"github.com/fenecdb/fenec/server/cluster/history"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: histcheck <history.jsonl>")
		os.Exit(2)
	}
	f, err := os.Open(os.Args[1])
	if err != nil {
		fmt.Fprintln(os.Stderr, "histcheck:", err)
		os.Exit(2)
	}
	ops, err := history.Read(f)
	f.Close()
	if err != nil {
		fmt.Fprintln(os.Stderr, "histcheck:", os.Args[1], err)
		os.Exit(2)
	}
	vs := history.Check(ops)
	counts := map[string]int{}
	for _, op := range ops {
		counts[op.Kind+" "+op.Result]++
	}
	fmt.Printf("%d operations: %v\n", len(ops), counts)
	for _, v := range vs {
		fmt.Println("VIOLATION:", v)
	}
	if len(vs) > 0 {
		os.Exit(1)
	}
	fmt.Println("ok: no acknowledged put lost, no job answered to two claims with overlapping leases, no job acked twice")
}
