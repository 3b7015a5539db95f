package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"time"
)

// report is a run: where and when it ran, with what, and its figures.
type report struct {
	Date     string            `json:"date"`
	Machine  machine           `json:"machine"`
	Versions map[string]string `json:"versions"`
	Jobs     int               `json:"jobs"`
	Duration string            `json:"duration_per_drive"`
	Rounds   int               `json:"rounds"`
	Samples  int               `json:"samples_per_window"`
	Batch    int               `json:"batch"`
	Note     string            `json:"note,omitempty"`
	Figures  []figure          `json:"figures"`
	Targets  []target          `json:"targets"`
}

type machine struct {
	CPU       string  `json:"cpu"`
	Cores     int     `json:"cores"`
	MemoryGiB float64 `json:"memory_gib"`
	OS        string  `json:"os"`
}

// A target is one of the queue's performance aims (docs/benchmarks.md,
// "Targets"), and where the run stands on it.
type target struct {
	Aim   string `json:"aim"`
	Stand string `json:"stand"`
	Met   bool   `json:"met"`
}

func newReport(cfg config) *report {
	r := &report{
		Date:     time.Now().UTC().Format("2006-01-02 15:04 UTC"),
		Machine:  machine{CPU: cpuModel(), Cores: runtime.NumCPU(), MemoryGiB: memGiB(), OS: osName()},
		Versions: map[string]string{"fenec": fenecVersion(), "go": runtime.Version()},
		Jobs:     cfg.jobs,
		Duration: cfg.duration.String(),
		Rounds:   cfg.rounds,
		Samples:  cfg.samples,
		Batch:    batchSize,
		Note:     cfg.note,
	}
	// The peers' clients, as this binary was built with them.
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, d := range bi.Deps {
			switch d.Path {
			case "github.com/jackc/pgx/v5":
				r.Versions["pgx"] = d.Version
			case "github.com/redis/go-redis/v9":
				r.Versions["go-redis"] = d.Version
			}
		}
	}
	return r
}

// markdown writes the report with its title at heading level h.
func (r *report) markdown(h int) string {
	var b strings.Builder
	hd := strings.Repeat("#", h)
	fmt.Fprintf(&b, "%s Queue benchmark\n\n", hd)
	fmt.Fprintf(&b, "%s, on %s: %d cores, %.0f GiB, %s.  \n", r.Date, r.Machine.CPU, r.Machine.Cores, r.Machine.MemoryGiB, r.Machine.OS)
	fmt.Fprintf(&b, "%s jobs in each queue; claims of %d.  \n", count(r.Jobs), r.Batch)
	b.WriteString(r.method())
	var vs []string
	for _, k := range []string{"fenec", "go", "postgresql", "pgx", "redis", "go-redis"} {
		if v := r.Versions[k]; v != "" {
			vs = append(vs, k+" "+v)
		}
	}
	fmt.Fprintf(&b, "Versions: %s.\n", strings.Join(vs, "; "))
	if r.Note != "" {
		fmt.Fprintf(&b, "\n**%s**\n", r.Note)
	}
	b.WriteString("\nFenec/peer: Fenec's number over the peer's — of jobs/s where the line has them (above 1: Fenec does more), else of the p50 (below 1: Fenec is quicker). Latencies are in ms.\n")
	section := ""
	var in []figure // the section's figures so far
	for _, f := range r.Figures {
		if f.Section != section {
			b.WriteString(clientLine(in))
			section, in = f.Section, nil
			fmt.Fprintf(&b, "\n%s# %s\n\n| figure | Fenec | PostgreSQL | Redis | Fenec/peer |\n| --- | --- | --- | --- | --- |\n", hd, section)
		}
		in = append(in, f)
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s |\n", f.Name, f.Fenec.cell(), f.Postgres.cell(), f.Redis.cell(), f.ratio())
	}
	b.WriteString(clientLine(in))
	if len(r.Targets) > 0 {
		fmt.Fprintf(&b, "\n%s# Targets\n\n", hd)
		for _, t := range r.Targets {
			mark := "not met"
			if t.Met {
				mark = "met"
			}
			fmt.Fprintf(&b, "- %s — **%s**: %s\n", t.Aim, mark, t.Stand)
		}
	}
	return b.String()
}

