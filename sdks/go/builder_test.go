package fenecdb_test

import (
	"math"
	"strings"
	"testing"

	"github.com/fenecdb/fenec/sdks/go"
)

func TestBuilderIsImmutable(t *testing.T) {
	db := connect(t, "http://127.0.0.1:1")
	jobs := db.From("jobs").Where("owner", "w1")
	a := jobs.Where("id", 1).OrderDesc("run_at")
	b := jobs.WhereOp("attempts", ">", 2).Limit(3)
	for _, tc := range []struct {
		c    fenecdb.Collection
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
