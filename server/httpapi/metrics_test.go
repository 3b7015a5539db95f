package httpapi

import (
	"bytes"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil/promlint"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// scrape reads GET /_metrics, lints it as `promtool check metrics` does,
// and returns the families by name.
func scrape(t *testing.T, ts *testServer) map[string]*dto.MetricFamily {
	t.Helper()
	r, err := ts.c.Do("GET", "/_metrics", nil, nil)
	if err != nil || r.Status != 200 {
		t.Fatalf("/_metrics: %v %v", err, r)
	}
	problems, err := promlint.New(bytes.NewReader(r.Body)).Lint()
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("lint: %s: %s", p.Metric, p.Text)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(bytes.NewReader(r.Body))
	if err != nil {
		t.Fatal(err)
	}
	return fams
}

// value returns the sum of a family's samples whose labels include want
// (a histogram's count).
func value(fams map[string]*dto.MetricFamily, name string, want map[string]string) float64 {
	sum := 0.0
	f := fams[name]
	if f == nil {
		return 0
	}
next:
	for _, m := range f.Metric {
		for k, v := range want {
			found := false
			for _, l := range m.Label {
				if l.GetName() == k && l.GetValue() == v {
					found = true
				}
			}
			if !found {
				continue next
			}
		}
		switch {
		case m.Counter != nil:
			sum += m.Counter.GetValue()
		case m.Gauge != nil:
			sum += m.Gauge.GetValue()
		case m.Histogram != nil:
			sum += float64(m.Histogram.GetSampleCount())
		}
	}
	return sum
}

func TestMetrics(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, t.TempDir()+"/m.db", nil)
	before := scrape(t, ts)
	for _, name := range []string{"fenec_build_info", "go_goroutines", "process_cpu_seconds_total", "fenec_idempotency_keys", "fenec_memory_over_limit_total", "fenec_disk_reads_total", "fenec_evictions_total", "fenec_disk_read_errors_total"} {
		if before[name] == nil {
			t.Errorf("no %s", name)
		}
	}

	withJobs(t, ts, 3)
	send(t, ts.c, "/query", claim, "k")
	ts.c.Query("del jobs where n = 99 require 1")
	ts.c.Query("get jobs count")
	after := scrape(t, ts)

	tests := []struct {
		name   string
		labels map[string]string
		want   float64 // the rise since before
	}{
		{"fenec_statements_total", map[string]string{"kind": "write", "outcome": "ok"}, 4}, // create + 3 puts
		{"fenec_statements_total", map[string]string{"kind": "claim", "outcome": "ok"}, 1},
		{"fenec_statements_total", map[string]string{"kind": "write", "outcome": "unmet"}, 1},
		{"fenec_statements_total", map[string]string{"kind": "read", "outcome": "ok"}, 1},
		{"fenec_statement_seconds", map[string]string{"kind": "claim"}, 1},
		{"fenec_documents", map[string]string{"collection": "jobs"}, 3},
		{"fenec_resident_rows", map[string]string{"collection": "jobs"}, 3},
		{"fenec_resident_bytes", map[string]string{"collection": "jobs"}, -1},
		{"fenec_evicted_rows", map[string]string{"collection": "jobs"}, 0}, // no --memory: nothing evicted
		{"fenec_disk_reads_total", nil, 0},
		{"fenec_evictions_total", nil, 0},
		{"fenec_disk_read_errors_total", nil, 0},
		{"fenec_memory_over_limit_total", nil, 0}, // no --memory watched here
		{"fenec_idempotency_keys", nil, 1},
		{"fenec_store_commit_seconds", nil, -1}, // -1: rose
		{"fenec_store_fsyncs_total", nil, -1},
		{"fenec_store_unfolded_bytes", nil, -1}, // the writes' records, younger than a fold
		{"fenec_http_requests_total", map[string]string{"route": "/query", "status": "412"}, 1},
	}
	for _, tt := range tests {
		rise := value(after, tt.name, tt.labels) - value(before, tt.name, tt.labels)
		if (tt.want < 0 && rise <= 0) || (tt.want >= 0 && rise != tt.want) {
			t.Errorf("%s%v rose %v, want %v", tt.name, tt.labels, rise, tt.want)
		}
	}
	if !strings.Contains(after["fenec_statements_total"].GetHelp(), "outcome") {
		t.Error("fenec_statements_total has no help")
	}
}
