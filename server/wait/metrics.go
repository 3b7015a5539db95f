package wait

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the held claims' figures. A nil *Metrics counts nothing.
type Metrics struct {
	held   prometheus.Gauge
	looks  prometheus.Counter
	wakes  *prometheus.CounterVec
	heldOf prometheus.Histogram
	// The wakes' counters by cause, looked up once: a put that wakes a
	// held claim counts one on its way to the claim, and a lookup by
	// label costs a hash and a lock.
	wokeByWrite, wokeByTime prometheus.Counter
}

// NewMetrics registers the held-claim metrics with r.
func NewMetrics(r prometheus.Registerer) *Metrics {
	m := &Metrics{
		held: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "fenec_held_claims", Help: "Claims held at the server by Fenec-Wait now.",
		}),
		looks: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "fenec_held_looks_total", Help: "Looks by the heads of held-claim lines.",
		}),
		wakes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "fenec_held_wakeups_total", Help: "Times held claims were woken, by cause (write, time).",
		}, []string{"cause"}),
		heldOf: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "fenec_held_seconds", Help: "How long claims were held.",
			Buckets: []float64{.001, .005, .01, .05, .1, .5, 1, 5, 10, 30},
		}),
	}
	m.wokeByWrite, m.wokeByTime = m.wakes.WithLabelValues("write"), m.wakes.WithLabelValues("time")
	r.MustRegister(m.held, m.looks, m.wakes, m.heldOf)
	return m
}

func (m *Metrics) setHeld(n int) {
	if m != nil {
		m.held.Set(float64(n))
	}
}

func (m *Metrics) looked(n int) {
	if m != nil {
		m.looks.Add(float64(n))
	}
}

// wokeBy counts a wake of held claims, by a write or by the time.
func (m *Metrics) wokeBy(write bool) {
	switch {
	case m == nil:
	case write:
		m.wokeByWrite.Inc()
	default:
		m.wokeByTime.Inc()
	}
}

func (m *Metrics) heldFor(d time.Duration) {
	if m != nil {
		m.heldOf.Observe(d.Seconds())
	}
}
