package main

import (
	"fmt"
	"math"
	"sort"
	"time"
)

// On this machine two full runs of the same code gave one worker's durable
// jobs/s as 20 298 and 9 366: a slow patch of the disk or the host that
// lands on one system's only run moves its figure, and every ratio with
// it, by more than most changes do. So each figure is measured in rounds:
// a throughput cell is several short drives, taken in turn with the other
// systems' drives of the same worker count (network.go), and the cell
// reports their median; a wake figure is several windows, Fenec's and
// Redis's in turn (wake.go), pooled. The rounds' own figures stay in the
// result, so the report shows their spread.

// A round is one drive of a throughput cell, or one window of a wake
// figure: the figures of that round alone.
type round struct {
	JobsPerSec       float64 `json:"jobs_per_s,omitempty"`
	P50              float64 `json:"p50_ms,omitempty"`
	P99              float64 `json:"p99_ms,omitempty"`
	ServerCPU        float64 `json:"server_cpu_us_per_job,omitempty"`
	ServerCPUDrained float64 `json:"server_cpu_us_per_job_drained,omitempty"`
	ClientCPU        float64 `json:"client_cpu_us_per_job,omitempty"`
	Jobs             int     `json:"jobs,omitempty"`
	Seconds          float64 `json:"seconds,omitempty"`
}

// median returns the middle of v, or the mean of the two middle values
// when v has an even count; 0 for none. v is left as it is.
func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := append([]float64(nil), v...)
	sort.Float64s(s)
	m := len(s) / 2
	if len(s)%2 == 1 {
		return s[m]
	}
	return (s[m-1] + s[m]) / 2
}

// minMax returns the least and the greatest of v (0, 0 for none).
func minMax(v []float64) (lo, hi float64) {
	if len(v) == 0 {
		return 0, 0
	}
	lo, hi = v[0], v[0]
	for _, x := range v[1:] {
		lo, hi = math.Min(lo, x), math.Max(hi, x)
	}
	return lo, hi
}

// of returns one field of every round.
func of(rs []round, field func(round) float64) []float64 {
	out := make([]float64, len(rs))
	for i, r := range rs {
		out[i] = field(r)
	}
	return out
}

func jobsPerSec(r round) float64 { return r.JobsPerSec }
func p50Of(r round) float64      { return r.P50 }
func p99Of(r round) float64      { return r.P99 }
func cpuOf(r round) float64      { return r.ServerCPU }
func clientOf(r round) float64   { return r.ClientCPU }

// perJob returns a CPU time per job in µs.
func perJob(cpu time.Duration, jobs int) float64 {
	return float64(cpu.Nanoseconds()) / 1e3 / float64(jobs)
}

// cell turns a cell's drives into its result:
//   - jobs/s, the claim's p50 and its p99: each the median of the drives'
//     own. A slow patch of the host slows one drive; the median of three
//     passes it over, where a pool of the drives' claims would take its
//     slow claims into the p99. A drive holds thousands of claims, so its
//     own p99 is a measured one, not the second largest of a few.
//   - the server's CPU per job: the drives' CPU summed over their jobs
//     summed (a job costs the same CPU in a slow patch or not, and the
//     sum has the ticks of 10 ms /proc counts in the error of one drive);
//     with the fold after only when every drive has it.
//   - the client's CPU per job (this process's), alike: every drive's
//     over all their jobs, when every drive has it.
//   - the share of jobs read lost to another worker (lossy): over all the
//     drives' reads.
func cell(ts []tally, lossy bool) *result {
	if len(ts) == 0 {
		return nil
	}
	var (
		rounds                        []round
		jobs, read                    int
		took, cpu, drained, client    time.Duration
		allCPU, allDrained, allClient = true, true, true
	)
	for _, t := range ts {
		p50, p99 := percentiles(t.claims)
		r := round{P50: p50, P99: p99, Jobs: t.jobs, Seconds: t.took.Seconds()}
		if t.took > 0 {
			r.JobsPerSec = float64(t.jobs) / t.took.Seconds()
		}
		if t.cpu > 0 && t.jobs > 0 {
			r.ServerCPU = perJob(t.cpu, t.jobs)
		} else {
			allCPU = false
		}
		if t.drained > 0 && t.jobs > 0 {
			r.ServerCPUDrained = perJob(t.drained, t.jobs)
		} else {
			allDrained = false
		}
		if t.client > 0 && t.jobs > 0 {
			r.ClientCPU = perJob(t.client, t.jobs)
		} else {
			allClient = false
		}
		rounds = append(rounds, r)
		jobs += t.jobs
		read += t.read
		took += t.took
		cpu += t.cpu
		drained += t.drained
		client += t.client
	}
	res := &result{
		JobsPerSec: median(of(rounds, jobsPerSec)),
		P50:        median(of(rounds, p50Of)),
		P99:        median(of(rounds, p99Of)),
		Note:       fmt.Sprintf("%d jobs in %s of %.1f s in all", jobs, plural(len(ts), "drive"), took.Seconds()),
		Rounds:     rounds,
	}
	if allCPU && jobs > 0 {
		res.ServerCPU = perJob(cpu, jobs)
		if allDrained {
			res.ServerCPUDrained = perJob(drained, jobs)
		}
	}
	if allClient && jobs > 0 {
		res.ClientCPU = perJob(client, jobs)
	}
	if lossy && read > 0 {
		res.Value = 100 * float64(read-jobs) / float64(read)
		res.Unit = "% of jobs read lost to another worker"
	}
	return res
}

// pooled turns a wake figure's windows into its result: p50 and p99 of
// every window's latencies together, and each window's own as a round. A
// window holds a few hundred jobs, so its own p99 is its second or third
// slowest job: the tail is only measured in the pool. Fenec's and Redis's
// windows are taken in turn, so a slow patch of the host lands on both.
func pooled(windows [][]time.Duration) *result {
	var all []time.Duration
	var rounds []round
	for _, w := range windows {
		p50, p99 := percentiles(w)
		rounds = append(rounds, round{P50: p50, P99: p99, Jobs: len(w)})
		all = append(all, w...)
	}
	p50, p99 := percentiles(all)
	return &result{P50: p50, P99: p99, Samples: millis(all), Rounds: rounds}
}

// pairedRatios returns, round by round, a's figure over b's: the rounds of
// a line's systems were taken side by side (the same round's drives one
// after the other), so each ratio is of two figures a minute apart at
// most. nil when the two do not have the same rounds.
func pairedRatios(a, b []round, field func(round) float64) []float64 {
	if len(a) != len(b) || len(a) < 2 {
		return nil
	}
	var out []float64
	for i := range a {
		if x, y := field(a[i]), field(b[i]); x > 0 && y > 0 {
			out = append(out, x/y)
		}
	}
	if len(out) != len(a) {
		return nil
	}
	return out
}

// rotate returns s turned left by k places: the order the systems of a
// group drive in, in round k, so that none always drives first after the
// fills, or always right after another.
func rotate[T any](s []T, k int) []T {
	if len(s) == 0 {
		return nil
	}
	k %= len(s)
	return append(append([]T(nil), s[k:]...), s[:k]...)
}
