package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3filter"

	"github.com/fenecdb/fenec/server/httpapi/apitest"
)

func init() {
	// The spec's event streams are text; the validator reads them whole.
	openapi3filter.RegisterBodyDecoder("text/event-stream", openapi3filter.FileBodyDecoder)
}

// sseEvent is one server-sent event as read off the wire.
type sseEvent struct {
	Name, ID, Data string
	Comment        string
}

// sseStream is a live query's open answer.
type sseStream struct {
	t      *testing.T
	resp   *http.Response
	cancel context.CancelFunc
	mu     sync.Mutex
	events []sseEvent
	raw    bytes.Buffer
	ended  bool
	more   chan struct{}
}

// openSSE sends the request of a live query and reads its events as they
// come. odd sends a header the server's own HTTP/1.1 reader hands to
// net/http (a value that is not ASCII), so that both serve it.
func openSSE(t *testing.T, c *apitest.Client, method, path, body string, header map[string]string, odd bool) *sseStream {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, err := http.NewRequestWithContext(ctx, method, c.Base+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Accept", "text/event-stream")
	if c.Token != "" {
		req.Header.Set("Authorization", "Bearer "+c.Token)
	}
	if odd {
		req.Header.Set("X-Via", "é")
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	s := &sseStream{t: t, resp: resp, cancel: cancel, more: make(chan struct{}, 1)}
	t.Cleanup(s.close)
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		s.raw.Write(b)
		s.ended = true
		return s
	}
	go s.read()
	return s
}

func (s *sseStream) read() {
	br := bufio.NewReader(s.resp.Body)
	var ev sseEvent
	for {
		line, err := br.ReadString('\n')
		s.mu.Lock()
		s.raw.WriteString(line)
		s.mu.Unlock()
		if err != nil {
			break
		}
		line = strings.TrimSuffix(line, "\n")
		switch {
		case line == "":
			s.mu.Lock()
			s.events = append(s.events, ev)
			s.mu.Unlock()
			ev = sseEvent{}
			select {
			case s.more <- struct{}{}:
			default:
			}
		case strings.HasPrefix(line, ": "):
			ev.Comment = line[2:]
		case strings.HasPrefix(line, "event: "):
			ev.Name = line[7:]
		case strings.HasPrefix(line, "id: "):
			ev.ID = line[4:]
		case strings.HasPrefix(line, "data: "):
			ev.Data = line[6:]
		}
	}
	s.mu.Lock()
	s.ended = true
	s.mu.Unlock()
	select {
	case s.more <- struct{}{}:
	default:
	}
}

func (s *sseStream) close() {
	s.cancel()
	s.resp.Body.Close()
}

// next waits for the stream's next event that is not a heartbeat (or, with
// comments, for any).
func (s *sseStream) wait(n int, comments bool) []sseEvent {
	s.t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		s.mu.Lock()
		var out []sseEvent
		for _, e := range s.events {
			if comments || e.Comment == "" {
				out = append(out, e)
			}
		}
		ended := s.ended
		s.mu.Unlock()
		if len(out) >= n {
			return out
		}
		if ended {
			s.t.Fatalf("the stream ended after %d events, want %d: %+v\n%s", len(out), n, out, s.raw.String())
		}
		select {
		case <-s.more:
		case <-time.After(time.Until(deadline)):
			s.t.Fatalf("%d events came in 15 s, want %d: %+v", len(out), n, out)
		}
	}
}

// text is an event as "name id data".
func (e sseEvent) text() string { return e.Name + " " + e.ID + " " + e.Data }

// seqOf returns a write's Fenec-Seq.
func seqOf(t *testing.T, r *apitest.Response) string {
	t.Helper()
	s := r.Header.Get("Fenec-Seq")
	if s == "" {
		t.Fatalf("no Fenec-Seq on %d %s", r.Status, r.Body)
	}
	return s
}

