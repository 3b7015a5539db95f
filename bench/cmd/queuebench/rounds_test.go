package main

import (
	"math"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestMedian(t *testing.T) {
	for _, c := range []struct {
		in   []float64
		want float64
	}{
		{nil, 0},
		{[]float64{7}, 7},
		{[]float64{9, 1, 5}, 5},
		{[]float64{100, 1, 2}, 2}, // one slow patch (or one quick one) is passed over
		{[]float64{4, 1, 3, 2}, 2.5},
	} {
		in := slices.Clone(c.in)
		if got := median(in); got != c.want {
			t.Errorf("median(%v) = %v, want %v", c.in, got, c.want)
		}
		if !slices.Equal(in, c.in) {
			t.Errorf("median reordered its input: %v, was %v", in, c.in)
		}
	}
	if lo, hi := minMax([]float64{3, -1, 8, 2}); lo != -1 || hi != 8 {
		t.Errorf("minMax = %v, %v, want -1, 8", lo, hi)
	}
	if lo, hi := minMax(nil); lo != 0 || hi != 0 {
		t.Errorf("minMax(nil) = %v, %v", lo, hi)
	}
}

// claimsOf returns n claim latencies of base each, then the last tenth
// of them slow: a drive's p50 is base, its p99 slow.
func claimsOf(n int, base, slow time.Duration) []time.Duration {
	out := make([]time.Duration, n)
	for i := range out {
		out[i] = base
		if i >= n-n/10 {
			out[i] = slow
		}
	}
	return out
}

// TestCellOfDrives checks how a cell is made of its drives: jobs/s and the
// claim's p50 and p99 each the median of the drives' own, so the one slow
// drive moves none of them; the server's CPU summed over the jobs summed,
// not a mean of the drives' figures; the fold's only when every drive has
// one; the lost share over every drive's reads; each drive kept as a
// round.
func TestCellOfDrives(t *testing.T) {
	ms := time.Millisecond
	ts := []tally{
		{jobs: 20000, read: 20000, took: 2 * time.Second, claims: claimsOf(2000, ms/4, 2*ms), cpu: 400 * ms, drained: 500 * ms},
		// The slow patch: half the jobs, claims four times as slow.
		{jobs: 10000, read: 12000, took: 2 * time.Second, claims: claimsOf(1000, ms, 8*ms), cpu: 300 * ms, drained: 350 * ms},
		{jobs: 22000, read: 22000, took: 2 * time.Second, claims: claimsOf(2200, ms/5, 3*ms), cpu: 440 * ms, drained: 520 * ms},
	}
	r := cell(ts, true)
	if r.JobsPerSec != 10000 {
		t.Errorf("jobs/s %v, want the median drive's 10 000", r.JobsPerSec)
	}
	if r.P50 != 0.25 || r.P99 != 3 {
		t.Errorf("p50 %v, p99 %v: want the drives' medians 0.25 and 3", r.P50, r.P99)
	}
	// (400 + 300 + 440) ms over 52 000 jobs; a mean of the drives' own
	// (20, 30, 20) would say 23.3.
	if want := 1140e3 / 52000.0; math.Abs(r.ServerCPU-want) > 1e-9 {
		t.Errorf("server CPU %v µs/job, want %v", r.ServerCPU, want)
	}
	if want := 1370e3 / 52000.0; math.Abs(r.ServerCPUDrained-want) > 1e-9 {
		t.Errorf("with the fold %v µs/job, want %v", r.ServerCPUDrained, want)
	}
	if want := 100 * 2000 / 54000.0; math.Abs(r.Value-want) > 1e-9 {
		t.Errorf("lost %v %%, want %v", r.Value, want)
	}
	if len(r.Rounds) != 3 || r.Rounds[1].JobsPerSec != 5000 || r.Rounds[1].P50 != 1 || r.Rounds[1].ServerCPU != 30 {
		t.Errorf("rounds %+v: the slow drive's own figures are not kept", r.Rounds)
	}
	if lo, hi := minMax(of(r.Rounds, jobsPerSec)); lo != 5000 || hi != 11000 {
		t.Errorf("jobs/s spread %v–%v, want 5 000–11 000", lo, hi)
	}
	// A drive whose fold was not measured leaves the cell without one:
	// the others' alone would be over fewer jobs than the CPU beside it.
	ts[2].drained = 0
	if r := cell(ts, false); r.ServerCPUDrained != 0 || r.ServerCPU == 0 || r.Unit != "" {
		t.Errorf("a drive without its fold: %+v", r)
	}
	if cell(nil, false) != nil {
		t.Error("a cell of no drives is not nil")
	}
}

// TestPooledWindows checks the held figure: p50 and p99 of all windows'
// latencies together (so the p99 rests on every job, not on a window's
// second slowest), each window's own kept as a round.
func TestPooledWindows(t *testing.T) {
	ms := time.Millisecond
	var a, b []time.Duration
	for i := range 100 {
		a = append(a, time.Duration(i+1)*ms/100) // 0.01 … 1.00 ms
		b = append(b, time.Duration(i+1)*ms/10)  // 0.1 … 10 ms
	}
	r := pooled([][]time.Duration{slices.Clone(a), slices.Clone(b)})
	all := append(slices.Clone(a), b...)
	p50, p99 := percentiles(all)
	if r.P50 != p50 || r.P99 != p99 {
		t.Errorf("p50 %v, p99 %v; the pool's are %v, %v", r.P50, r.P99, p50, p99)
	}
	// The 100th of the 200: a's up to 0.91 and b's up to 0.9 (it would
	// be 2.75 as the median of the windows' own, 0.5 and 5).
	if math.Abs(r.P50-0.91) > 1e-9 {
		t.Errorf("p50 %v, want 0.91", r.P50)
	}
	if len(r.Samples) != 200 || !slices.IsSorted(r.Samples) {
		t.Errorf("%d samples, sorted %v: want the 200 of both windows, sorted", len(r.Samples), slices.IsSorted(r.Samples))
	}
	if len(r.Rounds) != 2 || r.Rounds[0].P50 != 0.5 || r.Rounds[1].P50 != 5 || r.Rounds[1].Jobs != 100 {
		t.Errorf("windows %+v", r.Rounds)
	}
}

func TestPairedRatiosAndRotate(t *testing.T) {
	a := []round{{JobsPerSec: 20}, {JobsPerSec: 9}, {JobsPerSec: 30}}
	b := []round{{JobsPerSec: 10}, {JobsPerSec: 10}, {JobsPerSec: 10}}
	if got := pairedRatios(a, b, jobsPerSec); !slices.Equal(got, []float64{2, 0.9, 3}) {
		t.Errorf("paired ratios %v, want [2 0.9 3]", got)
	}
	if got := pairedRatios(a, b[:2], jobsPerSec); got != nil {
		t.Errorf("rounds of different counts were paired: %v", got)
	}
	if got := pairedRatios(a, []round{{JobsPerSec: 1}, {}, {JobsPerSec: 1}}, jobsPerSec); got != nil {
		t.Errorf("a round without the figure was paired: %v", got)
	}
	s := []string{"a", "b", "c"}
	for k, want := range [][]string{{"a", "b", "c"}, {"b", "c", "a"}, {"c", "a", "b"}, {"a", "b", "c"}} {
		if got := rotate(s, k); !slices.Equal(got, want) {
			t.Errorf("rotate(%v, %d) = %v, want %v", s, k, got, want)
		}
	}
	if !slices.Equal(s, []string{"a", "b", "c"}) {
		t.Errorf("rotate changed its input: %v", s)
	}
}

// TestSpreadInReport checks that the table shows each cell's spread
// beside its median, the ratio's over the paired rounds, and that the
// targets say in how many rounds each was met.
func TestSpreadInReport(t *testing.T) {
	fen := &result{JobsPerSec: 30000, P50: 0.24, P99: 0.6, ServerCPU: 11, ServerCPUDrained: 13, Rounds: []round{
		{JobsPerSec: 30000, P50: 0.24, ServerCPU: 10}, {JobsPerSec: 12000, P50: 0.5, ServerCPU: 12}, {JobsPerSec: 31000, P50: 0.2, ServerCPU: 11}}}
	pg := &result{JobsPerSec: 14000, P50: 0.5, P99: 1, ServerCPU: 60, Rounds: []round{
		{JobsPerSec: 14000}, {JobsPerSec: 13000}, {JobsPerSec: 16000}}}
	r := &report{Jobs: 1000, Batch: 10, Duration: "2s", Rounds: 3, Samples: 300, Figures: []figure{
		{Section: secDurable, Name: "1 worker, claim 10, ack each", Durability: "durable", Workers: 1, Method: oneStatement, Fenec: fen, Postgres: pg},
	}}
	r.Targets = targets(r.Figures, 1000)
	md := r.markdown(1)
	for _, want := range []string{
		"**30 000 jobs/s** [12 000–31 000]",
		"p50 0.240 [0.200–0.500], p99 0.600",
		"11.0 [10.0–12.0] µs server CPU/job (13.0 with the fold after)",
		"PostgreSQL 2.14× [0.92–2.14]",
		"**14 000 jobs/s** [13 000–16 000] · p50 0.500, p99 1.00 · 60.0 µs server CPU/job |",
		"the median of 3 drives of 2s",
		"2.14× at 1 (≥ 1×; met in 2 of 3 rounds)",
		"p50 0.240 ms; met in 2 of 3 rounds",
		"13.0 with the fold) at 1 (PostgreSQL 60.0)",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("no %q in:\n%s", want, md)
		}
	}
	if strings.Contains(md, "put → held worker: ") {
		t.Errorf("the method names the held windows of a run without them:\n%s", md)
	}
	for _, tg := range r.Targets {
		if strings.HasPrefix(tg.Aim, "Fenec's server CPU") && tg.Met {
			t.Errorf("CPU target met at 13 µs with the fold: %+v", tg)
		}
		if strings.HasPrefix(tg.Aim, "one worker's claim") && !tg.Met {
			t.Errorf("claim target not met at a median p50 of 0.24 ms: %+v", tg)
		}
	}
}

