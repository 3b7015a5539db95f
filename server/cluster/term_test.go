package cluster

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/fenecdb/fenec/server/engine"
	"github.com/fenecdb/fenec/server/internal/testwait"
	"github.com/fenecdb/fenec/server/store"
)

// transfer hands from's leadership to to, and waits until to's raft leads.
func transfer(t *testing.T, from, to *testNode) {
	t.Helper()
	if err := from.n.raft.LeadershipTransferToServer(raft.ServerID(to.n.cfg.ID), raft.ServerAddress(to.n.cfg.RaftAddr)).Error(); err != nil {
		t.Fatalf("handing leadership from %s to %s: %v", from.n.cfg.ID, to.n.cfg.ID, err)
	}
	for deadline := time.Now().Add(10 * time.Second); to.n.raft.State() != raft.Leader; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%s does not lead 10 s after the transfer", to.n.cfg.ID)
		}
	}
}

// notes returns a node's notes, in id order, from its JSON answer.
func notes(t *testing.T, db *engine.DB) string {
	t.Helper()
	r, err := db.Exec(context.Background(), "get notes select n order n", nil)
	if err != nil {
		t.Fatal(err)
	}
	return string(r.AppendJSON(nil))
}

// TestNoWriteOfAnEarlierTerm: a leader loses its term and is elected again
// while the goroutine that follows its leadership (watch) is held — as a
// loaded machine may hold it longer than an election — so neither the
// loss's discard nor the new term's barrier has run yet. A write sent to it
// meanwhile must be refused unrun: one run while raft no longer leads is
// refused by raft but stays in memory until the discard, and one run after
// the re-election would be appended in the new term on top of it, a write
// whose seq does not follow the log's. Before, both ran: the second was
// committed and answered 200, and each follower, handed a write that does
// not follow its last, stopped following the log (StoreFailed) — the
// cluster lost its majority for good, since a restart replays the same
// entry.
func TestNoWriteOfAnEarlierTerm(t *testing.T) {
	t.Parallel()
	nodes := startNodes(t, 3, nil)
	lead := leader(t, nodes)
	ctx := context.Background()
	seedNotes(t, lead)
	other := otherThan(nodes, lead)
	// other leads once first, so its URL is recorded: its term in the
	// window below writes nothing (a write of another leader would make
	// the old leader discard its memory, closing the window).
	transfer(t, lead, other)
	leader(t, []*testNode{other})
	transfer(t, other, lead)
	leader(t, []*testNode{lead})

	var once sync.Once
	release := make(chan struct{})
	free := func() { once.Do(func() { close(release) }) }
	defer free()
	var held atomic.Int32
	hold := func(bool) {
		held.Add(1)
		<-release
	}
	lead.n.watchHold.Store(&hold)

	// The leader loses its term; its watch is held on the notification.
	transfer(t, lead, other)
	leader(t, []*testNode{other})
	testwait.Until(t, "the watch held on the loss", func() bool { return held.Load() != 0 })
	_, err1 := lead.db.Exec(ctx, "put notes {n: 2}", nil)
	t.Logf("a write on the deposed leader before its discard: %v", err1)
	// Elected again; the watch still holds the loss's notification.
	transfer(t, other, lead)
	_, err2 := lead.db.Exec(ctx, "put notes {n: 3}", nil)
	t.Logf("a write on the leader elected again, before its discard and barrier: %v", err2)
	for i, err := range []error{err1, err2} {
		var nl *engine.NotLeaderError
		if !errors.As(err, &nl) {
			t.Errorf("write %d in the window: %v, want refused unrun (not the leader)", i+1, err)
		}
	}

	lead.n.watchHold.Store(nil)
	free()
	lead = leader(t, nodes)
	if _, err := lead.db.Exec(ctx, "put notes {n: 4}", nil); err != nil {
		t.Fatal(err)
	}
	want := notes(t, lead.db)
	// A node that has applied the put after the window has been handed
	// every entry of the window: had one stopped it, it would be shut down
	// (or never catch up).
	for _, nd := range nodes {
		catchUp(nd, lead)
		if s := nd.n.raft.State(); s == raft.Shutdown {
			t.Fatalf("%s stopped following the log", nd.n.cfg.ID)
		}
		if got := notes(t, nd.db); got != want {
			t.Errorf("%s holds %s; the leader %s holds %s", nd.n.cfg.ID, got, lead.n.cfg.ID, want)
		}
	}
	if want != `[{"n":1},{"n":4}]` {
		t.Errorf("the notes: %s, want n 1 and 4 (the writes in the window refused)", want)
	}
}