// clientLine writes, under a table of runs over the network, the client's
// CPU per job of each system at each line that has it (result.ClientCPU):
// the benchmark's own process, which drives the workers on the same cores
// as the servers, so a server's jobs/s is bounded by its clients' cost
// too. "" when no line has it.
func clientLine(figs []figure) string {
	var lines []string
	for _, f := range figs {
		var parts []string
		for _, p := range f.systems() {
			if p.r != nil && p.r.ClientCPU > 0 {
				parts = append(parts, p.name+" "+num(p.r.ClientCPU)+between(of(p.r.Rounds, clientOf), num))
			}
		}
		if len(parts) > 0 {
			name, _, _ := strings.Cut(f.Name, ",")
			switch f.Method {
			case threeStatements:
				name += " claiming in three round trips"
			case overTLS:
				name += " over https"
			}
			lines = append(lines, name+": "+strings.Join(parts, " · "))
		}
	}
	if len(lines) == 0 {
		return ""
	}
	return "\nClient CPU/job in µs (this benchmark's own process over the same drives: its workers' clients, Fenec's net/http and encoding/json, pgx, go-redis, on the same cores as the servers): " +
		strings.Join(lines, "; ") + ".\n"
}

// method says what each number of the run is: how many drives of how
// long a throughput cell is, how they are reduced to one, and what the
// bracketed spreads are.
func (r *report) method() string {
	var throughput, held bool
	for _, f := range r.Figures {
		throughput = throughput || (f.Fenec != nil && f.Fenec.JobsPerSec > 0)
		held = held || (f.Section == secWait && strings.Contains(f.Name, "Fenec-Wait"))
	}
	var b strings.Builder
	switch {
	case throughput && r.Rounds == 1:
		fmt.Fprintf(&b, "Each throughput figure is one drive of %s (or until the queue is empty), the queue refilled to its size and settled before it. ", r.Duration)
	case throughput:
		fmt.Fprintf(&b, "Each throughput figure is the median of %s of %s each (or until the queue is empty), and so are the claim's p50 and p99 (the median of the drives' own); "+
			"server CPU/job is the CPU of all %d drives over all their jobs. Before each drive the queue is refilled to its size and settled, and every server is quiet. "+
			"The systems take turns: in each round every system drives once at a worker count before the next count, so the drives of a line's systems are a minute apart at most. ",
			plural(r.Rounds, "drive"), r.Duration, r.Rounds)
	}
	if held {
		fmt.Fprintf(&b, "put → held worker: %s of %d jobs for each system, Fenec's and Redis's in turn, p50 and p99 of all %d. ",
			plural(r.Rounds, "window"), r.Samples, r.Rounds*r.Samples)
	}
	if r.Rounds > 1 && (throughput || held) {
		b.WriteString("[lo–hi]: the lowest and highest of the drives (of the windows for put → held, of the rounds' own ratios in the Fenec/peer column).")
	}
	if b.Len() == 0 {
		return ""
	}
	return strings.TrimSpace(b.String()) + "  \n"
}

// between writes a spread as [lo–hi], or "" for fewer than two values or
// any not measured (0).
func between(v []float64, write func(float64) string) string {
	if len(v) < 2 || slices.Contains(v, 0) {
		return ""
	}
	lo, hi := minMax(v)
	return " [" + write(lo) + "–" + write(hi) + "]"
}

func jobsCount(v float64) string { return count(int(math.Round(v))) }

