package fenecdb_test

import (
	"encoding/json"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/fenecdb/fenec/sdks/go"
)

func TestBuilderIsImmutable(t *testing.T) {
	db := connect(t, "http://127.0.0.1:1")
	jobs := db.From("jobs").Where("owner", "w1")
	a := jobs.Where("id", 1).OrderDesc("run_at")
	b := jobs.WhereOp("attempts", ">", 2).Limit(3)
	for _, tc := range []struct {
		c    fenecdb.Query
		want string
	}{
		{jobs, "get jobs where owner = $1"},
		{a, "get jobs where owner = $1 and id = $2 order run_at desc"},
		{b, "get jobs where owner = $1 and attempts > $2 limit 3"},
	} {
		st, err := tc.c.RenderRows()
		if err != nil || st.Query != tc.want {
			t.Errorf("got %q, %v; want %q", st.Query, err, tc.want)
		}
	}
}

func TestBuilderErrors(t *testing.T) {
	jobs := connect(t, "http://127.0.0.1:1").From("jobs")
	for _, tc := range []struct {
		name   string
		render func() (fenecdb.Statement, error)
		want   string
	}{
		{"first mistake is kept", func() (fenecdb.Statement, error) {
			return jobs.Where("bad name", 1).Limit(-1).RenderRows()
		}, `field "bad name"`},
		{"D odd", func() (fenecdb.Statement, error) {
			return jobs.RenderUpdate(fenecdb.D("owner"))
		}, "without a value"},
		{"D key not a string", func() (fenecdb.Statement, error) {
			return jobs.RenderUpdate(fenecdb.D(1, 2))
		}, "not a string"},
		{"inc NaN", func() (fenecdb.Statement, error) {
			return jobs.RenderUpdate(fenecdb.D("n", fenecdb.Inc(math.NaN())))
		}, "finite"},
		{"inc in where", func() (fenecdb.Statement, error) {
			return jobs.Where("n", fenecdb.Inc(1)).RenderRows()
		}, "inc"},
		{"returning nothing", func() (fenecdb.Statement, error) {
			return jobs.RenderDelete(fenecdb.Returning())
		}, "empty"},
		{"star among fields", func() (fenecdb.Statement, error) {
			return jobs.Select("id", "*").RenderRows()
		}, `field "*"`},
		{"near Inf", func() (fenecdb.Statement, error) {
			return jobs.Near("at", math.Inf(1), 1).RenderRows()
		}, "finite"},
		{"upsert with an Increment of NaN", func() (fenecdb.Statement, error) {
			return jobs.Upsert(fenecdb.D("n", fenecdb.Inc(math.NaN()))).RenderInsert(fenecdb.D("key", "a"))
		}, "finite"},
		{"if absent on InsertMany with near", func() (fenecdb.Statement, error) {
			return jobs.Near("at", 1, 2).IfAbsent().RenderInsertMany([]fenecdb.Doc{fenecdb.D("key", "a")})
		}, "insert cannot use near"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st, err := tc.render()
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %q, %v; want an error containing %q", st.Query, err, tc.want)
			}
		})
	}
}

func TestNestedDocIsAnOrderedParameter(t *testing.T) {
	jobs := connect(t, "http://127.0.0.1:1").From("jobs")
	st, err := jobs.RenderInsert(fenecdb.D("payload", fenecdb.D("to", "ada", "cc", nil), "attempts", 0))
	if err != nil {
		t.Fatal(err)
	}
	if st.Query != "insert jobs {payload: $1, attempts: $2}" || len(st.Params) != 2 {
		t.Fatalf("got %q %v", st.Query, st.Params)
	}
	b, err := st.Params[0].(fenecdb.Doc).MarshalJSON()
	if err != nil || string(b) != `{"to":"ada","cc":null}` {
		t.Fatalf("got %s, %v", b, err)
	}
}

