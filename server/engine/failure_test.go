package engine

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/fenecdb/fenec/server/internal/syncbuf"
	"github.com/fenecdb/fenec/server/internal/testwait"

	"github.com/fenecdb/fenec/server/clock"
	"github.com/fenecdb/fenec/server/store"
)

// faults is a store fault hook (Options.StoreFault) the test switches:
// the store's writes fail as a full disk would make them fail.
type faults struct {
	commit, fold atomic.Bool
	refused      atomic.Int64 // commits (and the probes' writes) failed
}

var errDiskFull = errors.New("injected: database or disk is full")

func (f *faults) hook(at string) error {
	if at == store.FaultCommit && f.commit.Load() {
		f.refused.Add(1)
		return errDiskFull
	}
	if at == store.FaultFold && f.fold.Load() {
		return errDiskFull
	}
	return nil
}

func openFaulty(t *testing.T, file, sync string, f *faults) *DB {
	t.Helper()
	return openFaultyLog(t, file, sync, f, nil)
}

func openFaultyLog(t *testing.T, file, sync string, f *faults, log *slog.Logger) *DB {
	t.Helper()
	mode, err := store.ParseSync(sync)
	if err != nil {
		t.Fatal(err)
	}
	db, err := Open(Options{File: file, Sync: mode, Clock: clock.NewManual(), StoreFault: f.hook, Log: log})
	if err != nil {
		t.Fatal(err)
	}
	return db
}

// TestStoreFailure: a write the store fails to write is undone in memory
// (with its side records) and never answered as a success; writes are
// refused while the store stays failed, reads go on; once the store works
// again writes are taken without a restart, and the file holds exactly
// what was answered as a success.
func TestStoreFailure(t *testing.T) {
	for _, sync := range []string{"always", "20"} {
		t.Run(sync, func(t *testing.T) {
			file := filepath.Join(t.TempDir(), "f.db")
			f := &faults{}
			var logged syncbuf.Buffer
			db := openFaultyLog(t, file, sync, f, slog.New(slog.NewTextHandler(&logged, nil)))
			mustExec(t, db, `create collection c (n int @unique)`)
			mustExec(t, db, `put c {n: 1}`)
			seq := db.Seq()
			// Under an interval, what came before the fault is written first.
			testwait.Until(t, "the first writes to be stored", func() bool { return db.st.Durable() == seq })
			if db.StoreErr() != nil || db.StoreFailures() != 0 {
				t.Fatal("a store failed before any fault")
			}

			f.commit.Store(true)
			meta := RunOptions{Meta: func([]*Result) map[string]Meta { return map[string]Meta{"idem:k": {Body: []byte("answer")}} }}
			ps, err := Parse([]Statement{{Query: `put c {n: 2}`}, {Query: `set c {n: 10} where n = 1`}})
			if err != nil {
				t.Fatal(err)
			}
			_, err = db.Run(context.Background(), ps, meta)
			if sync == "always" {
				// The answer waits for the write: it is refused.
				if !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), "not stored") {
					t.Fatalf("a write the store failed answered %v", err)
				}
			} else {
				// An interval answers before the write: the failure comes later.
				if err != nil {
					t.Fatalf("under an interval the write answered %v", err)
				}
				testwait.Until(t, "the failure", func() bool { return db.StoreErr() != nil })
			}
			if got := answer(mustExec(t, db, `get c select n order n`)); got != `[{"n":1}]` {
				t.Fatalf("memory holds a write the store failed: %s", got)
			}
			if _, ok := db.GetMeta("idem:k"); ok {
				t.Fatal("the failed write's side record is still held")
			}
			if db.Seq() != seq {
				t.Fatalf("seq %d after the failure, %d before", db.Seq(), seq)
			}
			if db.StoreErr() == nil || db.StoreFailures() != 1 {
				t.Fatalf("store state after the failure: %v, %d failures", db.StoreErr(), db.StoreFailures())
			}

			// A store that stays broken: writes refused, reads answered,
			// through several probes.
			// (Each probe writes, and the hook fails it.)
			probed := f.refused.Load()
			testwait.Until(t, "two probes of the failed store", func() bool { return f.refused.Load() >= probed+2 })
			for _, q := range []string{`put c {n: 3}`, `set c {n: 4} where n = 1`, `create collection d (a int)`} {
				if _, err := db.Exec(context.Background(), q, nil); !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), "refused until it works again") {
					t.Fatalf("%s on a failed store: %v", q, err)
				}
			}
			if n, err := db.SweepMeta(context.Background(), 1<<62); err == nil || n != 0 {
				t.Fatalf("a sweep on a failed store answered %d, %v", n, err)
			}
			if db.StoreErr() == nil || db.StoreFailures() != 1 {
				t.Fatal("the store recovered while it still failed")
			}

			f.commit.Store(false)
			testwait.Until(t, "the store to work again", func() bool { return db.StoreErr() == nil })
			mustExec(t, db, `put c {n: 3}`)
			if db.Seq() != seq+1 {
				t.Fatalf("seq %d after recovery, want %d", db.Seq(), seq+1)
			}
			for _, line := range []string{"level=ERROR msg=\"the store failed: writes are refused until it works again\"", "level=INFO msg=\"the store works again: writes are taken\""} {
				if strings.Count(logged.String(), line) != 1 {
					t.Fatalf("the log does not say once %s:\n%s", line, logged.String())
				}
			}
			if err := db.Close(); err != nil {
				t.Fatal(err)
			}
			db = openFaulty(t, file, sync, &faults{})
			defer db.Close()
			if got := answer(mustExec(t, db, `get c select n order n`)); got != `[{"n":1},{"n":3}]` {
				t.Fatalf("the file after recovery: %s", got)
			}
			if db.Seq() != seq+1 {
				t.Fatalf("seq %d after reopening, want %d", db.Seq(), seq+1)
			}
		})
	}
}

