// Command queuebench measures the figures of the queue page (docs/queues.md)
// against a real `fenec serve`, and prints them as a table: how soon a job
// put reaches a worker held by Fenec-Wait, against workers that poll; how
// late a delayed job is taken; and how long an order takes to reach the
// nearest of many held couriers, with the server's CPU for each.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"sort"
	"strings"
	"time"
)

// figure is one measured line of the table.
type figure struct {
	Name  string  `json:"name"`
	P50   float64 `json:"p50_ms,omitempty"`
	P99   float64 `json:"p99_ms,omitempty"`
	Value float64 `json:"value,omitempty"`
	Unit  string  `json:"unit,omitempty"`
	Note  string  `json:"note,omitempty"`
}

func main() {
	bin := flag.String("fenec", "bin/fenec", "the fenec `binary` to benchmark")
	only := flag.String("only", "wake,delayed,idle,couriers", "comma-separated `parts` to run: wake, delayed, idle, couriers")
	samples := flag.Int("samples", 300, "jobs put per wake measurement")
	out := flag.String("json", "", "also write the figures to this JSON `file`")
	flag.Parse()
	var figs []figure
	for _, part := range strings.Split(*only, ",") {
		var fs []figure
		var err error
		switch strings.TrimSpace(part) {
		case "wake":
			fs, err = wake(*bin, *samples)
		case "delayed":
			fs, err = delayed(*bin, *samples/3)
		case "idle":
			fs, err = idle(*bin, 1000)
		case "couriers":
			fs, err = couriers(*bin, []int{10, 100, 1000}, 100)
		default:
			err = fmt.Errorf("unknown part %q", part)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "queuebench:", err)
			os.Exit(1)
		}
		figs = append(figs, fs...)
	}
	fmt.Println("| figure | p50 ms | p99 ms | value | note |")
	fmt.Println("| --- | --- | --- | --- | --- |")
	for _, f := range figs {
		val := ""
		if f.Unit != "" {
			val = fmt.Sprintf("%.3g %s", f.Value, f.Unit)
		}
		fmt.Printf("| %s | %s | %s | %s | %s |\n", f.Name, ms(f.P50), ms(f.P99), val, f.Note)
	}
	if *out != "" {
		b, _ := json.MarshalIndent(figs, "", "  ")
		if err := os.WriteFile(*out, append(b, '\n'), 0o644); err != nil {
			fmt.Fprintln(os.Stderr, "queuebench:", err)
			os.Exit(1)
		}
	}
}

func ms(v float64) string {
	if v == 0 {
		return ""
	}
	return fmt.Sprintf("%.3f", v)
}

// percentiles answers the median and 99th percentile in milliseconds.
func percentiles(d []time.Duration) (p50, p99 float64) {
	if len(d) == 0 {
		return 0, 0
	}
	sort.Slice(d, func(i, j int) bool { return d[i] < d[j] })
	at := func(q float64) float64 {
		return float64(d[int(q*float64(len(d)-1))]) / float64(time.Millisecond)
	}
	return at(0.5), at(0.99)
}
