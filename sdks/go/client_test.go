package fenecdb_test

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/fenecdb/fenec/sdks/go"
)

// stub serves one canned answer and records the requests it was sent.
type stub struct {
	collections string // the answer to GET /collections
	batch       string // the answer to POST /batch, if not body
	status      int
	body        string
	headers     map[string]string
	hold        time.Duration
	got         chan *http.Request
	bodies      chan string
}

func (s *stub) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	s.got <- r
	s.bodies <- string(b)
	if r.URL.Path == "/collections" {
		io.WriteString(w, cmp.Or(s.collections, `{"collections": []}`))
		return
	}
	if r.URL.Path == "/batch" && s.batch != "" {
		io.WriteString(w, s.batch)
		return
	}
	if s.hold > 0 {
		select {
		case <-time.After(s.hold):
		case <-r.Context().Done():
			return
		}
	}
	for k, v := range s.headers {
		w.Header().Set(k, v)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(s.status)
	io.WriteString(w, s.body)
}

func newStub(t *testing.T, status int, body string) (*stub, string) {
	s := &stub{status: status, body: body, got: make(chan *http.Request, 10), bodies: make(chan string, 10)}
	srv := httptest.NewServer(s)
	t.Cleanup(srv.Close)
	return s, srv.URL
}

// TestProxyErrorIsUnexpected: a proxy's 502 with an HTML body is an
// *Error of code unexpected, with the status and the start of the body.
func TestProxyErrorIsUnexpected(t *testing.T) {
	_, url := newStub(t, 502, "<html><body>502 Bad Gateway</body></html>\n")
	_, err := connect(t, url).Query(context.Background(), "get jobs")
	var fe *fenecdb.Error
	if !errors.As(err, &fe) || fe.Status != 502 || !errors.Is(err, fenecdb.ErrUnexpected) ||
		!strings.Contains(fe.Message, "502") || !strings.Contains(fe.Message, "<html><body>502 Bad Gateway") {
		t.Fatalf("got %#v", err)
	}
	_, url = newStub(t, 418, `{"error": "short and stout", "code": "teapot"}`)
	if _, err := connect(t, url).Query(context.Background(), "get jobs"); !errors.Is(err, fenecdb.ErrUnexpected) || !strings.Contains(err.Error(), "teapot") {
		t.Fatalf("an error code openapi.yaml lacks: got %v", err)
	}
	_, url = newStub(t, 200, "OK")
	if _, err := connect(t, url).Query(context.Background(), "get jobs"); !errors.Is(err, fenecdb.ErrUnexpected) {
		t.Fatalf("a 200 that is not JSON: got %v", err)
	}
}

func TestRowsKeepColumnOrder(t *testing.T) {
	s, url := newStub(t, 200, `[{"id": 9007199254740993, "run_at": "2026-05-03T09:20:30.000Z", "attempts": 1, "payload": {"to": "ada"}}]`)
	s.headers = map[string]string{"Fenec-Seq": "42"}
	s.collections = `{"collections": [{"name": "jobs", "documents": 1, "fields": [{"name": "run_at", "type": "timestamp", "index": "sorted"}, {"name": "attempts", "type": "int", "index": null}, {"name": "payload", "type": "json", "index": null}]}]}`
	res, err := connect(t, url).From("jobs").Update(context.Background(), fenecdb.D("attempts", fenecdb.Inc(1)), fenecdb.Returning("*"))
	if err != nil {
		t.Fatal(err)
	}
	if res.Seq != 42 || res.Affected != 1 || res.Replayed || len(res.Rows) != 1 {
		t.Fatalf("got %+v", res)
	}
	row := res.Rows[0]
	if got, want := row.Columns, []string{"id", "run_at", "attempts", "payload"}; !slices.Equal(got, want) {
		t.Fatalf("columns %v, want %v", got, want)
	}
	if row.Get("id") != int64(9007199254740993) || row.Get("nope") != nil || row.Get("run_at") != time.UnixMilli(1777800030000).UTC() {
		t.Fatalf("Get: %v %v", row.Get("id"), row.Get("nope"))
	}
	var job struct {
		ID      int64 `json:"id"`
		Payload struct {
			To string `json:"to"`
		} `json:"payload"`
		RunAt time.Time `json:"run_at"`
	}
	if err := row.Decode(&job); err != nil {
		t.Fatal(err)
	}
	if job.ID != 9007199254740993 || job.Payload.To != "ada" || job.RunAt.UnixMilli() != 1777800030000 {
		t.Fatalf("decoded %+v", job)
	}
	b, _ := json.Marshal(row)
	if string(b) != `{"id":9007199254740993,"run_at":"2026-05-03T09:20:30.000Z","attempts":1,"payload":{"to":"ada"}}` {
		t.Fatalf("marshalled %s", b)
	}
}