// TestEntryOfAnotherTermIsSkipped: the log's side of the rule above. An
// entry tagged with a term other than the one raft appended it in (made
// by memory of an earlier term that passed the send loop's look at the
// term just before raft, leading again, took it) is skipped by every
// node alike, not applied and not taken as a write that does not follow
// (which stops a follower); and the leader whose memory made it rebuilds
// that memory, which may hold a write raft refused.
func TestEntryOfAnotherTermIsSkipped(t *testing.T) {
	t.Parallel()
	nodes := startNodes(t, 3, nil)
	lead := leader(t, nodes)
	ctx := context.Background()
	seedNotes(t, lead)
	o := lead.n.office.Load()
	stale := newOffice(o.term - 1)
	put := func(key string) []store.Change {
		return []store.Change{{Op: store.OpMetaPut, Key: key, Body: []byte("x")}}
	}
	// A write that does not follow the log's last (its memory held one
	// raft refused), then one that does, both of the earlier term; the
	// second from the leader's memory now.
	before := lead.db.Mark()
	for i, e := range []struct {
		seq, mark uint64
		key       string
	}{{lead.db.Seq() + 2, before + 1, "gap"}, {lead.db.Seq() + 1, before, "follows"}} {
		f := lead.n.raft.ApplyLog(raft.Log{Data: encodeEntry(e.seq, e.mark, put(e.key)), Extensions: stale.tag}, 0)
		if err := f.Error(); err != nil {
			t.Fatalf("entry %d: %v", i, err)
		}
		var nl *engine.NotLeaderError
		if a, _ := f.Response().(applied); !errors.As(a.err, &nl) {
			t.Errorf("entry %d (%s) of term %d appended in term %d: answered %v, want refused", i, e.key, stale.term, o.term, a.err)
		}
	}
	if lead.db.Mark() == before {
		t.Error("the leader kept the memory that made a write of an earlier term")
	}
	if _, err := lead.db.Exec(ctx, "put notes {n: 2}", nil); err != nil {
		t.Fatal(err)
	}
	want := notes(t, lead.db)
	for _, nd := range nodes {
		catchUp(nd, lead)
		if s := nd.n.raft.State(); s == raft.Shutdown {
			t.Errorf("%s stopped following the log", nd.n.cfg.ID)
		}
		for _, key := range []string{"gap", "follows"} {
			if _, ok := nd.db.GetMeta(key); ok {
				t.Errorf("%s applied the entry %q of an earlier term", nd.n.cfg.ID, key)
			}
		}
		if got := notes(t, nd.db); got != want || want != `[{"n":1},{"n":2}]` {
			t.Errorf("%s holds %s; the leader holds %s, want n 1 and 2", nd.n.cfg.ID, got, want)
		}
	}
}

// TestNoWriteAcrossAFailedTransfer: raft refuses writes while it hands its
// leadership on and, when the transfer fails (here its target is down and
// behind, so raft gives up after the election timeout), leads on in the
// same term. A write sent meanwhile must be refused unrun: one run and
// then refused by raft stays in memory, and the next write, appended in
// the same term (its tag does not tell it apart), does not follow the
// log. Before, that next write was committed and the follower left,
// handed it, stopped following the log (StoreFailed).
func TestNoWriteAcrossAFailedTransfer(t *testing.T) {
	t.Parallel()
	// With one follower stopped, the leader keeps its lease only while
	// the other answers: a lease of 1 s (not 250 ms) rides out a loaded
	// machine's pauses, which would otherwise end its term before the
	// transfer this test is about.
	nodes := startNodesWith(t, 3, nil, Config{Heartbeat: time.Second, LeaderLease: time.Second, Election: 2 * time.Second})
	lead := leader(t, nodes)
	ctx := context.Background()
	seedNotes(t, lead)
	gone := otherThan(nodes, lead)
	gone.stop()
	// It misses a write: the transfer waits for it to catch up, in vain.
	if _, err := lead.db.Exec(ctx, "put notes {n: 2}", nil); err != nil {
		t.Fatal(err)
	}
	errc := make(chan error, 1)
	go func() { errc <- lead.n.Transfer(gone.n.cfg.ID) }()
	// The transfer is under way once the leader has given its office up
	// (handOn): until it fails, waiting for gone.
	testwait.Until(t, "the leader handing its leadership on", func() bool { return lead.n.Writable() != nil })
	_, err1 := lead.db.Exec(ctx, "put notes {n: 3}", nil)
	t.Logf("a write while the leader hands its leadership on: %v", err1)
	if err := <-errc; err == nil {
		t.Fatalf("the transfer to the stopped %s succeeded", gone.n.cfg.ID)
	}
	var nl *engine.NotLeaderError
	if !errors.As(err1, &nl) {
		t.Errorf("the write during the transfer: %v, want refused unrun", err1)
	}
	lead = leader(t, nodes)
	if _, err := lead.db.Exec(ctx, "put notes {n: 4}", nil); err != nil {
		t.Fatal(err)
	}
	want := notes(t, lead.db)
	// A follower that has applied the last put has been handed every
	// entry before it: had one stopped it, it would be shut down.
	for _, nd := range nodes {
		if nd == gone {
			continue
		}
		catchUp(nd, lead)
		if s := nd.n.raft.State(); s == raft.Shutdown {
			t.Fatalf("%s stopped following the log", nd.n.cfg.ID)
		}
		if got := notes(t, nd.db); got != want {
			t.Errorf("%s holds %s; the leader %s holds %s", nd.n.cfg.ID, got, lead.n.cfg.ID, want)
		}
	}
	if want != `[{"n":1},{"n":2},{"n":4}]` {
		t.Errorf("the notes: %s, want n 1, 2 and 4 (the write during the transfer refused)", want)
	}
}

// seedNotes creates the collection notes on lead, with one note, n 1.
func seedNotes(t *testing.T, lead *testNode) {
	t.Helper()
	for _, q := range []string{"create collection notes (n int)", "put notes {n: 1}"} {
		if _, err := lead.db.Exec(context.Background(), q, nil); err != nil {
			t.Fatal(err)
		}
	}
}

// catchUp waits, 10 s at most, until nd has applied every write lead has.
func catchUp(nd, lead *testNode) {
	for deadline := time.Now().Add(10 * time.Second); nd.db.Seq() < lead.db.Seq() && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
	}
}

// otherThan returns the first of nodes that is not nd.
func otherThan(nodes []*testNode, nd *testNode) *testNode {
	for _, x := range nodes {
		if x != nd {
			return x
		}
	}
	return nil
}
