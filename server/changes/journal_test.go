package changes

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/fenecdb/fenec/server/clock"
	"github.com/fenecdb/fenec/server/engine"
	"github.com/fenecdb/fenec/server/fenecql"
)

// TestJournalAcrossReopen: once a consumer exists, the changes are kept
// across reopening the file, rows and deletes and the order, up to
// Retain: the write past the bound deletes the oldest record, so the
// records held stay within it, and a consumer behind them is told.
func TestJournalAcrossReopen(t *testing.T) {
	file := filepath.Join(t.TempDir(), "db.sqlite")
	open := func() (*engine.DB, *Hub) {
		db, err := engine.Open(engine.Options{File: file, Clock: clock.NewManual()})
		if err != nil {
			t.Fatal(err)
		}
		return db, New(db, Options{Retain: 6})
	}
	ctx := context.Background()
	db, h := open()
	exec(t, db, `create collection q (n int)`)
	exec(t, db, `create collection r (n int)`)
	exec(t, db, `put q {n: 0}`)
	if err := h.Ack(ctx, "early", h.Head()); err != nil {
		t.Fatal(err)
	}
	for i := range 8 {
		exec(t, db, `put q {n: $1}`, fenecql.Int(int64(i+1)))
	}
	if err := h.Ack(ctx, "late", h.Head()); err != nil {
		t.Fatal(err)
	}
	exec(t, db, `del q where n = 8`)
	exec(t, db, `put r {n: 9}`)
	exec(t, db, `put q {n: 10}`)
	before, err := h.Read(ctx, "late", "", 100, 0)
	if err != nil || len(before.Changes) != 3 {
		t.Fatalf("before: %+v %v", before, err)
	}
	if n, _ := h.Records(); n != 6 {
		t.Fatalf("%d records held, want 6 (Retain)", n)
	}
	h.Close()
	db.Close()

	db, h = open()
	defer db.Close()
	defer h.Close()
	after, err := h.Read(ctx, "late", "", 100, 0)
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprintf("%+v", after) != fmt.Sprintf("%+v", before) {
		t.Fatalf("after reopening:\n%+v\nbefore:\n%+v", after, before)
	}
	if after.Changes[0].Row != nil || !after.Changes[0].Delete || after.Changes[1].Coll != "r" || string(after.Changes[2].Row) == "" {
		t.Fatalf("changes: %+v", after.Changes)
	}
	// The six kept: the three after late's ack (its own position between)
	// and the last three puts before it.
	want := after.Changes[0].Pos - 4
	_, err = h.Read(ctx, "early", "", 100, 0)
	var gone *GoneError
	if !errors.As(err, &gone) || gone.Oldest != want {
		t.Fatalf("the consumer behind Retain: %v, want gone with oldest %d", err, want)
	}
	if n := db.MetaLen(); n != 2+6 {
		t.Fatalf("%d side records, want 2 consumers and 6 changes", n)
	}
}

// TestJournalChainBreaks: on open, only the records that name the one
// before them are taken; a record whose from names a position before the
// record just older than it (a stale one) vouches for nothing at or
// before that record, so the oldest kept is after it — never a hole.
func TestJournalChainBreaks(t *testing.T) {
	db, err := engine.Open(engine.Options{File: filepath.Join(t.TempDir(), "db.sqlite"), Clock: clock.NewManual()})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	put := func(pos, from uint64) {
		body := binary.AppendVarint(binary.AppendUvarint(nil, from), 0)
		_, err := db.Run(context.Background(), nil, engine.RunOptions{Meta: func([]*engine.Result) map[string]engine.Meta {
			return map[string]engine.Meta{recordKey(pos): {Body: body}}
		}})
		if err != nil {
			t.Fatal(err)
		}
	}
	put(1, 0)
	put(2, 1)
	put(3, 0) // stale: names 0, though 2 is there
	h := New(db, Options{})
	defer h.Close()
	if h.Oldest() != 3 {
		t.Fatalf("oldest kept %d, want 3: records 1 and 2 are not chained to 3", h.Oldest())
	}
	if n, _ := h.Records(); n != 1 {
		t.Fatalf("%d records taken, want 1", n)
	}
}
