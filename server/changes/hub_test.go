package changes

import (
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/fenecdb/fenec/server/clock"
	"github.com/fenecdb/fenec/server/engine"
	"github.com/fenecdb/fenec/server/fenecql"
	"github.com/fenecdb/fenec/server/store"
)

func openDB(t testing.TB) (*engine.DB, *clock.Manual) {
	t.Helper()
	clk := clock.NewManual()
	db, err := engine.Open(engine.Options{File: filepath.Join(t.TempDir(), "db.sqlite"), Clock: clk, Sync: store.SyncMode{Kind: store.SyncAlways}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db, clk
}

func exec(t testing.TB, db *engine.DB, q string, params ...fenecql.Value) *engine.Result {
	t.Helper()
	r, err := db.Exec(context.Background(), q, params)
	if err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	return r
}

// TestHubTellsEveryPositionOnce: the engine tells every numbered write
// (one that writes only a side record too), so the hub's head follows the
// database's Seq, and the changes kept are the documents written, in
// order, each with its commit's position and the row as written.
func TestHubTellsEveryPositionOnce(t *testing.T) {
	db, _ := openDB(t)
	h := New(db, Options{})
	defer h.Close()
	exec(t, db, `create collection msgs (room text, text text)`)
	exec(t, db, `put msgs [{room: "a", text: "hi"}, {room: "b", text: "yo"}]`)
	if err := h.Ack(context.Background(), "c1", h.Head()); err != nil {
		t.Fatal(err)
	}
	exec(t, db, `del msgs where id = 1`)
	if got, want := h.Head(), db.Seq(); got != want {
		t.Fatalf("head %d, database seq %d", got, want)
	}
	b, err := h.Read(context.Background(), "c2", "msgs", 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(b.Changes) != 3 {
		t.Fatalf("changes %+v, want 3", b.Changes)
	}
	put, del := b.Changes[0], b.Changes[2]
	var row map[string]any
	if err := json.Unmarshal(put.Row, &row); err != nil || row["text"] != "hi" || put.Delete || put.ID != 1 {
		t.Errorf("first change %+v (row %v), want the put of id 1", put, row)
	}
	if !del.Delete || del.ID != 1 || del.Pos != db.Seq() || del.Row != nil {
		t.Errorf("last change %+v, want the delete of id 1 at %d", del, db.Seq())
	}
	if b.Changes[0].Pos >= del.Pos {
		t.Errorf("positions not in commit order: %d then %d", b.Changes[0].Pos, del.Pos)
	}
	if b.Next != db.Seq() {
		t.Errorf("next %d, want the head %d", b.Next, db.Seq())
	}
}

// TestHubReleasesInOrder: two writers may tell their writes out of order;
// a write is released (to consumers) only once every earlier one has been.
func TestHubReleasesInOrder(t *testing.T) {
	db, _ := openDB(t)
	h := New(db, Options{})
	defer h.Close()
	base := h.Head()
	h.written(engine.Write{Colls: []string{"x"}, Seq: base + 2, Changes: []store.Change{{Op: store.OpPut, Coll: "x", ID: 2}}})
	if h.Head() != base {
		t.Fatalf("head moved to %d before write %d was told", h.Head(), base+1)
	}
	h.written(engine.Write{Colls: []string{"x"}, Seq: base + 1, Changes: []store.Change{{Op: store.OpPut, Coll: "x", ID: 1}}})
	if h.Head() != base+2 {
		t.Fatalf("head %d, want %d", h.Head(), base+2)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.kept) != 2 || h.kept[0].changes[0].ID != 1 || h.kept[1].changes[0].ID != 2 {
		t.Fatalf("kept %+v, want ids 1 then 2", h.kept)
	}
}

// TestConsumerReadsOnlyDurable: a consumer is handed a write only once the
// file has it (here, after the interval's sync), and its held read is
// answered then.
func TestConsumerReadsOnlyDurable(t *testing.T) {
	db, err := engine.Open(engine.Options{File: filepath.Join(t.TempDir(), "db.sqlite"), Clock: clock.NewManual(),
		Sync: store.SyncMode{Kind: store.SyncInterval, Interval: 2 * time.Second}})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	h := New(db, Options{})
	defer h.Close()
	exec(t, db, `create collection q (n int)`)
	start := time.Now()
	exec(t, db, `put q {n: 1}`)
	b, err := h.Read(context.Background(), "c", "q", 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(b.Changes) != 0 && time.Since(start) < 2*time.Second {
		t.Fatalf("handed %+v before its sync", b.Changes)
	}
	if b.Next >= db.Seq() {
		t.Fatalf("next %d: an ack would pass the write %d not yet synced", b.Next, db.Seq())
	}
	b, err = h.Read(context.Background(), "c", "q", 0, 10*time.Second)
	if err != nil || len(b.Changes) != 1 || db.Durable() < b.Changes[0].Pos {
		t.Fatalf("held read: %+v %v (durable %d)", b, err, db.Durable())
	}
}

// TestConsumerAtLeastOnce: a read does not move the position; the ack
// does, durably (it survives reopening the file); reads after it go on
// from there, with none skipped.
func TestConsumerAtLeastOnce(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "db.sqlite")
	db, err := engine.Open(engine.Options{File: file, Clock: clock.NewManual()})
	if err != nil {
		t.Fatal(err)
	}
	h := New(db, Options{})
	ctx := context.Background()
	exec(t, db, `create collection q (n int)`)
	for i := range 5 {
		exec(t, db, `put q {n: $1}`, fenecql.Int(int64(i)))
	}
	b1, err := h.Read(ctx, "w", "q", 2, 0)
	if err != nil {
		t.Fatal(err)
	}
	again, _ := h.Read(ctx, "w", "q", 2, 0)
	if len(b1.Changes) != 2 || again.Changes[0].Pos != b1.Changes[0].Pos {
		t.Fatalf("a read without an ack moved on: %+v then %+v", b1.Changes, again.Changes)
	}
	if err := h.Ack(ctx, "w", b1.Next); err != nil {
		t.Fatal(err)
	}
	b2, _ := h.Read(ctx, "w", "q", 10, 0)
	if len(b2.Changes) != 3 || b2.Changes[0].Pos != b1.Changes[1].Pos+1 {
		t.Fatalf("after the ack: %+v, want the 3 writes after %d", b2.Changes, b1.Next)
	}
	h.Close()
	db.Close()

	db, err = engine.Open(engine.Options{File: file, Clock: clock.NewManual()})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	h = New(db, Options{})
	defer h.Close()
	if pos, ok := h.Position("w"); !ok || pos != b1.Next {
		t.Fatalf("after reopening the position is %d (%v), want %d", pos, ok, b1.Next)
	}
	// The writes were made before any consumer existed (the first ack),
	// so none was kept across the restart: the consumer behind is told,
	// not skipped (journal_test.go has them kept).
	_, err = h.Read(ctx, "w", "q", 10, 0)
	var gone *GoneError
	if !errors.As(err, &gone) || gone.Pos != b1.Next || gone.Oldest != db.Seq()+1 {
		t.Fatalf("read after a restart: %v, want gone at %d, oldest %d", err, b1.Next, db.Seq()+1)
	}
}

// TestConsumerRetention: past --changes-retain the oldest changes go, and
// a consumer whose position they were is told 410-gone with both
// positions; one within retention reads on.
func TestConsumerRetention(t *testing.T) {
	db, _ := openDB(t)
	h := New(db, Options{Retain: 3})
	defer h.Close()
	ctx := context.Background()
	exec(t, db, `create collection q (n int)`)
	slowAt := h.Head()
	if err := h.Ack(ctx, "slow", slowAt); err != nil {
		t.Fatal(err)
	}
	for i := range 6 {
		exec(t, db, `put q {n: $1}`, fenecql.Int(int64(i)))
	}
	_, err := h.Read(ctx, "slow", "q", 0, 0)
	var gone *GoneError
	if !errors.As(err, &gone) || gone.Pos != slowAt || gone.Oldest != h.Oldest() {
		t.Fatalf("read: %v, want gone at %d (oldest %d)", err, slowAt, h.Oldest())
	}
	b, err := h.Read(ctx, "fresh", "q", 0, 0)
	if err != nil || len(b.Changes) != 3 {
		t.Fatalf("a new consumer read %v, %v: want the 3 kept", b, err)
	}
}

// TestConsumerWaitAndBusy: a read held by its wait is answered by the
// commit that brings a change; a second read under the same name while
// the first runs is refused.
func TestConsumerWaitAndBusy(t *testing.T) {
	db, _ := openDB(t)
	h := New(db, Options{})
	defer h.Close()
	ctx := context.Background()
	exec(t, db, `create collection q (n int)`)
	if err := h.Ack(ctx, "w", h.Head()); err != nil {
		t.Fatal(err)
	}
	got := make(chan *Batch, 1)
	go func() {
		b, err := h.Read(ctx, "w", "q", 0, 20*time.Second)
		if err != nil {
			t.Error(err)
		}
		got <- b
	}()
	deadline := time.Now().Add(10 * time.Second)
	for {
		h.mu.Lock()
		busy := h.busy["w"]
		h.mu.Unlock()
		if busy {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the first read never started")
		}
		time.Sleep(time.Millisecond)
	}
	if _, err := h.Read(ctx, "w", "q", 0, 0); !errors.Is(err, ErrBusy) {
		t.Fatalf("a second reader under the name: %v, want busy", err)
	}
	start := time.Now()
	exec(t, db, `put q {n: 7}`)
	b := <-got
	if len(b.Changes) != 1 || time.Since(start) > 5*time.Second {
		t.Fatalf("held read answered %+v after %v", b, time.Since(start))
	}
}

// events collects a live query's events.
type events struct {
	mu  sync.Mutex
	got []Event
	ch  chan struct{}
}

func newEvents() *events { return &events{ch: make(chan struct{}, 1)} }

func (e *events) send(ev Event) error {
	e.mu.Lock()
	e.got = append(e.got, ev)
	e.mu.Unlock()
	select {
	case e.ch <- struct{}{}:
	default:
	}
	return nil
}

// waitFor waits until n events (heartbeats left out) have come.
func (e *events) waitFor(t *testing.T, n int) []Event {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		e.mu.Lock()
		var out []Event
		for _, ev := range e.got {
			if !ev.Comment {
				out = append(out, ev)
			}
		}
		e.mu.Unlock()
		if len(out) >= n {
			return out
		}
		select {
		case <-e.ch:
		case <-time.After(time.Until(deadline)):
			t.Fatalf("%d events came, want %d: %v", len(out), n, out)
		}
	}
}

func parseGet(t *testing.T, q string) *fenecql.Get {
	st, err := fenecql.Parse(q)
	if err != nil {
		t.Fatal(err)
	}
	return st.(*fenecql.Get)
}

// TestLiveQuery: first the rows, then an insert for a row that comes to
// match, an update for one that changes while matching, a delete for one
// that leaves (by its where, or deleted); writes to other rows send
// nothing.
func TestLiveQuery(t *testing.T) {
	db, _ := openDB(t)
	h := New(db, Options{})
	defer h.Close()
	exec(t, db, `create collection msgs (room text, text text)`)
	exec(t, db, `put msgs {room: "a", text: "one"}`)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ev := newEvents()
	done := make(chan error, 1)
	go func() {
		done <- h.Live(ctx, Query{Get: parseGet(t, `get msgs where room = $1 select text`), Params: []fenecql.Value{fenecql.Text("a")}}, 0, false, ev.send)
	}()
	got := ev.waitFor(t, 1)
	if got[0].Name != "rows" || string(got[0].Data) != `{"position":2,"rows":[{"id":1,"text":"one"}],"last":true}` {
		t.Fatalf("first event %s %s", got[0].Name, got[0].Data)
	}
	// Each write's event is waited for before the next: an event carries
	// the row as it is when the event is made.
	want := []string{}
	step := func(q, event string) {
		t.Helper()
		exec(t, db, q)
		if event == "" {
			return
		}
		want = append(want, event)
		got := ev.waitFor(t, 1+len(want))[len(want)]
		if g := got.Name + " " + string(got.Data); g != event || got.Pos == 0 {
			t.Errorf("event %d: %s (id %d), want %s", len(want), g, got.Pos, event)
		}
	}
	step(`put msgs {room: "b", text: "elsewhere"}`, "")
	step(`put msgs {room: "a", text: "two"}`, `insert {"position":4,"row":{"id":3,"text":"two"}}`)
	step(`set msgs {text: "one!"} where id = 1`, `update {"position":5,"row":{"id":1,"text":"one!"}}`)
	step(`set msgs {room: "a"} where id = 2`, `insert {"position":6,"row":{"id":2,"text":"elsewhere"}}`)
	step(`set msgs {room: "c"} where id = 3`, `delete {"position":7,"id":3}`)
	step(`del msgs where id = 1`, `delete {"position":8,"id":1}`)
	h.Close()
	if err := <-done; !IsEnded(err) {
		t.Fatalf("after Close: %v", err)
	}
	last := ev.waitFor(t, 7)[6]
	if last.Name != "closing" || string(last.Data) != `{"position":8,"reason":"shutdown"}` {
		t.Errorf("last event %s %s", last.Name, last.Data)
	}
}

// TestLiveQueryBehind: a subscriber that does not keep up is dropped with
// a closing event, and the writer never waits for it.
func TestLiveQueryBehind(t *testing.T) {
	db, _ := openDB(t)
	m := NewMetrics(prometheus.NewRegistry())
	h := New(db, Options{Buffer: 2, Metrics: m})
	defer h.Close()
	exec(t, db, `create collection q (n int)`)
	release := make(chan struct{})
	var evs []Event
	var mu sync.Mutex
	first := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		done <- h.Live(context.Background(), Query{Get: parseGet(t, `get q`)}, 0, false, func(e Event) error {
			mu.Lock()
			evs = append(evs, e)
			n := len(evs)
			mu.Unlock()
			if n == 1 {
				close(first)
				<-release // a client that stops reading
			}
			return nil
		})
	}()
	// The writes come once the client has stopped reading, at its first
	// event: put before the live query began, they would be its first
	// rows, and it would never fall behind (nor end).
	<-first
	for i := range 10 {
		exec(t, db, `put q {n: $1}`, fenecql.Int(int64(i)))
	}
	close(release)
	if err := <-done; !IsEnded(err) {
		t.Fatalf("live query ended with %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	last := evs[len(evs)-1]
	var data struct{ Reason string }
	// Its position is the last commit it was sent: it resumes from
	// there, and misses none of the writes it fell behind on.
	if err := json.Unmarshal(last.Data, &data); last.Name != "closing" || err != nil || data.Reason != "behind" || last.Pos != evs[len(evs)-2].Pos {
		t.Errorf("last event %s %s, want closing behind", last.Name, last.Data)
	}
	if got := testutil.ToFloat64(m.dropped); got != 1 {
		t.Errorf("dropped %v, want 1", got)
	}
	if got := testutil.ToFloat64(m.subscribers); got != 0 {
		t.Errorf("subscribers %v after the drop, want 0", got)
	}
}

// TestHubMovesWithTheDatabase: an undo moves the head back, dropping what
// was kept past it (the next write takes its number again); a snapshot
// told without its writes moves it on, and what came before is no longer
// kept, so a consumer behind is told rather than skipped; the byte bound
// drops the oldest rows.
func TestHubMovesWithTheDatabase(t *testing.T) {
	db, _ := openDB(t)
	h := New(db, Options{RetainBytes: 40})
	defer h.Close()
	base := h.Head()
	put := func(seq uint64, id int64, body string) {
		h.written(engine.Write{Colls: []string{"x"}, Seq: seq, Changes: []store.Change{{Op: store.OpPut, Coll: "x", ID: id, Body: []byte(body)}}})
	}
	put(base+1, 1, `{"id":1,"v":"aaaaaaaaaaaaaaaa"}`) // 32 bytes
	put(base+2, 2, `{"id":2}`)
	if h.Oldest() != base+1 {
		t.Fatalf("oldest %d, want %d: 40 bytes hold both", h.Oldest(), base+1)
	}
	put(base+3, 3, `{"id":3,"v":"bbbbbbbbbbbbbbbb"}`)
	if h.Oldest() != base+2 {
		t.Fatalf("oldest %d past the byte bound, want %d", h.Oldest(), base+2)
	}
	// An undo back to base+2 (the database's Seq is still base: these
	// writes were told, not made).
	h.mu.Lock()
	h.moveTo(base + 2)
	h.mu.Unlock()
	put(base+3, 4, `{"id":4}`)
	// (Read would hand out none of these: the database never made them,
	// so they are not durable. The kept commits are looked at.)
	h.mu.Lock()
	var ids []int64
	for _, c := range h.kept {
		for _, x := range c.changes {
			ids = append(ids, x.ID)
		}
	}
	last := h.kept[len(h.kept)-1].pos
	h.mu.Unlock()
	if !slices.Equal(ids, []int64{2, 4}) || last != base+3 {
		t.Fatalf("after the undo: ids %v (last at %d), want 2 and 4 (at %d)", ids, last, base+3)
	}
	// A snapshot jumps on: a client at base+3 is behind what is kept.
	h.mu.Lock()
	h.moveTo(base + 100)
	h.mu.Unlock()
	put(base+101, 5, `{"id":5}`)
	if h.Head() != base+101 {
		t.Fatalf("head %d after the snapshot, want %d", h.Head(), base+101)
	}
	h.mu.Lock()
	_, kept := h.touchedSince("x", base+3)
	h.mu.Unlock()
	if kept || h.Oldest() != base+101 {
		t.Fatalf("after the snapshot: base+3 kept %v, oldest %d, want not kept, %d", kept, h.Oldest(), base+101)
	}
}

// TestConsumerReadsWholeCommits: a limit never cuts a commit in two — its
// Next would stop short of changes it handed out, and an ack of it would
// never pass them. A commit that fits waits for the next read; one larger
// than the limit comes alone and whole.
func TestConsumerReadsWholeCommits(t *testing.T) {
	db, _ := openDB(t)
	h := New(db, Options{})
	defer h.Close()
	ctx := context.Background()
	exec(t, db, `create collection m (t text)`)
	exec(t, db, `insert m [{t: "a"}, {t: "b"}]`) // one commit, two changes
	exec(t, db, `put m {t: "c"}`)
	exec(t, db, `insert m [{t: "d"}, {t: "e"}]`)

	var got []string
	for reads := 0; reads < 10; reads++ {
		b, err := h.Read(ctx, "k", "m", 1, 0)
		if err != nil {
			t.Fatal(err)
		}
		if len(b.Changes) == 0 {
			break
		}
		for _, c := range b.Changes {
			if c.Pos > b.Next {
				t.Fatalf("read %d: a change at %d past the batch's next %d: an ack of next would never pass it", reads, c.Pos, b.Next)
			}
			var row struct{ T string }
			if err := json.Unmarshal(c.Row, &row); err != nil {
				t.Fatal(err)
			}
			got = append(got, row.T)
		}
		if err := h.Ack(ctx, "k", b.Next); err != nil {
			t.Fatal(err)
		}
	}
	if want := []string{"a", "b", "c", "d", "e"}; !slices.Equal(got, want) {
		t.Fatalf("read %v with limit 1, want %v: every change once, in order", got, want)
	}
	// Two commits of one and two changes, limit 2: the second waits.
	exec(t, db, `put m {t: "f"}`)
	exec(t, db, `insert m [{t: "g"}, {t: "h"}]`)
	b, err := h.Read(ctx, "k", "m", 2, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(b.Changes) != 1 {
		t.Fatalf("limit 2 over commits of 1 and 2 changes: %d changes, want the first commit's 1", len(b.Changes))
	}
}
