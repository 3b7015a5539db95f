package fenecdb_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/fenecdb/fenec/sdks/go"
)

// stub serves one canned answer and records the requests it was sent.
type stub struct {
	status  int
	body    string
	headers map[string]string
	hold    time.Duration
	got     chan *http.Request
	bodies  chan string
}

func (s *stub) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	s.got <- r
	s.bodies <- string(b)
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

func connect(t *testing.T, url string, opts ...fenecdb.Option) *fenecdb.DB {
	t.Helper()
	db, err := fenecdb.New(url, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return db
}

func TestErrorMapping(t *testing.T) {
	for _, tc := range []struct {
		status int
		code   string
	}{
		{400, fenecdb.CodeBadRequest}, {401, fenecdb.CodeUnauthorized}, {403, fenecdb.CodeForbidden},
		{404, fenecdb.CodeNotFound}, {409, fenecdb.CodeConflict}, {412, fenecdb.CodeUnmet},
		{422, fenecdb.CodeKeyReused},
	} {
		t.Run(strconv.Itoa(tc.status), func(t *testing.T) {
			_, url := newStub(t, tc.status, `{"error": "what went wrong", "code": "`+tc.code+`"}`)
			_, err := connect(t, url).Query(context.Background(), "get jobs")
			var fe *fenecdb.Error
			if !errors.As(err, &fe) {
				t.Fatalf("got %v, want a *fenecdb.Error", err)
			}
			want := fenecdb.Error{Status: tc.status, Code: tc.code, Message: "what went wrong", At: -1}
			if *fe != want {
				t.Fatalf("got %+v, want %+v", *fe, want)
			}
		})
	}
}

func TestBatchErrorAt(t *testing.T) {
	_, url := newStub(t, 412, `{"error": "unmet", "code": "unmet", "at": 1}`)
	_, err := connect(t, url).Batch(context.Background(),
		fenecdb.Statement{Query: "get jobs"}, fenecdb.Statement{Query: "del jobs require 1"})
	var fe *fenecdb.Error
	if !errors.As(err, &fe) || fe.At != 1 || fe.Status != 412 {
		t.Fatalf("got %v, want a 412 at statement 1", err)
	}
}

func TestErrorWithoutJSONBody(t *testing.T) {
	_, url := newStub(t, 502, "bad gateway\n")
	_, err := connect(t, url).Query(context.Background(), "get jobs")
	var fe *fenecdb.Error
	if !errors.As(err, &fe) || fe.Status != 502 || fe.Code != "" || fe.Message != "bad gateway" {
		t.Fatalf("got %#v", err)
	}
}

func TestRowsKeepColumnOrder(t *testing.T) {
	s, url := newStub(t, 200, `[{"id": 9007199254740993, "run_at": "2026-05-03T09:20:30.000Z", "attempts": 1, "payload": {"to": "ada"}}]`)
	s.headers = map[string]string{"Fenec-Seq": "42"}
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
	if row.Get("id") != json.Number("9007199254740993") || row.Get("nope") != nil {
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
	res, err := connect(t, url).IdempotencyKey("k1").From("jobs").Delete(context.Background())
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

func TestHeaders(t *testing.T) {
	s, url := newStub(t, 200, `[]`)
	base := connect(t, url, fenecdb.WithToken("s3cret"))
	waiting := base.Wait(1500 * time.Millisecond)
	ctx := context.Background()

	if _, err := waiting.From("jobs").Update(ctx, fenecdb.D("owner", "w1")); err != nil {
		t.Fatal(err)
	}
	r := <-s.got
	if r.Header.Get("Authorization") != "Bearer s3cret" || r.Header.Get("Fenec-Wait") != "1500" {
		t.Fatalf("headers %v", r.Header)
	}
	if body := <-s.bodies; body != `{"params":["w1"],"query":"set jobs {owner: $1}"}` {
		t.Fatalf("body %s", body)
	}
	// Reads never carry the wait; the copy left its original as it was.
	if _, err := waiting.From("jobs").Rows(ctx); err != nil {
		t.Fatal(err)
	}
	if r := <-s.got; r.Header.Get("Fenec-Wait") != "" {
		t.Fatalf("a read sent Fenec-Wait %q", r.Header.Get("Fenec-Wait"))
	}
	<-s.bodies
	if _, err := base.Query(ctx, "del jobs"); err != nil {
		t.Fatal(err)
	}
	if r := <-s.got; r.Header.Get("Fenec-Wait") != "" || r.Header.Get("Idempotency-Key") != "" {
		t.Fatalf("the original DB changed: %v", r.Header)
	}
}

func TestWaitExtendsTimeout(t *testing.T) {
	s, url := newStub(t, 200, `[]`)
	s.hold = 300 * time.Millisecond
	db := connect(t, url, fenecdb.WithTimeout(100*time.Millisecond))
	ctx := context.Background()
	if _, err := db.Query(ctx, "del jobs limit 1"); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("without a wait: got %v, want the timeout", err)
	}
	if _, err := db.Wait(time.Second).Query(ctx, "del jobs limit 1"); err != nil {
		t.Fatalf("with a wait: %v", err)
	}
}

func TestCancel(t *testing.T) {
	s, url := newStub(t, 200, `[]`)
	s.hold = time.Minute
	ctx, cancel := context.WithCancel(context.Background())
	go func() { <-s.got; cancel() }()
	start := time.Now()
	_, err := connect(t, url).Wait(30 * time.Second).From("jobs").Limit(1).Delete(ctx)
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
	results, err := db.Batch(context.Background(), fail, count)
	if err != nil {
		t.Fatal(err)
	}
	if len(results) != 2 || results[0].Affected != 1 || results[0].Seq != 5 || results[1].Rows[0].Get("count") != json.Number("4") {
		t.Fatalf("got %+v", results)
	}
	<-s.got
	want := `{"statements":[{"params":[2],"query":"set jobs {owner: null} where id = $1 require 1"},{"params":[],"query":"get jobs count"}]}`
	if body := <-s.bodies; body != want {
		t.Fatalf("body\n got %s\nwant %s", body, want)
	}
}
