package engine

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/fenecdb/fenec/server/fenecql"
	"github.com/fenecdb/fenec/server/store"
)

// idsChild writes up to the last id and then ends as the test asks:
// "term" closes the database as a SIGTERM'd server does, "kill" dies by
// SIGKILL with the store still open.
func idsChild(file, how string) {
	db, err := Open(Options{File: file, Sync: store.SyncMode{Kind: store.SyncAlways}})
	if err != nil {
		fmt.Println("open:", err)
		os.Exit(1)
	}
	ctx := context.Background()
	for _, q := range []string{
		`create collection c (s text)`,
		fmt.Sprintf(`put c {id: %d, s: "last"}`, int64(MaxID)),
		fmt.Sprintf(`put c {id: %d, s: "gone"}`, int64(MaxID)-1),
		fmt.Sprintf(`del c where id = %d`, int64(MaxID)-1),
	} {
		if _, err := db.Exec(ctx, q, nil); err != nil {
			fmt.Println(q, err)
			os.Exit(1)
		}
	}
	if _, err := db.Exec(ctx, `put c {s: "x"}`, nil); fenecql.CodeOf(err) != fenecql.CodeTaken {
		fmt.Println("put past the last id:", err)
		os.Exit(1)
	}
	fmt.Println("ok")
	if how == "kill" {
		syscall.Kill(os.Getpid(), syscall.SIGKILL)
	}
	if err := db.Close(); err != nil {
		fmt.Println("close:", err)
		os.Exit(1)
	}
}

// TestIDRange: an id outside 1..MaxID is refused, and a put that would
// take the id past MaxID is refused rather than wrapped round; nothing of
// a refused put is written.
func TestIDRange(t *testing.T) {
	db, _ := openMem(t)
	mustExec(t, db, `create collection c (s text)`)
	for _, id := range []string{"0", "-1", "9007199254740992", "9223372036854775807", "-9223372036854775808", "1.5", `"7"`} {
		_, err := db.Exec(context.Background(), `put c {id: `+id+`, s: "x"}`, nil)
		if fenecql.CodeOf(err) != fenecql.CodeInvalid || !strings.Contains(err.Error(), "from 1 to 9007199254740991") {
			t.Errorf("id %s: %v, want bad_request naming the range", id, err)
		}
	}
	mustExec(t, db, `put c {id: 9007199254740991, s: "last"}`)
	for _, q := range []string{`put c {s: "x"}`, `insert c [{id: 3, s: "y"}, {s: "x"}]`} {
		_, err := db.Exec(context.Background(), q, nil)
		if fenecql.CodeOf(err) != fenecql.CodeTaken || !strings.Contains(err.Error(), "no new id left") {
			t.Fatalf("%s: %v, want conflict: no new id left", q, err)
		}
	}
	if got := answer(mustExec(t, db, `get c select id, s`)); got != `[{"id":9007199254740991,"s":"last"}]` {
		t.Fatalf("refused puts wrote: %s", got)
	}
	// An id below the last is still free to give.
	mustExec(t, db, `put c {id: 5, s: "five"}`)
	mustExec(t, db, `del c where id = 9007199254740991`)
	if _, err := db.Exec(context.Background(), `put c {s: "x"}`, nil); fenecql.CodeOf(err) != fenecql.CodeTaken {
		t.Fatalf("an id is never given twice, even after a del: %v", err)
	}
}

// TestIDRangeRestart: a database written up to the last id opens again
// after a clean close (SIGTERM) and after SIGKILL, and still refuses a
// new id; a file holding an id past MaxID (written before the range was
// enforced) opens too, and new ids are refused rather than wrapped.
func TestIDRangeRestart(t *testing.T) {
	for _, how := range []string{"term", "kill"} {
		t.Run(how, func(t *testing.T) {
			file := filepath.Join(t.TempDir(), "ids.db")
			cmd := exec.Command(os.Args[0], "-test.run=^$")
			cmd.Env = append(os.Environ(), "FENEC_IDS_CHILD="+how+":"+file)
			out, err := cmd.Output()
			if !strings.HasPrefix(string(out), "ok") {
				t.Fatalf("child: %v %s", err, out)
			}
			db, err := Open(Options{File: file})
			if err != nil {
				t.Fatalf("reopen after %s: %v", how, err)
			}
			defer db.Close()
			if got := answer(mustExec(t, db, `get c select id, s`)); got != `[{"id":9007199254740991,"s":"last"}]` {
				t.Fatalf("after %s: %s", how, got)
			}
			if _, err := db.Exec(context.Background(), `put c {s: "x"}`, nil); fenecql.CodeOf(err) != fenecql.CodeTaken {
				t.Fatalf("after %s, a new id: %v", how, err)
			}
		})
	}
	t.Run("old file", func(t *testing.T) {
		file := oldFile(t, []store.Change{
			{Op: store.OpCreate, Coll: "c", ID: 1, Body: encodeSchema([]Field{{Name: "s", Type: fenecql.TypeText}})},
			{Op: store.OpPut, Coll: "c", ID: 1<<63 - 1, Body: []byte(`{"id":9223372036854775807,"s":"max"}`)},
			// What the wrap-round wrote before ids were held to a range.
			{Op: store.OpPut, Coll: "c", ID: -1 << 63, Body: []byte(`{"id":-9223372036854775808,"s":"wrapped"}`)},
		})
		for round := 0; round < 2; round++ {
			db, err := Open(Options{File: file})
			if err != nil {
				t.Fatalf("round %d: %v", round, err)
			}
			if _, err := db.Exec(context.Background(), `put c {s: "x"}`, nil); fenecql.CodeOf(err) != fenecql.CodeTaken {
				t.Fatalf("round %d: a new id past the highest: %v", round, err)
			}
			if got := answer(mustExec(t, db, `get c select id`)); got != `[{"id":-9223372036854775808},{"id":9223372036854775807}]` {
				t.Fatalf("round %d: %s", round, got)
			}
			db.Close()
		}
	})
}