// TestLiveQueryOverHTTP: against a real fenec serve, a live query — both
// POST /query with Accept: text/event-stream and GET /<c>/changes, each
// served by the server's own HTTP/1.1 reader and by net/http — answers
// its rows, then an event per change of them with the commit's position
// (the write's Fenec-Seq) as its id, heartbeats, a resume with
// Last-Event-ID, and a last event at shutdown.
func TestLiveQueryOverHTTP(t *testing.T) {
	t.Parallel()
	p, c := start(t, "--file", filepath.Join(t.TempDir(), "live.db"), "--changes-heartbeat", "100ms")
	c.MustQuery(`create collection msgs (room text, text text)`)
	c.MustQuery(`put msgs {room: "a", text: "one"}`)
	head := seqOf(t, c.MustQuery(`put msgs {room: "b", text: "other"}`))

	type way struct {
		name, method, path, body string
		odd                      bool
	}
	where := url.QueryEscape(`room = "a"`)
	ways := []way{
		{"query", "POST", "/query", `{"query": "get msgs where room = $1 select text", "params": ["a"]}`, false},
		{"query net/http", "POST", "/query", `{"query": "get msgs where room = $1 select text", "params": ["a"]}`, true},
		{"changes", "GET", "/msgs/changes?where=" + where + "&select=text", "", false},
		{"changes net/http", "GET", "/msgs/changes?where=" + where + "&select=text", "", true},
	}
	streams := make([]*sseStream, len(ways))
	for i, w := range ways {
		streams[i] = openSSE(t, c, w.method, w.path, w.body, nil, w.odd)
		if got := streams[i].resp.Header.Get("Content-Type"); got != "text/event-stream" {
			t.Fatalf("%s: Content-Type %q (%d %s)", w.name, got, streams[i].resp.StatusCode, streams[i].raw.String())
		}
		first := streams[i].wait(1, false)[0]
		if want := `rows ` + head + ` {"position":` + head + `,"rows":[{"id":1,"text":"one"}],"last":true}`; first.text() != want {
			t.Errorf("%s: first event %s, want %s", w.name, first.text(), want)
		}
	}

	// Each write's event is waited for before the next write: an event
	// carries the row as it is when the event is made (docs/changes.md),
	// so writes that come faster than the events may be seen merged.
	var want []string
	step := func(q, event string) {
		t.Helper()
		seq := seqOf(t, c.MustQuery(q))
		if event == "" {
			return
		}
		want = append(want, strings.ReplaceAll(event, "SEQ", seq))
		for i, w := range ways {
			got := streams[i].wait(1+len(want), false)[len(want)]
			if got.text() != want[len(want)-1] {
				t.Errorf("%s: event %d %s, want %s", w.name, len(want), got.text(), want[len(want)-1])
			}
		}
	}
	step(`put msgs {room: "a", text: "two"}`, `insert SEQ {"position":SEQ,"row":{"id":3,"text":"two"}}`)
	step(`put msgs {room: "b", text: "not here"}`, "")
	step(`set msgs {text: "one!"} where id = 1`, `update SEQ {"position":SEQ,"row":{"id":1,"text":"one!"}}`)
	step(`set msgs {room: "c"} where id = 3`, `delete SEQ {"position":SEQ,"id":3}`)
	step(`del msgs where id = 1`, `delete SEQ {"position":SEQ,"id":1}`)
	// A commit of two rows: two events, only the last with an id, so that
	// a client cut off between them resumes from the commit before.
	two := seqOf(t, c.MustQuery(`put msgs [{room: "a", text: "x"}, {room: "a", text: "y"}]`))
	for i, w := range ways {
		got := streams[i].wait(len(want)+3, false)[len(want)+1:]
		if got[0].ID != "" || got[1].ID != two || !strings.Contains(got[0].Data, `"position":`+two) {
			t.Errorf("%s: a commit's two events %s / %s, want the id %s on the second only", w.name, got[0].text(), got[1].text(), two)
		}
	}
	want = append(want, "", "")
	c.MustQuery(`del msgs where text = "x" or text = "y"`)
	for i := range ways {
		streams[i].wait(len(want)+3, false)
	}
	want = append(want, "", "")
	del := seqOf(t, c.MustQuery(`put msgs {room: "b", text: "elsewhere"}`))
	// A quiet stream gets heartbeats.
	hb := 0
	for _, e := range streams[3].wait(len(want)+3, true) {
		if e.Comment == "heartbeat" {
			hb++
		}
	}
	if hb == 0 {
		t.Error("no heartbeat on a quiet stream")
	}

	// Resuming: nothing changed since the last id, nothing is sent again;
	// a change while away brings the rows anew (reset).
	for _, odd := range []bool{false, true} {
		r := openSSE(t, c, "GET", "/msgs/changes?where="+where, "", map[string]string{"Last-Event-ID": del}, odd)
		if e := r.wait(1, true)[0]; e.Comment != "resumed" {
			t.Errorf("resume with nothing new: %+v", e)
		}
		r.close()
	}
	back := seqOf(t, c.MustQuery(`set msgs {room: "a"} where id = 2`))
	r := openSSE(t, c, "GET", "/msgs/changes?where="+where+"&select=text", "", map[string]string{"Last-Event-ID": del}, false)
	if e := r.wait(1, false)[0]; e.text() != `reset `+back+` {"position":`+back+`,"rows":[{"id":2,"text":"other"}],"last":true}` {
		t.Errorf("resume after a change: %s", e.text())
	}
	r.close()
	bad := openSSE(t, c, "GET", "/msgs/changes", "", map[string]string{"Last-Event-ID": "x1"}, false)
	if bad.resp.StatusCode != 400 {
		t.Errorf("Last-Event-ID x1: %d %s", bad.resp.StatusCode, bad.raw.String())
	}

	// Shutdown closes every stream with its last event.
	if err := p.Stop(20 * time.Second); err != nil {
		t.Fatalf("stop: %v\n%s", err, p.Log())
	}
	for i, w := range ways {
		evs := streams[i].wait(len(want)+2, false)
		last := evs[len(evs)-1]
		if last.Name != "closing" || !strings.Contains(last.Data, `"reason":"shutdown"`) {
			t.Errorf("%s: last event %s", w.name, last.text())
		}
		streams[i].mu.Lock()
		raw := streams[i].raw.Bytes()
		streams[i].mu.Unlock()
		req, _ := http.NewRequest(w.method, w.path, strings.NewReader(w.body))
		req.Header.Set("Accept", "text/event-stream")
		if err := apitest.Validate(req, &apitest.Response{Status: 200, Header: streams[i].resp.Header, Body: raw}); err != nil {
			t.Errorf("%s: the stream breaks openapi.yaml: %v", w.name, err)
		}
	}
}

