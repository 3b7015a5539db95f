package engine

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/fenecdb/fenec/server/store"
	_ "modernc.org/sqlite"
)

// fillForLoad writes a file of two collections with more documents than a
// few of the loader's batches, changed after they were put (sets, deletes
// in the middle of batches, a dropped collection between them, a side
// record), and returns the queries whose answers the reopened file must
// repeat, with those answers.
func fillForLoad(t *testing.T, file string) (queries, want []string) {
	t.Helper()
	db, err := Open(Options{File: file, Sync: store.SyncMode{Kind: store.SyncOff}})
	if err != nil {
		t.Fatal(err)
	}
	mustExec(t, db, jobsSchema)
	mustExec(t, db, `create collection gone (a int)`)
	mustExec(t, db, `create collection rides (pickup geo @geo, who text @unique, n int @hash)`)
	const n = 5*loadBatchRows + 17
	var jobs, rides strings.Builder
	for i := range n {
		if i > 0 {
			jobs.WriteByte(',')
			rides.WriteByte(',')
		}
		fmt.Fprintf(&jobs, `{payload: {"to": "u%d", "n": [%d, 2.5]}, run_at: now() + %d, attempts: %d}`, i, i, (i*7919)%n, i%3)
		fmt.Fprintf(&rides, `{pickup: [%d.5, %d.25], who: "w%d", n: %d}`, i%90, i%45, i, i%5)
	}
	mustExec(t, db, `put jobs [`+jobs.String()+`]`)
	mustExec(t, db, `put gone {a: 1}`)
	mustExec(t, db, `put rides [`+rides.String()+`]`)
	mustExec(t, db, `set jobs {owner: "w1", attempts: attempts + 1} where id % 5 = 0`)
	mustExec(t, db, `del jobs where id % 7 = 3`)
	mustExec(t, db, `del rides where id > 600 and id < 900`)
	mustExec(t, db, `drop collection gone`)
	queries = []string{
		`get jobs order id`, `get jobs select id order run_at desc`, `get jobs count`,
		`get rides order id`, `get rides select id where who = "w1000"`, `get rides select id where n = 3`,
		`get rides select id order distance(pickup, [10.5, 5.25]) limit 20`,
	}
	for _, q := range queries {
		want = append(want, answer(mustExec(t, db, q)))
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	return queries, want
}

// TestLoadRebuildsInOrder: a file of many batches of documents opens to
// the same answers, through every index (load.go decodes on several
// goroutines and sets in the store's order).
func TestLoadRebuildsInOrder(t *testing.T) {
	file := filepath.Join(t.TempDir(), "f.db")
	queries, want := fillForLoad(t, file)
	for range 3 {
		db, err := Open(Options{File: file})
		if err != nil {
			t.Fatal(err)
		}
		for i, q := range queries {
			if got := answer(mustExec(t, db, q)); got != want[i] {
				t.Errorf("%s after reopen:\n got %.300s\nwant %.300s", q, got, want[i])
			}
		}
		if err := db.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// TestLoadBadDocument: a document that does not decode, in the middle of
// the load's batches, fails the open with the error a load one row at a
// time gave, and leaves no goroutine of the load running.
func TestLoadBadDocument(t *testing.T) {
	file := filepath.Join(t.TempDir(), "f.db")
	fillForLoad(t, file)
	conn, err := sql.Open("sqlite", file)
	if err != nil {
		t.Fatal(err)
	}
	res, err := conn.Exec(`UPDATE docs SET body = '{"id": 700, "nope": 1}' WHERE coll = 'jobs' AND id = 700`)
	if err != nil {
		t.Fatal(err)
	}
	if n, _ := res.RowsAffected(); n != 1 {
		t.Fatalf("%d rows changed, want 1", n)
	}
	if err := conn.Close(); err != nil {
		t.Fatal(err)
	}
	before := runtime.NumGoroutine()
	db, err := Open(Options{File: file})
	if err == nil {
		db.Close()
		t.Fatal("the file opened with a bad document")
	}
	if want := "bad document in jobs: no field nope"; !strings.Contains(err.Error(), want) {
		t.Errorf("open: %v, want it to say %q", err, want)
	}
	// The decoders and the applier return once the load has; wait for it
	// with a deadline rather than a fixed sleep.
	for deadline := time.Now().Add(10 * time.Second); runtime.NumGoroutine() > before; {
		if time.Now().After(deadline) {
			t.Fatalf("%d goroutines after the failed open, %d before", runtime.NumGoroutine(), before)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// loadQueries are the queries whose answers TestLoadReplaysTheLog compares.
var loadQueries = []string{`get jobs order id`, `get jobs select id order run_at desc`, `get notes order id`}

// loadChild is the writer TestLoadReplaysTheLog stops without closing:
// single writes, each its own unit in the log — puts, sets, deletes,
// side records with them — then the answers of loadQueries and the side
// records on stdout as JSON, then an exit with the file not closed, so
// that what its folds had not reached is replayed from the log.
func loadChild(file string) {
	db, err := Open(Options{File: file, Sync: store.SyncMode{Kind: store.SyncAlways}})
	if err != nil {
		fmt.Println("open:", err)
		os.Exit(1)
	}
	ctx := context.Background()
	must := func(q string, meta map[string]Meta) {
		ps, err := Parse([]Statement{{Query: q}})
		if err == nil {
			_, err = db.Run(ctx, ps, RunOptions{Meta: func([]*Result) map[string]Meta { return meta }})
		}
		if err != nil {
			fmt.Println(q+":", err)
			os.Exit(1)
		}
	}
	must(jobsSchema, nil)
	must(`create collection notes (s text @hash)`, nil)
	for i := range 3 * loadBatchRows {
		must(fmt.Sprintf(`put jobs {payload: {"n": %d}, run_at: %d, attempts: 0}`, i, (i*7919)%1000), nil)
		switch i % 4 {
		case 1:
			must(fmt.Sprintf(`del jobs where id = %d`, i/2+1), map[string]Meta{fmt.Sprintf("k%d", i): {Body: []byte(fmt.Sprint(i)), Expires: 1 << 50}})
		case 2:
			must(fmt.Sprintf(`set jobs {attempts: attempts + 1, owner: "w"} where id = %d`, i), nil)
		case 3:
			must(fmt.Sprintf(`put notes {s: "n%d"}`, i%5), map[string]Meta{fmt.Sprintf("k%d", i-2): {Body: []byte("again"), Expires: 1 << 50}})
		}
	}
	out := map[string]string{}
	for _, q := range loadQueries {
		r, err := db.Exec(ctx, q, nil)
		if err != nil {
			fmt.Println(q+":", err)
			os.Exit(1)
		}
		out[q] = answer(r)
	}
	for _, m := range db.MetaWithPrefix("k") {
		out[m.Key] = string(m.Body)
	}
	b, _ := json.Marshal(out)
	fmt.Println(string(b))
	os.Exit(0) // not closed: no last fold
}

// TestLoadReplaysTheLog: a file left with writes in its log — deletes and
// side records among the puts — opens to what the writer answered
// (load.go applies them in their order among the puts).
func TestLoadReplaysTheLog(t *testing.T) {
	file := filepath.Join(t.TempDir(), "f.db")
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "FENEC_LOAD_CHILD="+file)
	b, err := cmd.Output()
	if err != nil {
		t.Fatalf("the writer: %v\n%s", err, b)
	}
	var want map[string]string
	if err := json.Unmarshal(b, &want); err != nil {
		t.Fatalf("the writer said %q: %v", b, err)
	}
	db, err := Open(Options{File: file})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if db.StoreUnfolded() == 0 {
		t.Log("the writer's folds had reached every write: the log replayed nothing")
	}
	got := map[string]string{}
	for _, q := range loadQueries {
		got[q] = answer(mustExec(t, db, q))
	}
	for _, m := range db.MetaWithPrefix("k") {
		got[m.Key] = string(m.Body)
	}
	if len(got) != len(want) {
		t.Errorf("%d answers and side records after the reopen, %d before", len(got), len(want))
	}
	for k, w := range want {
		if got[k] != w {
			t.Errorf("%s after the reopen:\n got %.300s\nwant %.300s", k, got[k], w)
		}
	}
}
