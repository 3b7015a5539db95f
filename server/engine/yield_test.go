package engine

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// slowRead fills t with n documents and returns a read of them that runs
// for at least least (an or of many terms, each row tested against all),
// lengthened until it does.
func slowRead(tb testing.TB, db *DB, n int, least time.Duration) string {
	tb.Helper()
	mustExec(tb, db, `create collection t (n int, tag text)`)
	for i := 0; i < n; i += 1000 {
		var b strings.Builder
		b.WriteString("put t [")
		for j := i; j < i+1000 && j < n; j++ {
			if j > i {
				b.WriteString(",")
			}
			fmt.Fprintf(&b, `{n: %d, tag: "x"}`, j)
		}
		b.WriteString("]")
		mustExec(tb, db, b.String())
	}
	// The terms name no n any document holds, but the last one, -1: the
	// read finds the documents put with n = -1, and only them.
	for terms := 64; ; {
		var b strings.Builder
		b.WriteString("get t where ")
		for k := 0; k < terms; k++ {
			fmt.Fprintf(&b, "n = %d or ", -2-k)
		}
		b.WriteString("n = -1")
		q := b.String()
		start := time.Now()
		mustExec(tb, db, q)
		took := time.Since(start)
		if took >= least || terms >= 1<<16 {
			return q
		}
		// The read's time grows with its terms: once a run is long enough
		// to measure, go straight to the terms it says reach least, with a
		// margin, rather than doubling through every size on the way.
		next := terms * 2
		if took > least/16 {
			next = max(next/2+1, int(float64(terms)*1.3*float64(least)/float64(took)))
		}
		terms = min(next, 1<<16)
	}
}

// A read that runs for seconds holds up neither a write nor the reads
// that come after the write, and what it answers is one state of the
// collection: here the one after the write, since it read the collection
// the write changed and so started again.
func TestLongReadLetsWritesIn(t *testing.T) {
	db, _ := openMem(t)
	n := 20000
	if raceEnabled {
		n = 4000
	}
	// The put and the point read are each answered within bound (200 ms)
	// or the test fails; a read of 800 ms outlasts both with room to spare.
	q := slowRead(t, db, n, 800*time.Millisecond)
	var done atomic.Bool
	type answered struct {
		r   *Result
		err error
		end time.Time
	}
	out := make(chan answered, 1)
	start := time.Now()
	go func() {
		r, err := db.Exec(context.Background(), q, nil)
		done.Store(true)
		out <- answered{r, err, time.Now()}
	}()
	// Wait until the read holds the read lock.
	for db.mu.TryLock() {
		db.mu.Unlock()
		if time.Since(start) > 10*time.Second {
			t.Fatal("the long read never took the lock")
		}
		time.Sleep(time.Millisecond)
	}
	const bound = 200 * time.Millisecond
	w := time.Now()
	mustExec(t, db, `put t {n: -1, tag: "new"}`)
	if d := time.Since(w); d > bound {
		t.Errorf("the put took %v beside the long read; want < %v", d, bound)
	}
	if done.Load() {
		t.Fatal("the long read ended before the put was answered: it tested nothing")
	}
	// A write to another collection, and a point read.
	mustExec(t, db, `create collection u (v int)`)
	r := time.Now()
	if got := answer(mustExec(t, db, `get t where id = 7 select n`)); got != `[{"n":6}]` {
		t.Errorf("point read: %s", got)
	}
	if d := time.Since(r); d > bound {
		t.Errorf("the point read took %v beside the long read; want < %v", d, bound)
	}
	if done.Load() {
		t.Fatal("the long read ended before the point read was answered: it tested nothing")
	}
	a := <-out
	if a.err != nil {
		t.Fatal(a.err)
	}
	if len(a.r.Rows) != 1 {
		t.Fatalf("the long read found %d rows; want the one put while it ran", len(a.r.Rows))
	}
	t.Logf("the long read took %v; the put answered %v after it started", a.end.Sub(start), w.Sub(start))
}

// A read on a collection that a write changes between every one of its
// slices still finishes: each start again doubles its slice.
func TestLongReadFinishesUnderSteadyWrites(t *testing.T) {
	db, _ := openMem(t)
	n := 5000
	if raceEnabled {
		n = 1000
	}
	q := slowRead(t, db, n, 300*time.Millisecond)
	stop := make(chan struct{})
	wrote := make(chan int)
	go func() {
		k := 0
		defer func() { wrote <- k }()
		for k < 100000 {
			select {
			case <-stop:
				return
			default:
			}
			if _, err := db.Exec(context.Background(), `put t {n: 1000000000, tag: "w"}`, nil); err != nil {
				t.Error(err)
				return
			}
			k++
		}
	}()
	r, err := db.Exec(context.Background(), q, nil)
	close(stop)
	k := <-wrote
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Rows) != 0 {
		t.Fatalf("rows: %d", len(r.Rows))
	}
	t.Logf("%d writes made while the read ran", k)
}
