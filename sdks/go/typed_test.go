package fenecdb_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/fenecdb/fenec/sdks/go"
)

type typedJob struct {
	ID       int64          `json:"id,omitempty"`
	Payload  map[string]any `json:"payload"`
	RunAt    time.Time      `json:"run_at"`
	Owner    *string        `json:"owner"`
	Attempts int            `json:"attempts"`
	Skipped  string         `json:"-"`
}

// TestInsertStructsRendersAsADoc: a struct is inserted as the document
// its json tags make, in field order: the same statement and parameters
// as the Doc written by hand.
func TestInsertStructsRendersAsADoc(t *testing.T) {
	db := connect(t, "http://127.0.0.1:1")
	at := time.Date(2026, 5, 3, 9, 20, 20, 123_000_000, time.UTC)
	got, err := db.From("jobs").RenderInsert(typedJob{Payload: map[string]any{"to": "ada"}, RunAt: at, Attempts: 2, Skipped: "x"})
	if err != nil {
		t.Fatal(err)
	}
	want, _ := db.From("jobs").RenderInsert(fenecdb.D("payload", map[string]any{"to": "ada"}, "run_at", at, "owner", nil, "attempts", 2))
	gp, _ := json.Marshal(got.Params)
	wp, _ := json.Marshal(want.Params)
	if got.Query != want.Query || !sameJSON(gp, wp) {
		t.Fatalf("a struct rendered %q %s, want %q %s", got.Query, gp, want.Query, wp)
	}
	many, err := db.From("jobs").RenderInsertMany([]map[string]any{{"b": 1, "a": 2}, {"a": 3}})
	if err != nil || many.Query != "insert jobs [{a: $1, b: $2}, {a: $3}]" {
		t.Fatalf("maps rendered %q %v", many.Query, err)
	}
	for _, bad := range []any{42, []int{1}, nil, (*typedJob)(nil)} {
		if _, err := db.From("jobs").RenderInsert(bad); err == nil {
			t.Errorf("Insert(%#v) was rendered", bad)
		}
	}
	if _, err := db.From("jobs").RenderInsert(map[string]any{"payload.to": 1}); err == nil || !strings.Contains(err.Error(), "payload.to") {
		t.Errorf("a key that is not an identifier: %v", err)
	}
}

// TestTypedRows: structs inserted through their json tags read back with
// RowsAs and FirstAs, typed (run_at a time.Time, owner a nil pointer);
// FirstAs of no row is ErrNoRows while First still returns nil, nil.
func TestTypedRows(t *testing.T) {
	db, _ := server(t)
	mustQuery(t, db, jobsSchema)
	ctx := context.Background()
	at := time.Date(2026, 5, 3, 9, 20, 20, 123_456_789, time.FixedZone("east", 3600))
	if _, err := db.From("jobs").Insert(ctx, &typedJob{Payload: map[string]any{"to": "ada"}, RunAt: at, Attempts: 1}); err != nil {
		t.Fatal(err)
	}
	if _, err := db.From("jobs").InsertMany(ctx, []typedJob{{RunAt: at, Attempts: 2}, {RunAt: at, Attempts: 3}}); err != nil {
		t.Fatal(err)
	}
	jobs, err := fenecdb.RowsAs[typedJob](ctx, db.From("jobs").Order("attempts"))
	if err != nil {
		t.Fatal(err)
	}
	if len(jobs) != 3 || jobs[0].ID == 0 || jobs[0].Payload["to"] != "ada" || jobs[0].Owner != nil || jobs[2].Attempts != 3 {
		t.Fatalf("RowsAs: %+v", jobs)
	}
	if !jobs[1].RunAt.Equal(at.Truncate(time.Millisecond)) {
		t.Errorf("run_at read back as %v, want %v", jobs[1].RunAt, at.Truncate(time.Millisecond))
	}
	first, err := fenecdb.FirstAs[typedJob](ctx, db.From("jobs").Where("attempts", 2))
	if err != nil || first.Attempts != 2 || first.ID != jobs[1].ID {
		t.Fatalf("FirstAs: %+v %v", first, err)
	}
	if _, err := fenecdb.FirstAs[typedJob](ctx, db.From("jobs").Where("attempts", 9)); !errors.Is(err, fenecdb.ErrNoRows) {
		t.Errorf("FirstAs of no row: %v, want ErrNoRows", err)
	}
	if row, err := db.From("jobs").Where("attempts", 9).First(ctx); row != nil || err != nil {
		t.Errorf("First of no row: %v %v, want nil, nil as before", row, err)
	}
	asMap, err := fenecdb.FirstAs[map[string]any](ctx, db.From("jobs").Where("attempts", 3).Select("id", "attempts"))
	if err != nil || len(asMap) != 2 || asMap["attempts"] != float64(3) {
		t.Errorf("FirstAs a map: %v %v", asMap, err)
	}
	_, err = fenecdb.RowsAs[struct {
		Attempts string `json:"attempts"`
	}](ctx, db.From("jobs"))
	if err == nil || !strings.Contains(err.Error(), "row 0 of jobs") {
		t.Errorf("rows that do not decode: %v, want an error naming row 0 of jobs", err)
	}
}