// TestLiveQueryRefusals: what cannot be a live query is refused with a
// clear error before any event, and writes nothing.
func TestLiveQueryRefusals(t *testing.T) {
	t.Parallel()
	_, c := start(t, "--file", ":memory:")
	c.MustQuery(`create collection msgs (room text, n int)`)
	for _, tc := range []struct {
		method, path, body string
		status             int
		msg                string
	}{
		{"POST", "/query", `{"query": "get msgs order n"}`, 400, "a live query takes no order"},
		{"POST", "/query", `{"query": "get msgs limit 3"}`, 400, "takes no limit or offset"},
		{"POST", "/query", `{"query": "get msgs count"}`, 400, "answers rows, not a count"},
		{"POST", "/query", `{"query": "get msgs select n as id"}`, 400, "column id is the row's id"},
		{"POST", "/query", `{"query": "put msgs {n: 1}"}`, 400, "a live query (Accept: text/event-stream) is a get; this is a write"},
		{"POST", "/query", `{"query": "get nothere"}`, 404, "no collection nothere"},
		{"GET", "/msgs/changes?where=" + url.QueryEscape("n >"), "", 400, "in `get msgs where n >`"},
		{"GET", "/msgs/changes?select=" + url.QueryEscape("n order n"), "", 400, "takes no order"},
		{"GET", "/nothere/changes", "", 404, "no collection nothere"},
	} {
		s := openSSE(t, c, tc.method, tc.path, tc.body, nil, false)
		if s.resp.StatusCode != tc.status || !strings.Contains(s.raw.String(), tc.msg) {
			t.Errorf("%s %s %s: %d %s, want %d %q", tc.method, tc.path, tc.body, s.resp.StatusCode, s.raw.String(), tc.status, tc.msg)
		}
		req, _ := http.NewRequest(tc.method, tc.path, strings.NewReader(tc.body))
		if err := apitest.Validate(req, &apitest.Response{Status: s.resp.StatusCode, Header: s.resp.Header, Body: s.raw.Bytes()}); err != nil {
			t.Errorf("%s %s: breaks openapi.yaml: %v", tc.method, tc.path, err)
		}
	}
	// HEAD answers GET's status, with no stream.
	for path, status := range map[string]int{"/msgs/changes": 200, "/nothere/changes": 404, "/msgs/changes?where=n%20%3E": 400} {
		r, err := http.Head(c.Base + path)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(r.Body)
		r.Body.Close()
		if r.StatusCode != status || len(b) != 0 {
			t.Errorf("HEAD %s: %d %q, want %d", path, r.StatusCode, b, status)
		}
	}
	if got := body(c.MustQuery(`get msgs count`)); got != `[{"count":0}]` {
		t.Errorf("a refused live query wrote: %s", got)
	}
}