func TestAffectedAndReplayed(t *testing.T) {
	s, url := newStub(t, 200, `{"affected": 3}`)
	s.headers = map[string]string{"Fenec-Seq": "7", "Idempotent-Replayed": "true"}
	res, err := connect(t, url).From("jobs").Delete(context.Background(), fenecdb.IdempotencyKey("k1"))
	if err != nil {
		t.Fatal(err)
	}
	if res.Affected != 3 || res.Rows != nil || res.Seq != 7 || !res.Replayed {
		t.Fatalf("got %+v", res)
	}
	if k := (<-s.got).Header.Get("Idempotency-Key"); k != "k1" {
		t.Fatalf("Idempotency-Key %q", k)
	}
}

// TestHeaders: a Wait copy sends Fenec-Wait with claims alone; a key goes
// with the one call that names it.
func TestHeaders(t *testing.T) {
	s, url := newStub(t, 200, `[]`)
	s.batch = `{"results": [[], []]}`
	base := connect(t, url, fenecdb.WithToken("s3cret"))
	waiting := base.Wait(1500 * time.Millisecond)
	ctx := context.Background()
	jobs := waiting.From("jobs")
	for _, tc := range []struct {
		name, wait, key string
		call            func() error
	}{
		{"claim", "1500", "", func() error {
			_, err := jobs.Update(ctx, fenecdb.D("owner", "w1"), fenecdb.Returning("*"))
			return err
		}},
		{"raw claim", "1500", "k", func() error {
			_, err := waiting.Query(ctx, "set jobs {owner: $1} -- returning\n returning id", "w1", fenecdb.IdempotencyKey("k"))
			return err
		}},
		{"batch with a claim", "1500", "", func() error {
			_, err := waiting.Batch(ctx, []fenecdb.Statement{{Query: "get jobs"}, {Query: "SET jobs {owner: 'x'} RETURNING *"}})
			return err
		}},
		{"update without returning", "", "", func() error { _, err := jobs.Update(ctx, fenecdb.D("owner", "w1")); return err }},
		{"delete", "", "", func() error { _, err := jobs.Delete(ctx, fenecdb.Returning("*")); return err }},
		{"read", "", "", func() error { _, err := jobs.Rows(ctx); return err }},
		{"raw get", "", "", func() error { _, err := waiting.Query(ctx, "get jobs where owner = 'set x returning'"); return err }},
		{"string returning", "", "", func() error { _, err := waiting.Query(ctx, "set jobs {error: 'returning'}"); return err }},
		{"the next call has no key", "", "", func() error {
			_, err := waiting.Query(ctx, "set jobs {owner: $1} returning id", "w1", fenecdb.Timeout(0))
			return err
		}},
	} {
		if tc.name == "the next call has no key" {
			tc.wait = "1500"
		}
		if err := tc.call(); err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		for r := range len(s.got) {
			_ = r
			got := <-s.got
			<-s.bodies
			if got.URL.Path == "/collections" {
				continue
			}
			if w, k := got.Header.Get("Fenec-Wait"), got.Header.Get("Idempotency-Key"); w != tc.wait || k != tc.key || got.Header.Get("Authorization") != "Bearer s3cret" {
				t.Errorf("%s: Fenec-Wait %q Idempotency-Key %q, want %q %q", tc.name, w, k, tc.wait, tc.key)
			}
		}
	}
	if _, err := base.From("jobs").Where("owner", "w1").Update(ctx, fenecdb.D("owner", nil), fenecdb.Returning("*")); err != nil {
		t.Fatal(err)
	}
	for len(s.got) > 0 {
		if r := <-s.got; r.URL.Path == "/query" && r.Header.Get("Fenec-Wait") != "" {
			t.Fatalf("the original client sent Fenec-Wait %q", r.Header.Get("Fenec-Wait"))
		}
		<-s.bodies
	}
}

