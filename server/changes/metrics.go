package changes

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the changes' figures (docs/changes.md, Metrics). A nil
// *Metrics counts nothing.
type Metrics struct {
	subscribers prometheus.Gauge
	events      prometheus.Counter
	dropped     prometheus.Counter
	lagPos      *prometheus.Desc
	lagSecs     *prometheus.Desc

	mu  sync.Mutex
	hub *Hub
}

// NewMetrics registers the changes' metrics with r.
func NewMetrics(r prometheus.Registerer) *Metrics {
	m := &Metrics{
		subscribers: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "fenec_changes_subscribers", Help: "Live queries open now.",
		}),
		events: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "fenec_changes_events_total", Help: "Events sent to live queries.",
		}),
		dropped: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "fenec_changes_dropped_total", Help: "Live queries closed for falling behind their buffer.",
		}),
		lagPos: prometheus.NewDesc("fenec_changes_consumer_lag_positions",
			"How many positions a consumer's acknowledged position is behind the newest.", []string{"consumer"}, nil),
		lagSecs: prometheus.NewDesc("fenec_changes_consumer_lag_seconds",
			"How old the oldest change a consumer has not acknowledged is.", []string{"consumer"}, nil),
	}
	r.MustRegister(m.subscribers, m.events, m.dropped, lagCollector{m})
	return m
}

// lagCollector reads the consumers' lag when scraped.
type lagCollector struct{ m *Metrics }

func (c lagCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.m.lagPos
	ch <- c.m.lagSecs
}

func (c lagCollector) Collect(ch chan<- prometheus.Metric) {
	c.m.mu.Lock()
	h := c.m.hub
	c.m.mu.Unlock()
	if h == nil {
		return
	}
	for name, l := range h.lag() {
		ch <- prometheus.MustNewConstMetric(c.m.lagPos, prometheus.GaugeValue, l[0], name)
		ch <- prometheus.MustNewConstMetric(c.m.lagSecs, prometheus.GaugeValue, l[1], name)
	}
}

func (m *Metrics) watch(h *Hub) {
	if m != nil {
		m.mu.Lock()
		m.hub = h
		m.mu.Unlock()
	}
}

func (m *Metrics) setSubscribers(n int) {
	if m != nil {
		m.subscribers.Set(float64(n))
	}
}

func (m *Metrics) sent() {
	if m != nil {
		m.events.Inc()
	}
}

func (m *Metrics) droppedOne() {
	if m != nil {
		m.dropped.Inc()
	}
}