// cell writes a result for the table, with the spread of its rounds; a
// system that did not run the figure is a dash.
func (r *result) cell() string {
	if r == nil {
		return "—"
	}
	var parts []string
	if r.JobsPerSec > 0 {
		parts = append(parts, "**"+count(int(math.Round(r.JobsPerSec)))+" jobs/s**"+between(of(r.Rounds, jobsPerSec), jobsCount))
	}
	if r.P50 > 0 || r.P99 > 0 {
		parts = append(parts, fmt.Sprintf("p50 %s%s, p99 %s", num(r.P50), between(of(r.Rounds, p50Of), num), num(r.P99)))
	}
	if r.ServerCPU > 0 {
		cpu := num(r.ServerCPU) + between(of(r.Rounds, cpuOf), num) + " µs server CPU/job"
		if r.ServerCPUDrained > 0 {
			cpu += " (" + num(r.ServerCPUDrained) + " with the fold after)"
		}
		parts = append(parts, cpu)
	}
	if r.Unit != "" {
		v := num(r.Value)
		// Counts (rows read, jobs taken early) whole; rates as measured.
		if r.Value == math.Trunc(r.Value) && !strings.Contains(r.Unit, "/") {
			v = count(int(r.Value))
		}
		parts = append(parts, v+" "+r.Unit)
	}
	// A throughput line's note is only its job count: kept in the JSON.
	if r.Note != "" && r.JobsPerSec == 0 {
		parts = append(parts, r.Note)
	}
	return strings.Join(parts, " · ")
}

// system is one system's result in a figure, under its name.
type system struct {
	name string
	r    *result
}

// systems returns f's results by system: Fenec's first, then its peers'.
func (f figure) systems() []system {
	return []system{{"Fenec", f.Fenec}, {"PostgreSQL", f.Postgres}, {"Redis", f.Redis}}
}

// ratio writes Fenec's number over each peer's.
func (f figure) ratio() string {
	if f.Fenec == nil {
		return ""
	}
	var parts []string
	for _, p := range f.systems()[1:] {
		switch {
		case p.r == nil:
		case f.Fenec.JobsPerSec > 0 && p.r.JobsPerSec > 0:
			parts = append(parts, fmt.Sprintf("%s %.2f×%s", p.name, f.Fenec.JobsPerSec/p.r.JobsPerSec,
				between(pairedRatios(f.Fenec.Rounds, p.r.Rounds, jobsPerSec), ratioText)))
		case f.Fenec.P50 > 0 && p.r.P50 > 0:
			parts = append(parts, fmt.Sprintf("%s %.2f× (p50)%s", p.name, f.Fenec.P50/p.r.P50,
				between(pairedRatios(f.Fenec.Rounds, p.r.Rounds, p50Of), ratioText)))
		}
	}
	return strings.Join(parts, " · ")
}

func ratioText(v float64) string { return fmt.Sprintf("%.2f", v) }

// num writes a number to three significant digits, without an exponent.
func num(v float64) string {
	if v == 0 {
		return "0"
	}
	digits := max(0, 2-int(math.Floor(math.Log10(math.Abs(v)))))
	return strconv.FormatFloat(v, 'f', digits, 64)
}

