package httpapi

import (
	"runtime/debug"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/fenecdb/fenec/server/engine"
)

// Metrics are the server's Prometheus metrics (docs/http.md, Metrics), on
// a registry of their own so that each server (and each test's) counts
// alone.
type Metrics struct {
	reg        *prometheus.Registry
	statements *prometheus.CounterVec
	latency    *prometheus.HistogramVec
	requests   *prometheus.CounterVec
	commit     prometheus.Histogram
	fsyncs     prometheus.Counter
	lapsed     prometheus.Counter
	refused    *prometheus.CounterVec
	memoryOver prometheus.Counter
	queues     queueRates

	// The children of the vectors above that requests count, by their
	// labels: a vector finds a child by hashing its labels under a lock,
	// and every request counts three or more (keyed by statKey, reqKey and
	// the kind).
	statementsBy, requestsBy, latencyBy sync.Map
}

type statKey struct{ kind, outcome string }

type reqKey struct {
	route  string
	status int
}

// NewMetrics makes the metrics. They exist before the database opens:
// the database's commits are counted from its Open on (Stored).
func NewMetrics() *Metrics {
	m := &Metrics{
		reg: prometheus.NewRegistry(),
		statements: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "fenec_statements_total",
			Help: "Statements run, by kind (read, write, claim, or unparsed) and outcome (ok, undone with a batch refused by another statement, or the error code).",
		}, []string{"kind", "outcome"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "fenec_statement_seconds",
			Help:    "Time to run a request's statements, locks included, by kind (a /batch of several is kind batch).",
			Buckets: prometheus.ExponentialBuckets(10e-6, 4, 10), // 10 µs .. 2.6 s
		}, []string{"kind"}),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "fenec_http_requests_total",
			Help: "HTTP requests answered, by route and status.",
		}, []string{"route", "status"}),
		commit: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "fenec_store_commit_seconds",
			Help:    "Time the store took to commit a group of writes to SQLite.",
			Buckets: prometheus.ExponentialBuckets(50e-6, 3, 10), // 50 µs .. 1 s
		}),
		fsyncs: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "fenec_store_fsyncs_total",
			Help: "Syncs (fdatasync) of the log that made group commits durable; one may cover several groups.",
		}),
		lapsed: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "fenec_lapsed_deleted_total",
			Help: "Documents whose @ttl lapsed that this node's sweeper deleted (only a cluster's leader sweeps).",
		}),
	}
	m.refused = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "fenec_http_connections_refused_total",
		Help: "Connections answered 503 too_many_connections and closed, by reason: max_conns, max_conns_per_addr, or fd_limit (out of file descriptors).",
	}, []string{"reason"})
	for _, r := range []string{"max_conns", "max_conns_per_addr", "fd_limit"} {
		m.refused.WithLabelValues(r) // shown at 0 before the first
	}
	m.memoryOver = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "fenec_memory_over_limit_total",
		Help: "Times the Go heap's live bytes were found past --memory, at most once a minute while it lasts (each also logged); nothing is refused for it.",
	})
	m.queues = newQueueRates()
	build := prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "fenec_build_info",
		Help: "The running binary: always 1, with its version, VCS revision and Go version as labels.",
	}, []string{"version", "revision", "goversion"})
	build.WithLabelValues(buildInfo()).Set(1)
	m.reg.MustRegister(m.statements, m.latency, m.requests, m.commit, m.fsyncs, m.lapsed, m.refused, m.memoryOver, build,
		m.queues.claimed, m.queues.acked,
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// ConnRefused counts a connection refused (Limits.Refused).
func (m *Metrics) ConnRefused(reason string) { m.refused.WithLabelValues(reason).Inc() }

// Stored counts a group the store made durable: subscribed to the
// database's Stored events (engine.DB.Subscribe) right after it opens.
func (m *Metrics) Stored(w engine.Write) {
	m.commit.Observe(w.Stored.Wrote.Seconds())
	if w.Stored.Fsync {
		m.fsyncs.Inc()
	}
}

// watch adds the gauges read from the database at each scrape.
func (m *Metrics) watch(db *engine.DB) {
	m.reg.MustRegister(
		documentsCollector{db},
		residentCollector{db},
		queueCollector{db},
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "fenec_idempotency_keys",
			Help: "Idempotency keys held, with their answers.",
		}, func() float64 { n, _ := db.MetaUse(metaKind); return float64(n) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "fenec_idempotency_bytes",
			Help: "Bytes of the idempotency keys and answers held in memory.",
		}, func() float64 { _, b := db.MetaUse(metaKind); return float64(b) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "fenec_store_up",
			Help: "1 while the store takes writes, 0 while it is failed (writes refused until a probe succeeds).",
		}, func() float64 {
			if db.StoreErr() != nil {
				return 0
			}
			return 1
		}),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "fenec_store_failures_total",
			Help: "Times the store failed (each undoing the writes it had not stored, and refusing writes until it worked again).",
		}, func() float64 { return float64(db.StoreFailures()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "fenec_store_unfolded_bytes",
			Help: "Bytes of the store's log not yet folded into its tables: background work owed for writes already answered.",
		}, func() float64 { return float64(db.StoreUnfolded()) }),
	)
}

