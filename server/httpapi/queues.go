package httpapi

import (
	"sync"

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
	// claimedBy and ackedBy hold the vectors' children by queue, so that
	// a request finds its counter without the vector's hash and lock.
	claimedBy, ackedBy *sync.Map
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
		claimedBy: &sync.Map{},
		ackedBy:   &sync.Map{},
	}
}

// add counts n jobs of queue claimed (or acked).
func (q queueRates) add(claimed bool, queue string, n int64) {
	vec, by := q.acked, q.ackedBy
	if claimed {
		vec, by = q.claimed, q.claimedBy
	}
	c, ok := by.Load(queue)
	if !ok {
		c, _ = by.LoadOrStore(queue, vec.WithLabelValues(queue))
	}
	c.(prometheus.Counter).Add(float64(n))
}

// forget drops a queue's counters.
func (q queueRates) forget(queue string) {
	q.claimedBy.Delete(queue)
	q.ackedBy.Delete(queue)
	q.claimed.DeleteLabelValues(queue)
	q.acked.DeleteLabelValues(queue)
}

// queueCount is a request's claims or acks in one collection.
type queueCount struct {
	claimed bool
	coll    string
	n       int64
}

// queueWrites counts a committed request's claims and acks. A queue
// dropped loses its counters, so that one made again under its name
// starts from none. The jobs are summed by collection first: a /batch of
// ten acks asks whether its collection is a queue, and counts, once.
func (s *Server) queueWrites(ps []engine.Parsed, rs []*engine.Result) {
	var room [2]queueCount
	counts := room[:0]
	flush := func() {
		for _, c := range counts {
			if s.db.IsQueue(c.coll) {
				s.metrics.queues.add(c.claimed, c.coll, c.n)
			}
		}
		counts = counts[:0]
	}
	for i, p := range ps {
		claimed := false
		switch st := p.Stmt.(type) {
		case *fenecql.DropCollection:
			flush()
			s.metrics.queues.forget(st.Name)
			continue
		case *fenecql.Set:
			if engine.Kind(p.Stmt) != "claim" {
				continue
			}
			claimed = true
		case *fenecql.Del:
		default:
			continue
		}
		if i >= len(rs) {
			continue
		}
		n := rs[i].Affected
		if rs[i].IsRows {
			n = int64(len(rs[i].Rows))
		}
		coll, _ := engine.ClausesOf(p.Stmt)
		if n <= 0 {
			continue
		}
		found := false
		for k := range counts {
			if counts[k].claimed == claimed && counts[k].coll == coll {
				counts[k].n += n
				found = true
				break
			}
		}
		if !found {
			counts = append(counts, queueCount{claimed, coll, n})
		}
	}
	flush()
}