// targets says where the run stands on the queue's performance targets
// (docs/benchmarks.md, "Targets"), from the cells'
// medians (and the pool of the held figure), each with how many rounds
// met it alone: a target met by the median but not in every round is one
// the noise can still move.
//   - jobs/s at least PostgreSQL's at 1 and 2 workers and twice it at 4
//     and more, durable and relaxed;
//   - jobs/s at least half Redis's, durable, at the most workers;
//   - the server's CPU at most 12 µs a job, with the fold after where it
//     was measured, at every worker count, durable and relaxed;
//   - one worker's durable claim at most 0.25 ms at p50;
//   - put → held worker at most 0.3 ms at p50 and 1 ms at p99;
//   - a claim as cheap over n jobs as over 1 000.
func targets(figs []figure, n int) []target {
	var ts []target
	network := func(d durability, fn func(f figure)) {
		for _, f := range figs {
			if f.Durability == d.name && f.Method == oneStatement && f.Fenec != nil {
				fn(f)
			}
		}
	}
	for _, d := range durabilities {
		var each []string
		met, seen := true, false
		network(d, func(f figure) {
			if f.Postgres == nil || f.Postgres.JobsPerSec == 0 {
				return
			}
			want := 1.0
			if f.Workers >= 4 {
				want = 2
			}
			ratio := f.Fenec.JobsPerSec / f.Postgres.JobsPerSec
			seen, met = true, met && ratio >= want
			each = append(each, fmt.Sprintf("%.2f× at %d (≥ %g×%s)", ratio, f.Workers, want,
				inRounds(pairedRatios(f.Fenec.Rounds, f.Postgres.Rounds, jobsPerSec), func(v float64) bool { return v >= want })))
		})
		if seen {
			ts = append(ts, target{Aim: "Fenec's jobs/s ≥ 1× PostgreSQL's at 1 and 2 workers, ≥ 2× at 4 and more, " + d.name,
				Stand: "by workers: " + strings.Join(each, ", "), Met: met})
		}
	}
	var most *figure
	network(durabilities[0], func(f figure) {
		if f.Redis != nil && f.Redis.JobsPerSec > 0 && (most == nil || f.Workers > most.Workers) {
			most = &f
		}
	})
	if most != nil {
		ratio := most.Fenec.JobsPerSec / most.Redis.JobsPerSec
		ts = append(ts, target{Aim: fmt.Sprintf("Fenec's jobs/s ≥ 0.5× Redis's, durable, at %d workers", most.Workers),
			Stand: fmt.Sprintf("%s against %s jobs/s, %.2f×%s", count(int(math.Round(most.Fenec.JobsPerSec))), count(int(math.Round(most.Redis.JobsPerSec))), ratio,
				inRounds(pairedRatios(most.Fenec.Rounds, most.Redis.Rounds, jobsPerSec), func(v float64) bool { return v >= 0.5 })),
			Met: ratio >= 0.5})
	}
	// The server's CPU per job (claim 10 + a /batch ack, over HTTP), with
	// the fold of the run's log after it where that was measured.
	for _, d := range durabilities {
		var each []string
		worst := 0.0
		network(d, func(f figure) {
			if f.Fenec.ServerCPU == 0 {
				return
			}
			cpu, line := f.Fenec.ServerCPU, num(f.Fenec.ServerCPU)
			if f.Fenec.ServerCPUDrained > 0 {
				cpu = f.Fenec.ServerCPUDrained
				line += " (" + num(cpu) + " with the fold)"
			}
			worst = max(worst, cpu)
			line += fmt.Sprintf(" at %d", f.Workers)
			var peers []string
			if f.Postgres != nil && f.Postgres.ServerCPU > 0 {
				peers = append(peers, "PostgreSQL "+num(f.Postgres.ServerCPU))
			}
			if f.Redis != nil && f.Redis.ServerCPU > 0 {
				peers = append(peers, "Redis "+num(f.Redis.ServerCPU))
			}
			if len(peers) > 0 {
				line += " (" + strings.Join(peers, ", ") + ")"
			}
			each = append(each, line)
		})
		if worst > 0 {
			ts = append(ts, target{Aim: "Fenec's server CPU ≤ 12 µs a job with the fold counted, " + d.name,
				Stand: "µs a job by workers: " + strings.Join(each, "; "), Met: worst <= 12})
		}
	}
	network(durabilities[0], func(f figure) {
		if f.Workers != 1 || f.Fenec.P50 == 0 {
			return
		}
		ts = append(ts, target{Aim: "one worker's claim p50 ≤ 0.25 ms, durable",
			Stand: fmt.Sprintf("p50 %s ms%s", num(f.Fenec.P50), inRounds(of(f.Fenec.Rounds, p50Of), func(v float64) bool { return v <= 0.25 })),
			Met:   f.Fenec.P50 <= 0.25})
	})
	for _, f := range figs {
		if f.Section == secWait && f.Fenec != nil && strings.Contains(f.Name, "Fenec-Wait") {
			stand := fmt.Sprintf("p50 %s ms, p99 %s ms of %s jobs%s", num(f.Fenec.P50), num(f.Fenec.P99), count(len(f.Fenec.Samples)),
				inRounds(of(f.Fenec.Rounds, p50Of), func(v float64) bool { return v <= 0.3 }))
			if f.Redis != nil {
				stand += fmt.Sprintf("; Redis BLPOP p50 %s, p99 %s", num(f.Redis.P50), num(f.Redis.P99))
			}
			ts = append(ts, target{Aim: "put → held worker p50 ≤ 0.3 ms, p99 ≤ 1 ms", Stand: stand,
				Met: f.Fenec.P50 <= 0.3 && f.Fenec.P99 <= 1})
		}
	}
	var small, large *result
	for _, f := range figs {
		switch f.Name {
		case "claim of 10, @sorted run_at, 1 000 ready jobs":
			small = f.Fenec
		case fmt.Sprintf("claim of 10, @sorted run_at, %s ready jobs", count(n)):
			large = f.Fenec
		}
	}
	if small != nil && large != nil && n != 1000 {
		// "The same" allows the index's extra levels: within half again.
		ts = append(ts, target{Aim: fmt.Sprintf("a claim's cost the same at 1 000 and %s jobs (p50 within 1.5×)", count(n)),
			Stand: fmt.Sprintf("p50 %s ms against %s ms (%.2f×), p99 %s against %s, %s against %s rows read",
				num(large.P50), num(small.P50), large.P50/small.P50, num(large.P99), num(small.P99), count(int(large.Value)), count(int(small.Value))),
			Met: large.P50 <= 1.5*small.P50 && large.Value == small.Value})
	}
	return ts
}