// TestBuilderRules checks the contract's builder rules (docs/sdks.md) in
// what only Go's types can write: typed nil pointers, time.Time, int64.
func TestBuilderRules(t *testing.T) {
	jobs := connect(t, "http://127.0.0.1:1").From("jobs")
	var noOwner *string
	owner := "w1"
	at := time.Date(2026, 5, 3, 11, 20, 20, 0, time.FixedZone("CEST", 7200))
	for _, tc := range []struct {
		name   string
		render func() (fenecdb.Statement, error)
		query  string
		params string
	}{
		{"nil pointer is null", func() (fenecdb.Statement, error) { return jobs.Where("owner", noOwner).RenderRows() },
			"get jobs where owner is null", `[]`},
		{"pointer is its value", func() (fenecdb.Statement, error) { return jobs.Where("owner", &owner).RenderRows() },
			"get jobs where owner = $1", `["w1"]`},
		{"explicit = nil is a parameter", func() (fenecdb.Statement, error) { return jobs.WhereOp("owner", "=", nil).RenderRows() },
			"get jobs where owner = $1", `[null]`},
		{"select replaces", func() (fenecdb.Statement, error) { return jobs.Select("id").Select("owner").RenderRows() },
			"get jobs select owner", `[]`},
		{"a time is ISO-8601 UTC with ms", func() (fenecdb.Statement, error) {
			return jobs.Where("run_at", at).RenderRows()
		}, "get jobs where run_at = $1", `["2026-05-03T09:20:20.000Z"]`},
		{"int64 exact", func() (fenecdb.Statement, error) { return jobs.Where("id", int64(9007199254740993)).RenderRows() },
			"get jobs where id = $1", `[9007199254740993]`},
		{"times in a list", func() (fenecdb.Statement, error) { return jobs.WhereOp("run_at", "in", []time.Time{at}).RenderRows() },
			"get jobs where run_at in $1", `[["2026-05-03T09:20:20.000Z"]]`},
	} {
		st, err := tc.render()
		got, _ := json.Marshal(st.Params)
		if err != nil || st.Query != tc.query || string(got) != tc.params {
			t.Errorf("%s: got %q %s %v; want %q %s", tc.name, st.Query, got, err, tc.query, tc.params)
		}
	}
	nan := math.NaN()
	for _, tc := range []struct {
		name   string
		render func() (fenecdb.Statement, error)
		want   string
	}{
		{"dotted insert key", func() (fenecdb.Statement, error) { return jobs.RenderInsert(fenecdb.D("payload.to", "x")) }, "identifier"},
		{"dotted patch key", func() (fenecdb.Statement, error) { return jobs.RenderUpdate(fenecdb.D("payload.to", "x")) }, "identifier"},
		{"NaN in where", func() (fenecdb.Statement, error) { return jobs.Where("x", nan).RenderRows() }, "finite"},
		{"Inf in insert", func() (fenecdb.Statement, error) { return jobs.RenderInsert(fenecdb.D("x", math.Inf(1))) }, "finite"},
		{"NaN pointer in update", func() (fenecdb.Statement, error) { return jobs.RenderUpdate(fenecdb.D("x", &nan)) }, "finite"},
		{"NaN in expr", func() (fenecdb.Statement, error) {
			return jobs.RenderUpdate(fenecdb.D("x", fenecdb.Expr("? + 1", nan)))
		}, "finite"},
		{"NaN in a list", func() (fenecdb.Statement, error) { return jobs.WhereOp("x", "in", []float64{1, nan}).RenderRows() }, "finite"},
		{"NaN in a json value", func() (fenecdb.Statement, error) {
			return jobs.RenderInsert(fenecdb.D("payload", map[string]any{"x": nan}))
		}, "finite"},
		{"empty in", func() (fenecdb.Statement, error) { return jobs.WhereOp("id", "in", []int{}).RenderRows() }, "empty"},
		{"empty not in", func() (fenecdb.Statement, error) { return jobs.WhereOp("id", "not in", []int(nil)).RenderRows() }, "empty"},
		{"$n in raw", func() (fenecdb.Statement, error) { return jobs.WhereRaw(fenecdb.Raw("id = $1", 1)).RenderRows() }, "$"},
		{"? count", func() (fenecdb.Statement, error) { return jobs.WhereRaw(fenecdb.Raw("id = ?")).RenderRows() }, "?"},
	} {
		st, err := tc.render()
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: got %q, %v; want an error saying %q", tc.name, st.Query, err, tc.want)
		}
	}
}