// TestSweepFailure: a sweep is a write like any other — one the store
// failed is undone (the expired records are back until a sweep is stored).
func TestSweepFailure(t *testing.T) {
	f := &faults{}
	db := openFaulty(t, filepath.Join(t.TempDir(), "f.db"), "always", f)
	defer db.Close()
	mustExec(t, db, `create collection c (n int)`)
	ps, err := Parse([]Statement{{Query: `put c {n: 1}`}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Run(context.Background(), ps, RunOptions{Meta: func([]*Result) map[string]Meta {
		return map[string]Meta{"old": {Body: []byte("x"), Expires: 10}, "new": {Body: []byte("y"), Expires: 1 << 50}}
	}}); err != nil {
		t.Fatal(err)
	}
	seq := db.Seq()
	f.commit.Store(true)
	if n, err := db.SweepMeta(context.Background(), 100); err == nil || !errors.Is(err, ErrUnavailable) {
		t.Fatalf("a sweep the store failed answered %d, %v", n, err)
	}
	if _, ok := db.GetMeta("old"); !ok || db.MetaLen() != 2 || db.Seq() != seq {
		t.Fatalf("a sweep the store failed changed memory: %d records, seq %d (was %d)", db.MetaLen(), db.Seq(), seq)
	}
	if db.StoreErr() == nil {
		t.Fatal("a sweep's failed commit was not recorded as a store failure")
	}
	f.commit.Store(false)
	testwait.Until(t, "the store to work again", func() bool { return db.StoreErr() == nil })
	if n, err := db.SweepMeta(context.Background(), 100); err != nil || n != 1 || db.MetaLen() != 1 {
		t.Fatalf("the sweep once the store works: %d, %v, %d left", n, err, db.MetaLen())
	}
}

// TestStoreFailureUnderLoad: writers race a failure and the recovery; every
// write answered ok is in memory and in the file, none refused is in either.
func TestStoreFailureUnderLoad(t *testing.T) {
	file := filepath.Join(t.TempDir(), "f.db")
	f := &faults{}
	db := openFaulty(t, file, "always", f)
	mustExec(t, db, `create collection c (k text @unique)`)
	var mu sync.Mutex
	acked, refused := map[string]bool{}, map[string]bool{}
	var wg sync.WaitGroup
	for g := range 6 {
		wg.Go(func() {
			for i := range 150 {
				k := fmt.Sprintf("%d-%d", g, i)
				_, err := db.Exec(context.Background(), `put c {k: $1}`, vals(k))
				mu.Lock()
				if err == nil {
					acked[k] = true
				} else if errors.Is(err, ErrUnavailable) {
					refused[k] = true
				} else {
					t.Errorf("put %s: %v", k, err)
				}
				mu.Unlock()
				if i == 40 && g == 0 {
					f.commit.Store(true)
				}
				if i == 60 && g == 0 {
					f.commit.Store(false)
				}
			}
		})
	}
	wg.Wait()
	if len(refused) == 0 || len(acked) == 0 {
		t.Fatalf("%d acknowledged, %d refused: the fault did not land", len(acked), len(refused))
	}
	testwait.Until(t, "the store to work again", func() bool { return db.StoreErr() == nil })
	check := func(when string) {
		t.Helper()
		r := mustExec(t, db, `get c select k`)
		got := map[string]bool{}
		for _, row := range r.Rows {
			got[row[0].Text()] = true
		}
		for k := range acked {
			if !got[k] {
				t.Fatalf("%s: acknowledged %s is gone", when, k)
			}
		}
		for k := range refused {
			if got[k] {
				t.Fatalf("%s: refused %s is there", when, k)
			}
		}
		if len(got) != len(acked) {
			t.Fatalf("%s: %d documents, %d acknowledged", when, len(got), len(acked))
		}
	}
	check("memory")
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	db = openFaulty(t, file, "always", &faults{})
	defer db.Close()
	check("the file")
	t.Logf("%d acknowledged, %d refused", len(acked), len(refused))
}

// TestFoldFailure: a fold that fails (at Close) loses nothing: the log
// keeps what the fold did not write, and the next open replays it.
func TestFoldFailure(t *testing.T) {
	file := filepath.Join(t.TempDir(), "f.db")
	f := &faults{}
	db := openFaulty(t, file, "always", f)
	mustExec(t, db, `create collection c (n int)`)
	for i := range 20 {
		mustExec(t, db, `put c {n: $1}`, i)
	}
	mustExec(t, db, `del c where n < 5`)
	f.fold.Store(true)
	if err := db.Close(); err == nil || !errors.Is(err, errDiskFull) {
		t.Fatalf("Close with a failing fold answered %v", err)
	}
	db = openFaulty(t, file, "always", &faults{})
	defer db.Close()
	if got := answer(mustExec(t, db, `get c count`)); got != `[{"count":15}]` {
		t.Fatalf("after a failed fold: %s", got)
	}
}

// TestRunUnwaited: a Run with RunOptions.Unwaited returns once memory has
// the write; its Durable's Wait returns nil once the store has it, or the
// store's failure, as a waited Run would have, with the write undone.
func TestRunUnwaited(t *testing.T) {
	f := &faults{}
	db := openFaulty(t, filepath.Join(t.TempDir(), "u.db"), "always", f)
	defer db.Close()
	mustExec(t, db, `create collection c (n int)`)
	ps, err := Parse([]Statement{{Query: `put c {n: 1}`}})
	if err != nil {
		t.Fatal(err)
	}
	var durable Durable
	rs, err := db.Run(context.Background(), ps, RunOptions{Unwaited: &durable})
	if err != nil || len(rs) != 1 {
		t.Fatalf("unwaited put: %v", err)
	}
	if err := durable.Wait(); err != nil {
		t.Fatalf("the put's wait: %v", err)
	}
	if db.st.Durable() < rs[0].Seq {
		t.Fatalf("the wait returned before the store had seq %d (durable %d)", rs[0].Seq, db.st.Durable())
	}

	// A read's wait, and the zero Durable's, return nil at once.
	get, err := Parse([]Statement{{Query: `get c`}})
	if err != nil {
		t.Fatal(err)
	}
	var read Durable
	if _, err := db.Run(context.Background(), get, RunOptions{Unwaited: &read}); err != nil || read.Wait() != nil || (Durable{}).Wait() != nil {
		t.Fatalf("a read's wait: %v", err)
	}

	// The store fails the next write: Run still returns it (memory has
	// it); the wait returns the failure, and memory no longer has it.
	f.commit.Store(true)
	ps, err = Parse([]Statement{{Query: `put c {n: 2}`}})
	if err != nil {
		t.Fatal(err)
	}
	durable = Durable{}
	if _, err := db.Run(context.Background(), ps, RunOptions{Unwaited: &durable}); err != nil {
		t.Fatalf("the unwaited put returned %v before its wait", err)
	}
	if err := durable.Wait(); !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), "not stored") {
		t.Fatalf("the failed put's wait returned %v", err)
	}
	if got := answer(mustExec(t, db, `get c select n order n`)); got != `[{"n":1}]` {
		t.Fatalf("memory holds a write the store failed: %s", got)
	}
}
