package main

import (
	"fmt"
	"image/color"
	"os"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

var (
	fenecColor = color.RGBA{R: 230, G: 120, B: 20, A: 255}
	pgColor    = color.RGBA{R: 50, G: 100, B: 200, A: 255}
	redisColor = color.RGBA{R: 200, G: 40, B: 40, A: 255}
	pollColor  = color.RGBA{R: 120, G: 120, B: 120, A: 255}
	dashed     = []vg.Length{vg.Points(6), vg.Points(4)}
)

// chart draws the run's two pictures side by side into a PNG: jobs/s by
// workers for the three systems at both durabilities, and how long a job
// put took to reach a waiting worker, as cumulative distributions. A
// picture the run has no numbers for is left out.
func (r *report) chart(file string) error {
	var plots []*plot.Plot
	if p, err := r.throughputPlot(); err != nil {
		return err
	} else if p != nil {
		plots = append(plots, p)
	}
	if p, err := r.wakePlot(); err != nil {
		return err
	} else if p != nil {
		plots = append(plots, p)
	}
	if len(plots) == 0 {
		return nil
	}
	w, h := vg.Points(560*float64(len(plots))), vg.Points(440)
	img := vgimg.New(w, h)
	dc := draw.New(img)
	tiles := draw.Tiles{Rows: 1, Cols: len(plots), PadX: vg.Points(24), PadTop: vg.Points(8), PadBottom: vg.Points(8), PadLeft: vg.Points(8), PadRight: vg.Points(8)}
	canvases := plot.Align([][]*plot.Plot{plots}, tiles, dc)
	for i, p := range plots {
		p.Draw(canvases[0][i])
	}
	f, err := os.Create(file)
	if err != nil {
		return err
	}
	if _, err := (vgimg.PngCanvas{Canvas: img}).WriteTo(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// throughputPlot: a line a system and durability, jobs/s against workers
// (on a log scale: 1, 2, 4, 16).
func (r *report) throughputPlot() (*plot.Plot, error) {
	p := plot.New()
	p.Title.Text = "Claim 10, ack each: jobs/s by workers"
	if r.Rounds > 1 {
		p.Title.Text = fmt.Sprintf("Claim 10, ack each: jobs/s by workers\n(median of %d drives of %s; bars: lowest to highest drive)", r.Rounds, r.Duration)
	}
	p.X.Label.Text = "workers"
	p.Y.Label.Text = "jobs/s (solid: durable, dashed: relaxed)"
	p.Legend.Top, p.Legend.Left = true, true
	var ticks plot.ConstantTicks
	seen := map[int]bool{}
	lines := 0
	for _, d := range durabilities {
		for k, sys := range []struct {
			name string
			c    color.Color
			get  func(figure) *result
		}{
			{"Fenec", fenecColor, func(f figure) *result { return f.Fenec }},
			{"PostgreSQL", pgColor, func(f figure) *result { return f.Postgres }},
			{"Redis", redisColor, func(f figure) *result { return f.Redis }},
		} {
			// Each system's points a little aside of the worker count
			// (the axis is a log scale), so their bars do not overlap.
			aside := 1 + 0.04*float64(k-1)
			var xys plotter.XYs
			var bars rangeBars
			for _, f := range r.Figures {
				if f.Durability != d.name || f.Method != oneStatement || sys.get(f) == nil {
					continue
				}
				res := sys.get(f)
				xys = append(xys, plotter.XY{X: float64(f.Workers) * aside, Y: res.JobsPerSec})
				if len(res.Rounds) > 1 {
					lo, hi := minMax(of(res.Rounds, jobsPerSec))
					bars = append(bars, rangeBar{x: float64(f.Workers) * aside, y: res.JobsPerSec, lo: lo, hi: hi})
				}
				if !seen[f.Workers] {
					seen[f.Workers] = true
					ticks = append(ticks, plot.Tick{Value: float64(f.Workers), Label: fmt.Sprint(f.Workers)})
				}
			}
			if len(xys) == 0 {
				continue
			}
			l, s, err := plotter.NewLinePoints(xys)
			if err != nil {
				return nil, err
			}
			l.Color, s.Color = sys.c, sys.c
			if d.name != "durable" {
				l.Dashes = dashed
			}
			p.Add(l, s)
			if len(bars) > 0 {
				eb, err := plotter.NewYErrorBars(bars)
				if err != nil {
					return nil, err
				}
				eb.Color = sys.c
				p.Add(eb)
			}
			p.Legend.Add(sys.name+", "+d.name, l, s)
			lines++
		}
	}
	if lines == 0 {
		return nil, nil
	}
	p.X.Scale, p.X.Tick.Marker = plot.LogScale{}, ticks
	spread(&p.X)
	// Room above the lines for the legend.
	p.Y.Min, p.Y.Max = 0, p.Y.Max*1.4
	return p, nil
}

// wakePlot: the share of jobs that reached a waiting worker within a
// time, for each way of waiting, the time on a log scale.
func (r *report) wakePlot() (*plot.Plot, error) {
	p := plot.New()
	p.Title.Text = "put → waiting worker"
	if r.Rounds > 1 {
		p.Title.Text = fmt.Sprintf("put → waiting worker\n(held: %d windows of %d jobs a system, pooled)", r.Rounds, r.Samples)
	}
	p.X.Label.Text = "ms from the put (log scale)"
	p.Y.Label.Text = "share of jobs"
	p.Legend.Top, p.Legend.Left = true, true
	lines := 0
	for _, f := range r.Figures {
		if f.Section != secWait {
			continue
		}
		for _, sys := range []struct {
			name   string
			c      color.Color
			dashes []vg.Length
			r      *result
		}{
			{"Fenec", fenecColor, nil, f.Fenec},
			{"Redis", redisColor, nil, f.Redis},
		} {
			if sys.r == nil || len(sys.r.Samples) == 0 {
				continue
			}
			name, c, dashes := "Fenec-Wait", sys.c, sys.dashes
			switch {
			case sys.name == "Redis":
				name = "Redis BLPOP"
			case strings.Contains(f.Name, "10 ms"):
				name, c = "Fenec, polling every 10 ms", pollColor
			case strings.Contains(f.Name, "100 ms"):
				name, c, dashes = "Fenec, polling every 100 ms", pollColor, dashed
			}
			xys := make(plotter.XYs, len(sys.r.Samples))
			for i, v := range sys.r.Samples {
				// A log scale has no zero; no wake is quicker than a µs.
				xys[i] = plotter.XY{X: max(v, 0.001), Y: float64(i+1) / float64(len(sys.r.Samples))}
			}
			l, err := plotter.NewLine(xys)
			if err != nil {
				return nil, err
			}
			l.Color, l.Dashes, l.Width = c, dashes, vg.Points(1.5)
			p.Add(l)
			p.Legend.Add(name, l)
			lines++
		}
	}
	if lines == 0 {
		return nil, nil
	}
	p.X.Scale, p.X.Tick.Marker = plot.LogScale{}, plot.LogTicks{Prec: -1}
	spread(&p.X)
	// Room above the curves for the legend.
	p.Y.Min, p.Y.Max = 0, 1.35
	p.Y.Tick.Marker = plot.ConstantTicks{{Value: 0, Label: "0"}, {Value: 0.5, Label: "0.5"}, {Value: 1, Label: "1"}}
	return p, nil
}

// A rangeBar is a median and the spread of its rounds, for an error bar.
type rangeBar struct{ x, y, lo, hi float64 }

// rangeBars are error bars from a point's lowest to its highest round.
type rangeBars []rangeBar

func (b rangeBars) Len() int                    { return len(b) }
func (b rangeBars) XY(i int) (float64, float64) { return b[i].x, b[i].y }

// YError returns the distances below and above the point.
func (b rangeBars) YError(i int) (float64, float64) { return b[i].y - b[i].lo, b[i].hi - b[i].y }

// spread widens a log axis that holds one value (a run of one worker
// count, or samples all alike) to a factor of two either side: the plot
// would otherwise widen it by one either side, to zero or below, which a
// log scale cannot show.
func spread(a *plot.Axis) {
	if a.Min >= a.Max {
		a.Min, a.Max = a.Min/2, a.Max*2
	}
}