func TestWaitExtendsTimeout(t *testing.T) {
	s, url := newStub(t, 200, `[]`)
	s.hold = 300 * time.Millisecond
	db := connect(t, url, fenecdb.WithTimeout(100*time.Millisecond))
	ctx := context.Background()
	if _, err := db.Query(ctx, "set jobs {owner: 'x'} limit 1 returning id"); !errors.Is(err, fenecdb.ErrTimeout) {
		t.Fatalf("without a wait: got %v, want the timeout", err)
	}
	if _, err := db.Wait(time.Second).Query(ctx, "set jobs {owner: 'x'} limit 1 returning id"); err != nil {
		t.Fatalf("with a wait: %v", err)
	}
	// No timeout stays none: the wait does not become the bound.
	if _, err := db.Wait(100*time.Millisecond).Query(ctx, "set jobs {owner: 'x'} limit 1 returning id", fenecdb.Timeout(0)); err != nil {
		t.Fatalf("without a timeout, with a wait: %v", err)
	}
}

func TestCancel(t *testing.T) {
	s, url := newStub(t, 200, `[]`)
	s.hold = time.Minute
	ctx, cancel := context.WithCancel(context.Background())
	go func() { <-s.got; cancel() }()
	start := time.Now()
	_, err := connect(t, url).Wait(30*time.Second).From("jobs").Limit(1).Update(ctx, fenecdb.D("owner", "x"), fenecdb.Returning("id"))
	if !errors.Is(err, context.Canceled) || time.Since(start) > 10*time.Second {
		t.Fatalf("got %v after %v, want context.Canceled at once", err, time.Since(start))
	}
}

func TestBatch(t *testing.T) {
	s, url := newStub(t, 200, `{"results": [{"affected": 1}, [{"count": 4}]]}`)
	s.headers = map[string]string{"Fenec-Seq": "5"}
	db := connect(t, url)
	jobs := db.From("jobs")
	fail, err := jobs.Where("id", 2).RenderUpdate(fenecdb.D("owner", nil), fenecdb.Require(1))
	if err != nil {
		t.Fatal(err)
	}
	count, err := jobs.RenderCount()
	if err != nil {
		t.Fatal(err)
	}
	results, err := db.Batch(context.Background(), []fenecdb.Statement{fail, count})
	if err != nil {
		t.Fatal(err)
	}
	if len(results) != 2 || results[0].Affected != 1 || results[0].Seq != 5 || results[1].Rows[0].Get("count") != json.Number("4") {
		t.Fatalf("got %+v", results)
	}
	for r := <-s.got; r.URL.Path != "/batch"; r = <-s.got {
		<-s.bodies
	}
	want := `{"statements":[{"params":[2],"query":"set jobs {owner: null} where id = $1 require 1"},{"query":"get jobs count"}]}`
	if body := <-s.bodies; body != want {
		t.Fatalf("body\n got %s\nwant %s", body, want)
	}
}

// TestUndeclaredColumnReadsTheSchemaOnce: a column no field declares (an
// expression) makes the client read GET /collections again once, not on
// every answer.
func TestUndeclaredColumnReadsTheSchemaOnce(t *testing.T) {
	s, url := newStub(t, 200, `[{"id": 1, "attempts + 1": 2}]`)
	s.collections = `{"collections": [{"name": "jobs", "documents": 1, "fields": [{"name": "attempts", "type": "int", "index": null}]}]}`
	db := connect(t, url)
	for range 3 {
		rows, err := db.From("jobs").Select("attempts").Rows(context.Background())
		if err != nil || rows[0].Get("id") != int64(1) || rows[0].Get("attempts + 1") != json.Number("2") {
			t.Fatalf("got %v, %v", rows, err)
		}
	}
	reads := 0
	for len(s.got) > 0 {
		if (<-s.got).URL.Path == "/collections" {
			reads++
		}
		<-s.bodies
	}
	if reads != 2 {
		t.Fatalf("GET /collections sent %d times, want 2 (the first read and one again)", reads)
	}
}
