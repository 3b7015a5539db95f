package fenecdb_test

import (
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/fenecdb/fenec/sdks/go"
	"github.com/fenecdb/fenec/sdks/go/internal/fenectest"
)

// changesServer starts a server with a file: on one with none
// (:memory:) a change carries no row (server/changes/hub.go).
func changesServer(t *testing.T) *fenecdb.Client {
	file := filepath.Join(t.TempDir(), "c.db")
	s := fenectest.StartServer(t, "--clock", "manual", "--file", file, "--sync", "always", "--token", "sekret")
	return connect(t, s.URL, fenecdb.WithToken("sekret"))
}

func bodies(t *testing.T, cs []fenecdb.Change) []any {
	t.Helper()
	var out []any
	for _, c := range cs {
		if c.Row == nil {
			out = append(out, nil)
			continue
		}
		var r map[string]any
		if err := json.Unmarshal(c.Row, &r); err != nil {
			t.Fatal(err)
		}
		out = append(out, r["body"])
	}
	return out
}

func TestConsumerReadAck(t *testing.T) {
	db := changesServer(t)
	ctx := context.Background()
	mustQuery(t, db, "create collection msgs (room text, body text)")
	mustQuery(t, db, "create collection other (n int)")
	a := mustQuery(t, db, `insert msgs {room: "lobby", body: "a"}`)
	mustQuery(t, db, `insert other {n: 1}`)
	b := mustQuery(t, db, `set msgs {body: "b"} where body = "a"`)
	c := mustQuery(t, db, `del msgs where body = "b"`)

	k := db.Consumer("mailer", "msgs")
	first, err := k.Read(ctx, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	var got [][2]any
	for _, ch := range first.Changes {
		got = append(got, [2]any{ch.Op, ch.Position})
	}
	want := [][2]any{{"put", a.Seq}, {"put", b.Seq}, {"delete", c.Seq}}
	if !reflect.DeepEqual(got, want) || !reflect.DeepEqual(bodies(t, first.Changes), []any{"a", "b", nil}) || first.Next != c.Seq {
		t.Fatalf("first read: %+v", first)
	}
	again, err := k.Read(ctx, 0, 0)
	if err != nil || !reflect.DeepEqual(again.Changes, first.Changes) {
		t.Fatalf("not acknowledged, read again: %+v %v", again, err)
	}
	if err := k.Ack(ctx, first.Next); err != nil {
		t.Fatal(err)
	}
	if none, err := k.Read(ctx, 0, 0); err != nil || len(none.Changes) != 0 {
		t.Fatalf("after the ack: %+v %v", none, err)
	}

	// A held read; a second reader meanwhile is refused; a write wakes the first.
	held := make(chan fenecdb.ChangeBatch, 1)
	go func() {
		b, err := k.Read(ctx, 0, 10*time.Second)
		if err != nil {
			t.Error(err)
		}
		held <- b
	}()
	var busy error
	for deadline := time.Now().Add(10 * time.Second); busy == nil && time.Now().Before(deadline); {
		// Until the held read is at the server, this one may come first: it answers none.
		_, busy = k.Read(ctx, 0, 0)
	}
	if !errors.Is(busy, &fenecdb.Error{Code: fenecdb.CodeConsumerBusy}) {
		t.Fatalf("a second reader: %v", busy)
	}
	d := mustQuery(t, db, `insert msgs {room: "attic", body: "d"}`)
	select {
	case w := <-held:
		if len(w.Changes) != 1 || w.Changes[0].Position != d.Seq {
			t.Fatalf("woken: %+v", w)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("the held read was not woken")
	}
}

func TestConsumerBatches(t *testing.T) {
	db := changesServer(t)
	ctx := context.Background()
	mustQuery(t, db, "create collection msgs (room text, body text)")
	for _, s := range []string{"1", "2", "3", "4", "5"} {
		mustQuery(t, db, `insert msgs {room: "x", body: $1}`, s)
	}
	k := db.Consumer("w", "msgs")
	var seen []any
	for b, err := range k.Batches(ctx, 2, time.Second) {
		if err != nil {
			t.Fatal(err)
		}
		seen = append(seen, bodies(t, b.Changes)...)
		if len(seen) >= 4 {
			break // the second batch (3, 4) is not acknowledged
		}
	}
	if !reflect.DeepEqual(seen, []any{"1", "2", "3", "4"}) {
		t.Fatalf("seen %v", seen)
	}
	again, err := k.Read(ctx, 0, 0)
	if err != nil || !reflect.DeepEqual(bodies(t, again.Changes), []any{"3", "4", "5"}) {
		t.Fatalf("read again: %+v %v", again, err)
	}
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	n := 0
	for b, err := range k.Batches(cctx, 0, 10*time.Second) {
		n++
		if n == 1 {
			if err != nil || !reflect.DeepEqual(bodies(t, b.Changes), []any{"3", "4", "5"}) {
				t.Fatalf("first batch: %+v %v", b, err)
			}
			// Acknowledged when the next is asked for; that one is held until this write.
			go func() {
				if _, err := db.Query(ctx, `insert msgs {room: "x", body: "6"}`); err != nil {
					t.Error(err)
				}
			}()
			continue
		}
		if n == 2 {
			if err != nil || !reflect.DeepEqual(bodies(t, b.Changes), []any{"6"}) {
				t.Fatalf("second batch: %+v %v", b, err)
			}
			cancel()
			continue
		}
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("after cancel: %+v %v", b, err)
		}
	}
	if n != 3 {
		t.Fatalf("%d batches", n)
	}
}
