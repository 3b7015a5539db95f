package httpapi

import (
	"io"
	"log"
	"net/http"
	"path/filepath"
	"testing"
	"time"

	"github.com/fenecdb/fenec/server/engine"
	"github.com/fenecdb/fenec/server/httpapi/apitest"
	"github.com/fenecdb/fenec/server/store"
)

// TestSettleAfterAnswer: HTTPServer calls its settle (SettleAfter) once a
// request's answer is written, not before: a durable write's answer
// reaches the client while the settle waits for it, and what the store
// left for after the answer (engine.DB.Settle: the sync told to the
// metrics) is done by then.
func TestSettleAfterAnswer(t *testing.T) {
	ts := newTestServerOn(t, engine.Options{File: filepath.Join(t.TempDir(), "s.db"), Sync: store.SyncMode{Kind: store.SyncAlways}, Settles: true}, nil)
	srv := newHTTPServer(ts.Server, &http.Server{Handler: ts.Server, ErrorLog: log.New(io.Discard, "", 0)})
	got := make(chan struct{}, 1)
	settled := make(chan bool, 16)
	srv.SettleAfter(func() {
		select {
		case <-got:
			settled <- true
		case <-time.After(3 * time.Second):
			settled <- false
		}
		ts.db.Settle()
	})
	c := &apitest.Client{T: t, Base: "http://" + serveOn(t, srv).Addr().String()}
	for i, q := range []string{"create collection notes (text text)", "put notes {text: 'x'}"} {
		start := time.Now()
		c.MustQuery(q)
		if took := time.Since(start); took > 2*time.Second {
			t.Fatalf("request %d answered after %v: its settle ran before its answer was written", i, took)
		}
		got <- struct{}{}
		if !<-settled {
			t.Fatalf("request %d: the settle ran before its answer was written", i)
		}
	}
	// Two durable writes, each its own sync, both told to the metrics by
	// the settles that followed their answers.
	f := scrape(t, ts)["fenec_store_fsyncs_total"]
	if f == nil || len(f.Metric) != 1 || f.Metric[0].GetCounter().GetValue() != 2 {
		t.Fatalf("fenec_store_fsyncs_total %v after two settled writes, want 2", f)
	}
}
