package main

import (
	"fmt"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/fenecdb/fenec/server/httpapi/apitest"
)

// readAll reads consumer's changes of coll to the head, acking each
// batch, and returns their positions in the order read.
func readAll(t *testing.T, c *apitest.Client, consumer, coll string) []int64 {
	t.Helper()
	var got []int64
	for range 1000 {
		b, _ := readChanges(t, c, "consumer="+consumer+"&collection="+coll+"&limit=7", 200)
		if len(b.Changes) == 0 {
			return got
		}
		for _, ch := range b.Changes {
			if ch.Op != "put" || ch.Row == nil {
				t.Fatalf("change %+v: want a put with its row", ch)
			}
			got = append(got, ch.Position)
		}
		ack(t, c, consumer, b.Next)
	}
	t.Fatal("the consumer never reached the head")
	return nil
}

// TestChangeStreamAcrossRestart: a consumer behind by N writes when the
// server is stopped (SIGTERM), then killed (SIGKILL), reads all N after
// each restart, in order, none skipped; a consumer that had read nothing
// reads from the oldest change kept; the retention bounds still hold
// after a restart (410 past them).
func TestChangeStreamAcrossRestart(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "r.db")
	args := []string{"--file", file, "--sync", "always", "--changes-retain", "200"}
	p, c := start(t, args...)
	c.MustQuery(`create collection q (n int)`)
	c.MustQuery(`put q {n: -1}`)
	first, _ := readChanges(t, c, "consumer=slow&collection=q", 200)
	ack(t, c, "slow", first.Next) // the consumer exists: changes are kept from here

	write := func(from, n int) []int64 {
		var seqs []int64
		for i := range n {
			s, _ := strconv.ParseInt(seqOf(t, c.MustQuery(fmt.Sprintf(`put q {n: %d}`, from+i))), 10, 64)
			seqs = append(seqs, s)
			if i%5 == 0 {
				c.MustQuery(`put other {n: 0}`) // positions not in q between
			}
		}
		return seqs
	}
	c.MustQuery(`create collection other (n int)`)
	behind := write(0, 40)

	var acked int64
	for _, how := range []string{"SIGTERM", "SIGKILL"} {
		if how == "SIGTERM" {
			if err := p.Stop(20 * time.Second); err != nil {
				t.Fatal(err)
			}
		} else {
			p.Kill()
		}
		p, c = start(t, args...)
		got := readAll(t, c, "slow", "q")
		if fmt.Sprint(got) != fmt.Sprint(behind) {
			t.Fatalf("after %s, read %d changes %v,\nwritten %d %v", how, len(got), got, len(behind), behind)
		}
		acked = got[len(got)-1]
		behind = write(100, 30)
	}

	// Retention after a restart: 200 changes kept; a consumer at the
	// start of the 30 still reads them; one left behind past 200 is told.
	mark := acked
	more := write(1000, 250)
	p.Kill()
	_, c = start(t, args...)
	_, r := readChanges(t, c, "consumer=slow&collection=q", 410)
	var at, oldest int64
	if _, err := fmt.Sscanf(string(r.Body), `{"error":"consumer slow is at position %d, and the oldest change kept is %d`, &at, &oldest); err != nil ||
		r.Code() != "changes_gone" || at < mark || at >= behind[0] || oldest <= behind[len(behind)-1] {
		t.Fatalf("past retention after a restart (acked after %d, before %d): %s", mark, behind[0], r.Body)
	}
	// Never acked: from the oldest kept, which is within the last 250.
	b, _ := readChanges(t, c, "consumer=new&collection=q&limit=1000", 200)
	if len(b.Changes) == 0 || b.Changes[len(b.Changes)-1].Position != more[len(more)-1] || b.Changes[0].Position < more[0] {
		t.Fatalf("a new consumer after a restart read %d changes from %d", len(b.Changes), b.Position)
	}
}