func (m *Metrics) statement(kind, outcome string) { m.statementsRun(kind, outcome, 1) }

// statementsRun counts n statements of a kind and outcome.
func (m *Metrics) statementsRun(kind, outcome string, n int) {
	k := statKey{kind, outcome}
	c, ok := m.statementsBy.Load(k)
	if !ok {
		c, _ = m.statementsBy.LoadOrStore(k, m.statements.WithLabelValues(kind, outcome))
	}
	c.(prometheus.Counter).Add(float64(n))
}

func (m *Metrics) request(route string, status int) {
	if status == 0 {
		status = 200
	}
	k := reqKey{route, status}
	c, ok := m.requestsBy.Load(k)
	if !ok {
		c, _ = m.requestsBy.LoadOrStore(k, m.requests.WithLabelValues(route, strconv.Itoa(status)))
	}
	c.(prometheus.Counter).Inc()
}

// observe times a run of statements of a kind.
func (m *Metrics) observe(kind string, took time.Duration) {
	o, ok := m.latencyBy.Load(kind)
	if !ok {
		o, _ = m.latencyBy.LoadOrStore(kind, m.latency.WithLabelValues(kind))
	}
	o.(prometheus.Observer).Observe(took.Seconds())
}

// documentsCollector reports fenec_documents per collection as it is at the
// scrape: collections come and go, so a fixed gauge per name would lie.
type documentsCollector struct{ db *engine.DB }

var documentsDesc = prometheus.NewDesc("fenec_documents", "Documents stored per collection (a lapsed @ttl document until the sweeper deletes it).", []string{"collection"}, nil)

func (c documentsCollector) Describe(ch chan<- *prometheus.Desc) { ch <- documentsDesc }

func (c documentsCollector) Collect(ch chan<- prometheus.Metric) {
	for _, info := range c.db.Collections() {
		ch <- prometheus.MustNewConstMetric(documentsDesc, prometheus.GaugeValue, float64(info.Stored), info.Name)
	}
}

// residentCollector reports, per collection, its rows held in memory, its
// rows evicted to the file (under --memory: engine/evict.go) and their
// estimated bytes with their indexes' (engine.Footprint); and the rows
// read back from the file.
type residentCollector struct{ db *engine.DB }

var (
	residentRowsDesc  = prometheus.NewDesc("fenec_resident_rows", "Documents whose rows are held in memory per collection: every one stored without --memory; under it, those not evicted to the file.", []string{"collection"}, nil)
	evictedRowsDesc   = prometheus.NewDesc("fenec_evicted_rows", "Documents whose rows are only in the file per collection (evicted under --memory; their index entries stay in memory).", []string{"collection"}, nil)
	residentBytesDesc = prometheus.NewDesc("fenec_resident_bytes", "Estimated bytes of memory per collection: its resident rows (their encoded size) and the index entries of all its documents.", []string{"collection"}, nil)
	diskReadsDesc     = prometheus.NewDesc("fenec_disk_reads_total", "Evicted rows read back from the file (rate() gives reads from disk per second); 0 without --memory.", nil, nil)
	evictedDesc       = prometheus.NewDesc("fenec_evictions_total", "Rows evicted from memory to the file since the server started (under --memory).", nil, nil)
	readErrorsDesc    = prometheus.NewDesc("fenec_disk_read_errors_total", "Reads back of evicted rows that failed (an I/O error, or a row not in the file): each logged, its statement answered unavailable.", nil, nil)
)

func (c residentCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- residentRowsDesc
	ch <- evictedRowsDesc
	ch <- residentBytesDesc
	ch <- diskReadsDesc
	ch <- evictedDesc
	ch <- readErrorsDesc
}

func (c residentCollector) Collect(ch chan<- prometheus.Metric) {
	for _, f := range c.db.Footprints() {
		ch <- prometheus.MustNewConstMetric(residentRowsDesc, prometheus.GaugeValue, float64(f.Rows), f.Name)
		ch <- prometheus.MustNewConstMetric(evictedRowsDesc, prometheus.GaugeValue, float64(f.Evicted), f.Name)
		ch <- prometheus.MustNewConstMetric(residentBytesDesc, prometheus.GaugeValue, float64(f.Bytes), f.Name)
	}
	st := c.db.EvictStats()
	ch <- prometheus.MustNewConstMetric(diskReadsDesc, prometheus.CounterValue, float64(st.Reads))
	ch <- prometheus.MustNewConstMetric(evictedDesc, prometheus.CounterValue, float64(st.Evicted))
	ch <- prometheus.MustNewConstMetric(readErrorsDesc, prometheus.CounterValue, float64(st.ReadErrors))
}

func buildInfo() (version, revision, goversion string) {
	version, revision, goversion = "unknown", "unknown", "unknown"
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return
	}
	version, goversion = bi.Main.Version, bi.GoVersion
	for _, s := range bi.Settings {
		if s.Key == "vcs.revision" {
			revision = s.Value
		}
	}
	return
}