// changesPolicy: readers read their own messages only; auditors read
// every message, and no secret.
const changesPolicy = `msgs read where owner = $jwt.sub for reader
msgs read for auditor
`

// TestLiveQueryAccess: a token's live query sends only what the token may
// read: a row it may not read never comes — not its content, not its id —
// whether written, changed, or deleted; a row that stops being readable
// leaves the query as a delete of an id the client holds; one that
// becomes readable enters it. The change stream refuses a token that may
// read only some rows (403) and hides a collection it may not read (404).
func TestLiveQueryAccess(t *testing.T) {
	t.Parallel()
	policy := filepath.Join(t.TempDir(), "policy.txt")
	writeFile(t, policy, changesPolicy)
	_, admin := start(t, "--file", filepath.Join(t.TempDir(), "a.db"), "--token", "admin", "--jwt-secret", accessSecret, "--policy", policy)
	admin.Token = "admin"
	tok := func(claims string) string { return mintToken(t, "--secret", accessSecret, "--claims", claims) }
	ada := as(admin, tok(`{"sub":"ada","role":"reader"}`))
	aud := as(admin, tok(`{"sub":"aud","role":"auditor"}`))

	admin.MustQuery(`create collection msgs (owner text, text text)`)
	admin.MustQuery(`create collection secrets (v text)`)
	admin.MustQuery(`put msgs [{owner: "ada", text: "mine"}, {owner: "bob", text: "SECRET-1"}]`)

	for _, odd := range []bool{false, true} {
		s := openSSE(t, ada, "POST", "/query", `{"query": "get msgs"}`, nil, odd)
		first := s.wait(1, false)[0]
		if !strings.Contains(first.Data, `"mine"`) || strings.Contains(first.Data, "SECRET") || strings.Contains(first.Data, `"id":2`) {
			t.Fatalf("first rows: %s", first.text())
		}
		// Writes to rows ada may not read: content, id and existence stay
		// hidden, whatever the write.
		admin.MustQuery(`put msgs {owner: "bob", text: "SECRET-2"}`)
		admin.MustQuery(`set msgs {text: "SECRET-3"} where owner = "bob"`)
		admin.MustQuery(`del msgs where text = "SECRET-2"`)
		// A row of ada's handed to bob leaves her query; one handed to her
		// enters it.
		// (Each event waited for before the next write: an event carries
		// the row as it is when the event is made.)
		away := seqOf(t, admin.MustQuery(`set msgs {owner: "bob"} where id = 1`))
		if e := s.wait(2, false)[1]; e.text() != `delete `+away+` {"position":`+away+`,"id":1}` {
			t.Errorf("a row handed away: %s", e.text())
		}
		in := seqOf(t, admin.MustQuery(`set msgs {owner: "ada"} where id = 2`))
		if e := s.wait(3, false)[2]; e.text() != `insert `+in+` {"position":`+in+`,"row":{"id":2,"owner":"ada","text":"SECRET-3"}}` {
			t.Errorf("a row handed to ada: %s", e.text())
		}
		admin.MustQuery(`set msgs {owner: "ada"} where id = 1`) // as it was, for the next round
		admin.MustQuery(`set msgs {owner: "bob", text: "SECRET-1"} where id = 2`)
		s.wait(5, false)
		s.mu.Lock()
		raw := s.raw.String()
		s.mu.Unlock()
		for _, leak := range []string{"SECRET-2", `"id":3`} {
			if strings.Contains(raw, leak) {
				t.Errorf("the stream shows %s, which ada never could read:\n%s", leak, raw)
			}
		}
		s.close()
	}
	// Resuming says nothing of writes to rows ada may not read: she is
	// sent her rows again whether or not anything changed.
	last := seqOf(t, admin.MustQuery(`set msgs {text: "mine"} where id = 1`))
	for _, write := range []bool{false, true} {
		if write {
			admin.MustQuery(`put msgs {owner: "bob", text: "SECRET-4"}`)
		}
		s := openSSE(t, ada, "GET", "/msgs/changes", "", map[string]string{"Last-Event-ID": last}, false)
		if e := s.wait(1, true)[0]; e.Name != "reset" || strings.Contains(e.Data, "SECRET-4") {
			t.Errorf("resume (a hidden write since: %v): %s %q", write, e.text(), e.Comment)
		}
		s.close()
	}

	// The change stream: a token that may read only some rows of msgs is
	// refused; secrets, which it may not read at all, is not there; one
	// that may read msgs whole reads it.
	check := func(c *apitest.Client, path string, status int, msg string) *apitest.Response {
		t.Helper()
		r, err := c.Do("GET", path, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		if r.Status != status || !strings.Contains(string(r.Body), msg) {
			t.Errorf("GET %s: %d %s, want %d %q", path, r.Status, r.Body, status, msg)
		}
		return r
	}
	check(ada, "/_changes?consumer=c&collection=msgs", 403, "may read only some rows of msgs")
	check(ada, "/_changes?consumer=c&collection=secrets", 404, "no collection secrets")
	check(ada, "/_changes?consumer=c", 403, "names the collection it reads")
	check(aud, "/_changes?consumer=c&collection=secrets", 404, "no collection secrets")
	r := check(aud, "/_changes?consumer=c&collection=msgs", 200, `"consumer":"c"`)
	if strings.Contains(string(r.Body), `"collection":"secrets"`) {
		t.Errorf("the auditor's stream holds secrets: %s", r.Body)
	}
	// A token's consumers are its own: the auditor's ack does not move the
	// operator's consumer of the same name.
	var b struct{ Next int64 }
	r.JSON(t, &b)
	if a, err := aud.Do("POST", "/_changes/ack", map[string]any{"consumer": "c", "position": b.Next}, nil); err != nil || a.Status != 200 {
		t.Fatalf("auditor's ack: %v %d %s", err, a.Status, a.Body)
	}
	var mine struct{ Position int64 }
	check(admin, "/_changes?consumer=c", 200, `"consumer":"c"`).JSON(t, &mine)
	if mine.Position == b.Next {
		t.Errorf("the auditor's ack moved the operator's consumer c to %d", b.Next)
	}
}

// changesBatch is GET /_changes's answer.
type changesBatch struct {
	Consumer string
	Position int64
	Next     int64
	Changes  []struct {
		Position   int64
		Collection string
		Op         string
		ID         int64
		Row        map[string]any
	}
}

func readChanges(t *testing.T, c *apitest.Client, query string, status int) (changesBatch, *apitest.Response) {
	t.Helper()
	r, err := c.Do("GET", "/_changes?"+query, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if r.Status != status {
		t.Fatalf("GET /_changes?%s: %d %s, want %d", query, r.Status, r.Body, status)
	}
	var b changesBatch
	if status == 200 {
		r.JSON(t, &b)
	}
	return b, r
}

func ack(t *testing.T, c *apitest.Client, consumer string, pos int64) {
	t.Helper()
	r, err := c.Do("POST", "/_changes/ack", map[string]any{"consumer": consumer, "position": pos}, nil)
	if err != nil || r.Status != 200 {
		t.Fatalf("ack %s %d: %v %d %s", consumer, pos, err, r.Status, r.Body)
	}
}

// TestChangeStreamOverHTTP: a named consumer reads the committed writes in
// order, again until it acks (at least once), on from its ack after a
// restart (the ack is durable); a read held by wait is answered by the
// commit; two readers under one name: the second is refused; past
// --changes-retain, 410 naming both positions.
func TestChangeStreamOverHTTP(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "s.db")
	p, c := start(t, "--file", file, "--changes-retain", "10")
	c.MustQuery(`create collection q (n int)`)
	c.MustQuery(`create collection other (n int)`)
	var seqs []string
	for i := range 3 {
		seqs = append(seqs, seqOf(t, c.MustQuery(fmt.Sprintf(`put q {n: %d}`, i))))
		c.MustQuery(`put other {n: 0}`)
	}
	b1, _ := readChanges(t, c, "consumer=w&collection=q&limit=2", 200)
	if len(b1.Changes) != 2 || strconv.FormatInt(b1.Changes[0].Position, 10) != seqs[0] || b1.Changes[0].Op != "put" || b1.Changes[0].Row["n"] != 0.0 || b1.Changes[1].Row["n"] != 1.0 {
		t.Fatalf("first read: %+v (seqs %v)", b1, seqs)
	}
	again, _ := readChanges(t, c, "consumer=w&collection=q&limit=2", 200)
	if again.Changes[0].Position != b1.Changes[0].Position {
		t.Fatalf("an unacked read moved on: %+v", again)
	}
	ack(t, c, "w", b1.Next)
	b2, _ := readChanges(t, c, "consumer=w&collection=q", 200)
	if len(b2.Changes) != 1 || strconv.FormatInt(b2.Changes[0].Position, 10) != seqs[2] || b2.Position != b1.Next {
		t.Fatalf("after the ack: %+v", b2)
	}
	ack(t, c, "w", b2.Next)

	// Held by wait, answered by the commit; a second reader meanwhile is
	// refused.
	held := make(chan changesBatch, 1)
	go func() {
		b, _ := readChanges(t, c, "consumer=w&collection=q&wait=20000", 200)
		held <- b
	}()
	deadline := time.Now().Add(10 * time.Second)
	for {
		r, err := c.Do("GET", "/_changes?consumer=w&collection=q", nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		if r.Status == 409 {
			if r.Code() != "consumer_busy" {
				t.Fatalf("second reader: %d %s", r.Status, r.Body)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the held read was never seen running")
		}
		time.Sleep(5 * time.Millisecond)
	}
	at := time.Now()
	woke := seqOf(t, c.MustQuery(`del q where n = 0`))
	b3 := <-held
	if len(b3.Changes) != 1 || b3.Changes[0].Op != "delete" || strconv.FormatInt(b3.Changes[0].Position, 10) != woke || b3.Changes[0].Row != nil {
		t.Fatalf("held read: %+v", b3)
	}
	if d := time.Since(at); d > 5*time.Second {
		t.Errorf("the held read was answered %v after the commit", d)
	}
	ack(t, c, "w", b3.Next)

	// Retention: 10 changes; a consumer left behind is told, not skipped.
	behind := b3.Next
	for i := range 12 {
		c.MustQuery(fmt.Sprintf(`put q {n: %d}`, 10+i))
	}
	_, r := readChanges(t, c, "consumer=w&collection=q", 410)
	if r.Code() != "changes_gone" || !strings.Contains(string(r.Body), fmt.Sprintf("consumer w is at position %d, and the oldest change kept is", behind)) {
		t.Errorf("behind retention: %s", r.Body)
	}
	if r, _ := c.Do("POST", "/_changes/ack", map[string]any{"consumer": "w", "position": 1 << 40}, nil); r.Status != 400 {
		t.Errorf("an ack past the head: %d %s", r.Status, r.Body)
	}

	// The ack is durable, and so are the changes kept: after a restart
	// the consumer that was at the head reads nothing new, and the one
	// left behind retention is still told so (changes_restart_test.go).
	fresh, _ := readChanges(t, c, "consumer=v&collection=q", 200)
	ack(t, c, "v", fresh.Next)
	if err := p.Stop(20 * time.Second); err != nil {
		t.Fatal(err)
	}
	_, c = start(t, "--file", file)
	if b, _ := readChanges(t, c, "consumer=v&collection=q", 200); b.Position != fresh.Next || len(b.Changes) != 0 {
		t.Errorf("after a restart, the consumer at the head: %+v", b)
	}
	_, r = readChanges(t, c, "consumer=w&collection=q", 410)
	if !strings.Contains(string(r.Body), fmt.Sprintf("consumer w is at position %d,", behind)) {
		t.Errorf("after a restart, the consumer behind retention: %s", r.Body)
	}
}