// TestClientCPU checks the client's CPU per job: like the server's, every
// drive's CPU summed over their jobs summed (not a mean of the drives'
// figures), each drive's own kept as a round, none when a drive lacks it
// (a queue in this process); and the line under a network table, which
// names each system's figure at each worker count with its spread, and is
// left out where no line has one.
func TestClientCPU(t *testing.T) {
	ms := time.Millisecond
	ts := []tally{
		{jobs: 20000, took: 2 * time.Second, claims: claimsOf(10, ms, ms), cpu: 400 * ms, client: 200 * ms},
		{jobs: 5000, took: 2 * time.Second, claims: claimsOf(10, ms, ms), cpu: 150 * ms, client: 100 * ms},
		{jobs: 25000, took: 2 * time.Second, claims: claimsOf(10, ms, ms), cpu: 450 * ms, client: 300 * ms},
	}
	r := cell(ts, false)
	// 600 ms over 50 000 jobs: 12 µs; the drives' own 10, 20 and 12.
	if math.Abs(r.ClientCPU-12) > 1e-9 {
		t.Errorf("client CPU %v µs/job, want 12 (600 ms over 50 000 jobs)", r.ClientCPU)
	}
	if got := of(r.Rounds, clientOf); !slices.Equal(got, []float64{10, 20, 12}) {
		t.Errorf("the drives' client CPU %v, want [10 20 12]", got)
	}
	ts[1].client = 0
	if r := cell(ts, false); r.ClientCPU != 0 {
		t.Errorf("client CPU %v with a drive not measured, want none", r.ClientCPU)
	}

	pg := &result{JobsPerSec: 14000, ClientCPU: 8, Rounds: []round{{JobsPerSec: 14000, ClientCPU: 7}, {JobsPerSec: 13000, ClientCPU: 9}}}
	fen := &result{JobsPerSec: 30000, ClientCPU: 12.5}
	rep := &report{Jobs: 1000, Batch: 10, Duration: "2s", Rounds: 1, Figures: []figure{
		{Section: secProcess, Name: "1 worker, claim in one statement, ack each", Workers: 1, Fenec: &result{JobsPerSec: 100000}},
		{Section: secDurable, Name: "1 worker, claim 10, ack each", Durability: "durable", Workers: 1, Method: oneStatement, Fenec: fen, Postgres: pg},
		{Section: secDurable, Name: "4 workers, claim 10, ack each", Durability: "durable", Workers: 4, Method: oneStatement, Fenec: &result{JobsPerSec: 40000}},
		{Section: secRelaxed, Name: "1 worker, claim 10, ack each", Durability: "relaxed", Workers: 1, Method: oneStatement, Fenec: &result{JobsPerSec: 50000, ClientCPU: 11}},
		{Section: secRelaxed, Name: "1 worker, claim in three round trips (read, compare-and-set, read back), ack each", Durability: "relaxed", Workers: 1, Method: threeStatements, Fenec: &result{JobsPerSec: 9000, ClientCPU: 40}},
	}}
	md := rep.markdown(1)
	durable := md[strings.Index(md, secDurable):strings.Index(md, secRelaxed)]
	line := "1 worker: Fenec 12.5 · PostgreSQL 8.00 [7.00–9.00]."
	if !strings.Contains(durable, "Client CPU/job in µs") || !strings.Contains(durable, line) {
		t.Errorf("no client line %q under the durable table:\n%s", line, durable)
	}
	if strings.Contains(durable, "4 workers:") {
		t.Errorf("the client line names a line without a client figure:\n%s", durable)
	}
	if relaxed := md[strings.Index(md, secRelaxed):]; !strings.Contains(relaxed, "1 worker: Fenec 11.0; 1 worker claiming in three round trips: Fenec 40.0.") {
		t.Errorf("no client line under the relaxed table:\n%s", relaxed)
	}
	if process := md[strings.Index(md, secProcess):strings.Index(md, secDurable)]; strings.Contains(process, "Client CPU") {
		t.Errorf("a client line under a table without client figures:\n%s", process)
	}
	// The line follows its table's last row, before the next heading.
	if i, j := strings.Index(md, "Client CPU/job"), strings.Index(md, "| 4 workers, claim 10"); i < j {
		t.Errorf("the client line comes before its table's rows:\n%s", md)
	}
}
