package cluster

import (
	"testing"

	"github.com/hashicorp/raft"
)

// TestFollowersLearnt: what the leader learns of a follower's log from
// its answers (lag.go), answer by answer.
func TestFollowersLearnt(t *testing.T) {
	t.Parallel()
	var f followers
	app := func(term, prev uint64, entries int, success bool, theirs, respTerm uint64) {
		req := &raft.AppendEntriesRequest{RPCHeader: raft.RPCHeader{}, Term: term, PrevLogEntry: prev}
		for i := 1; i <= entries; i++ {
			req.Entries = append(req.Entries, &raft.Log{Index: prev + uint64(i)})
		}
		f.appended("n2", req, &raft.AppendEntriesResponse{Term: respTerm, Success: success, LastLog: theirs})
	}
	match := func(term uint64) uint64 { return f.state("n2", term).Match }

	if s := f.state("n2", 3); s.Match != 0 || !s.Contact.IsZero() {
		t.Fatalf("before any answer: %+v", s)
	}
	app(3, 10, 5, true, 15, 3) // entries 11..15 appended
	if m := match(3); m != 15 {
		t.Errorf("after 11..15: match %d, want 15", m)
	}
	if f.state("n2", 3).Contact.IsZero() {
		t.Error("an answer left no contact")
	}
	app(3, 0, 0, true, 15, 3) // a heartbeat
	if m := match(3); m != 15 {
		t.Errorf("a heartbeat moved match to %d", m)
	}
	app(3, 12, 2, true, 15, 3) // an older request answered late
	if m := match(3); m != 15 {
		t.Errorf("a late answer moved match back to %d", m)
	}
	app(3, 15, 1, false, 7, 3) // refused: the follower holds 7 entries now
	if m := match(3); m != 7 {
		t.Errorf("after a refusal from a follower holding 7: match %d", m)
	}
	app(3, 7, 9, true, 16, 4) // answered from a newer term: not learnt
	if m := match(3); m != 7 {
		t.Errorf("an answer from a newer term moved match to %d", m)
	}
	if s := f.state("n2", 4); s.Match != 0 || !s.Contact.IsZero() {
		t.Errorf("term 4, never led: %+v", s)
	}
	app(5, 16, 1, true, 17, 5) // this node leads again, in term 5
	if m, old := match(5), match(3); m != 17 || old != 0 {
		t.Errorf("term 5: match %d (want 17), term 3's %d (want nothing)", m, old)
	}
	app(3, 20, 1, true, 21, 3) // a late answer to term 3
	if m := match(5); m != 17 {
		t.Errorf("a late answer of an earlier term moved match to %d", m)
	}
	if m := f.state("n3", 5).Match; m != 0 {
		t.Errorf("another follower: match %d", m)
	}
}