// inRounds writes how many of a figure's rounds meet a target alone, as
// "; met in 2 of 3 rounds", or "" for fewer than two rounds.
func inRounds(v []float64, ok func(float64) bool) string {
	if len(v) < 2 {
		return ""
	}
	k := 0
	for _, x := range v {
		if ok(x) {
			k++
		}
	}
	return fmt.Sprintf("; met in %d of %d rounds", k, len(v))
}

// write writes queue.md, queue.json and queue.png into dir.
func (r *report) write(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "queue.md"), []byte(r.markdown(1)), 0o644); err != nil {
		return err
	}
	j, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "queue.json"), append(j, '\n'), 0o644); err != nil {
		return err
	}
	return r.chart(filepath.Join(dir, "queue.png"))
}

// The markers in docs/benchmarks.md between which the latest table goes.
const (
	docsBegin = "<!-- queue-bench:begin -->"
	docsEnd   = "<!-- queue-bench:end -->"
)

// updateDocs puts the report between the markers of a markdown file, its
// title a level under the page's.
func (r *report) updateDocs(file string) error {
	b, err := os.ReadFile(file)
	if err != nil {
		return err
	}
	s := string(b)
	i, j := strings.Index(s, docsBegin), strings.Index(s, docsEnd)
	if i < 0 || j < i {
		return fmt.Errorf("%s has no %s … %s", file, docsBegin, docsEnd)
	}
	s = s[:i+len(docsBegin)] + "\n" + r.markdown(3) + s[j:]
	return os.WriteFile(file, []byte(s), 0o644)
}

// cpuModel returns the first "model name" of /proc/cpuinfo.
func cpuModel() string {
	f, err := os.Open("/proc/cpuinfo")
	if err != nil {
		return runtime.GOARCH
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if k, v, ok := strings.Cut(sc.Text(), ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return runtime.GOARCH
}

// memGiB returns MemTotal from /proc/meminfo.
func memGiB() float64 {
	b, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "MemTotal:"); ok {
			kb, _ := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 64)
			return kb / (1 << 20)
		}
	}
	return 0
}

// osName returns PRETTY_NAME from /etc/os-release.
func osName() string {
	b, err := os.ReadFile("/etc/os-release")
	if err != nil {
		return runtime.GOOS
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "PRETTY_NAME="); ok {
			return strings.Trim(v, `"`)
		}
	}
	return runtime.GOOS
}

// fenecVersion returns the repository's commit, as git describes it.
func fenecVersion() string {
	out, err := exec.Command("git", "describe", "--always", "--dirty").Output()
	if err != nil {
		return "unknown"
	}
	return strings.TrimSpace(string(out))
}
