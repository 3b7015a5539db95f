package httpapi

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/fenecdb/fenec/server/engine"
	"github.com/fenecdb/fenec/server/fenecql"
)

// queueCollector reports each queue's jobs by state and the age of its
// oldest ready job, as they are at the scrape (docs/queues.md). The
// engine keeps the counts beside the queue's indexes, so a scrape costs
// microseconds at a million jobs (engine.BenchmarkQueues), and nothing is
// cached between scrapes.
type queueCollector struct{ db *engine.DB }

var (
	queueJobsDesc = prometheus.NewDesc("fenec_queue_jobs",
		"Jobs of each queue (a collection with a run_at timestamp) by state: ready (run_at <= now), leased (run_at ahead, owner set), delayed (run_at ahead, no owner), dead (no run_at, an error), kept (no run_at, no error).",
		[]string{"queue", "state"}, nil)
	queueAgeDesc = prometheus.NewDesc("fenec_queue_oldest_ready_age_seconds",
		"How long the oldest ready job of each queue has been ready: now less its run_at; 0 when none is ready.",
		[]string{"queue"}, nil)
)

func (c queueCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- queueJobsDesc
	ch <- queueAgeDesc
}

func (c queueCollector) Collect(ch chan<- prometheus.Metric) {
	now := c.db.Clock().NowMS()
	for _, q := range c.db.Queues() {
		for _, s := range []struct {
			state string
			n     int
		}{{"ready", q.Ready}, {"leased", q.Leased}, {"delayed", q.Delayed}, {"dead", q.Dead}, {"kept", q.Kept}} {
			ch <- prometheus.MustNewConstMetric(queueJobsDesc, prometheus.GaugeValue, float64(s.n), q.Name, s.state)
		}
		age := 0.0
		if q.Ready > 0 {
			age = float64(max(now-q.OldestReadyMS, 0)) / 1000
		}
		ch <- prometheus.MustNewConstMetric(queueAgeDesc, prometheus.GaugeValue, age, q.Name)
	}
}

// queueRates counts the jobs claimed and acked in each queue, for the
// console's rates: a claim is a set that picks its rows with order or
// limit (engine.Kind), an ack any del (docs/queues.md acks by deleting).
type queueRates struct {
	claimed, acked *prometheus.CounterVec
}

func newQueueRates() queueRates {
	return queueRates{
		claimed: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "fenec_queue_claimed_total",
			Help: "Jobs taken by claims (a set with order or limit) in each queue.",
		}, []string{"queue"}),
		acked: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "fenec_queue_acked_total",
			Help: "Jobs deleted from each queue: acks, and deletes by hand.",
		}, []string{"queue"}),
	}
}

// queueWrites counts a committed request's claims and acks. A queue
// dropped loses its counters, so that one made again under its name
// starts from none.
func (s *Server) queueWrites(ps []engine.Parsed, rs []*engine.Result) {
	for i, p := range ps {
		var vec *prometheus.CounterVec
		switch st := p.Stmt.(type) {
		case *fenecql.DropCollection:
			s.metrics.queues.claimed.DeleteLabelValues(st.Name)
			s.metrics.queues.acked.DeleteLabelValues(st.Name)
		case *fenecql.Set:
			if engine.Kind(p.Stmt) == "claim" {
				vec = s.metrics.queues.claimed
			}
		case *fenecql.Del:
			vec = s.metrics.queues.acked
		}
		if vec == nil || i >= len(rs) {
			continue
		}
		n := rs[i].Affected
		if rs[i].IsRows {
			n = int64(len(rs[i].Rows))
		}
		if coll, _ := engine.ClausesOf(p.Stmt); n > 0 && s.db.IsQueue(coll) {
			vec.WithLabelValues(coll).Add(float64(n))
		}
	}
}