// TestTimestampRange: a timestamp is held to the years 0000..9999 on the
// way in — as text, as epoch ms, as a parameter, as an arithmetic result —
// so every timestamp answered can be written back and compared.
func TestTimestampRange(t *testing.T) {
	db, _ := openMem(t)
	mustExec(t, db, `create collection ev (at timestamp @sorted, j json)`)
	refused := []struct {
		q      string
		params []any
	}{
		{`put ev {at: "9999-12-31T23:59:59-01:00"}`, nil},
		{`put ev {at: "0000-01-01T00:00:00+01:00"}`, nil},
		{`put ev {at: 253402300800000}`, nil},
		{`put ev {at: -62167219200001}`, nil},
		{`put ev {at: $1}`, []any{int64(253402300800000)}},
		{`put ev {at: $1}`, []any{"9999-12-31T23:59:59-00:01"}},
		{`put ev {at: now() + 9000000000000000}`, nil},
		{`put ev {at: now() - 9000000000000000}`, nil},
		{`put ev {at: 9000000000000000 + now()}`, nil},
		{`put ev {at: bucket(now() - 62167219200000 - 1780000000000, 86400000000)}`, nil},
		{`put ev {j: now() + 9000000000000000}`, nil},
		{`get ev where at < now() + 9000000000000000`, nil},
	}
	for _, r := range refused {
		_, err := db.Exec(context.Background(), r.q, vals(r.params...))
		if fenecql.CodeOf(err) != fenecql.CodeInvalid || !strings.Contains(err.Error(), "0000-01-01T00:00:00.000Z to 9999-12-31T23:59:59.999Z") {
			t.Errorf("%s %v: %v, want 400 naming the range", r.q, r.params, err)
		}
	}
	if got := answer(mustExec(t, db, `get ev count`)); got != `[{"count":0}]` {
		t.Fatalf("refused timestamps were stored: %s", got)
	}
	// The ends of the range go in, come out, and go back in.
	mustExec(t, db, `put ev [{at: "9999-12-31T23:59:59.999Z"}, {at: $1}]`, int64(-62167219200000))
	got := answer(mustExec(t, db, `get ev select at`))
	if got != `[{"at":"9999-12-31T23:59:59.999Z"},{"at":"0000-01-01T00:00:00.000Z"}]` {
		t.Fatalf("the ends of the range: %s", got)
	}
	for _, s := range []string{"9999-12-31T23:59:59.999Z", "0000-01-01T00:00:00.000Z"} {
		mustExec(t, db, `put ev {at: $1}`, s)
		if got := answer(mustExec(t, db, `get ev where at = $1 count`, s)); got != `[{"count":2}]` {
			t.Errorf("%s written back and compared: %s", s, got)
		}
	}
}

// TestOldFileTimestampsLoad: a file holding timestamps past the years
// 0000..9999, which a server before the range stored, still opens, and
// they read as they were.
func TestOldFileTimestampsLoad(t *testing.T) {
	file := oldFile(t, []store.Change{
		{Op: store.OpCreate, Coll: "ev", ID: 1, Body: encodeSchema([]Field{{Name: "at", Type: fenecql.TypeTimestamp}})},
		{Op: store.OpPut, Coll: "ev", ID: 1, Body: []byte(`{"id":1,"at":"10000-02-29T00:00:00.000Z"}`)},
		{Op: store.OpPut, Coll: "ev", ID: 2, Body: []byte(`{"id":2,"at":"-0001-12-31T23:59:59.999Z"}`)},
		{Op: store.OpPut, Coll: "ev", ID: 3, Body: []byte(`{"id":3,"at":"2026-05-03T09:20:00.000Z"}`)},
	})
	db, err := Open(Options{File: file})
	if err != nil {
		t.Fatalf("a file with timestamps past the range: %v", err)
	}
	defer db.Close()
	got := answer(mustExec(t, db, `get ev select at`))
	if got != `[{"at":"10000-02-29T00:00:00.000Z"},{"at":"-0001-12-31T23:59:59.999Z"},{"at":"2026-05-03T09:20:00.000Z"}]` {
		t.Fatalf("%s", got)
	}
	for _, s := range []string{"2026-05-03T09:20:00.000Z", "10000-02-30T00:00:00.000Z", "x-01-01T00:00:00.000Z", "-", ""} {
		if ms, ok := fenecql.ParseStoredTime(s); ok != (s == "2026-05-03T09:20:00.000Z") || ok && ms != 1777800000000 {
			t.Errorf("ParseStoredTime(%q) = %d, %v", s, ms, ok)
		}
	}
}

// oldFile writes changes straight to a new store file, as a server before
// today's checks could have, and returns its path.
func oldFile(t *testing.T, changes []store.Change) string {
	t.Helper()
	file := filepath.Join(t.TempDir(), "old.db")
	st, err := store.Open(file, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Load(func(store.Change) error { return nil }); err != nil {
		t.Fatal(err)
	}
	if err := st.Commit(1, changes)(); err != nil {
		t.Fatal(err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	return file
}
