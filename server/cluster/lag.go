package cluster

import (
	"io"
	"math"
	"sync"
	"time"

	"github.com/hashicorp/raft"
)

// Replication lag per follower (docs/cluster.md, Metrics). hashicorp/raft
// keeps each follower's match index to itself (its commitment tracker is
// private, and neither Stats nor its observations carry it), so the
// leader learns it where raft learns it: from the AppendEntries answers.
// watchTransport wraps the raft transport and, for each answer that says
// success, records that the follower's log matches the leader's up to the
// request's last entry (its previous entry plus the entries it carried)
// — the very rule raft's own match index follows. Heartbeats carry no
// entry and only mark the follower's last contact. A lag metric built by
// polling the followers over HTTP would need every node to reach every
// other's API, and would measure the followers' applied index, not what
// the leader knows has reached their logs.

// followers is what the leader has learnt of each follower in its term.
type followers struct {
	mu    sync.Mutex
	term  uint64
	peers map[raft.ServerID]*follower
}

type follower struct {
	match   uint64    // the log's last entry known to be in the follower's log
	contact time.Time // the follower's last answer
}

// FollowerState is what a leader knows of one follower.
type FollowerState struct {
	Match   uint64    // 0 when nothing has been learnt in this term
	Contact time.Time // zero when it has not answered in this term
}

// answered records a follower's answer to a request of term, which, when
// it is a success, tells that its log holds the leader's up to last. A
// refusal (the follower's log does not hold the request's previous
// entry) tells it holds at most theirs, its last index: a follower that
// lost its log is not counted as holding what it once did.
func (f *followers) answered(id raft.ServerID, term uint64, success bool, last, theirs uint64) {
	now := time.Now()
	f.mu.Lock()
	defer f.mu.Unlock()
	if term < f.term {
		return // a late answer to a term this node has left
	}
	if term > f.term || f.peers == nil {
		// A new term: what the leader of an earlier one learnt may have
		// been overwritten since.
		f.term, f.peers = term, map[raft.ServerID]*follower{}
	}
	p := f.peers[id]
	if p == nil {
		p = &follower{}
		f.peers[id] = p
	}
	p.contact = now
	switch {
	case success && last > p.match:
		p.match = last
	case !success && theirs < p.match:
		p.match = theirs
	}
}

// state returns what was learnt of id in term.
func (f *followers) state(id raft.ServerID, term uint64) FollowerState {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.term != term {
		return FollowerState{}
	}
	if p := f.peers[id]; p != nil {
		return FollowerState{Match: p.match, Contact: p.contact}
	}
	return FollowerState{}
}

func lastOf(req *raft.AppendEntriesRequest) uint64 {
	if n := len(req.Entries); n > 0 {
		return req.Entries[n-1].Index
	}
	return req.PrevLogEntry
}

// watchTransport is raft's transport, watched (see above). It keeps the
// optional interfaces raft looks for: pre-vote and close.
type watchTransport struct {
	*raft.NetworkTransport
	f *followers
}

func (t *watchTransport) AppendEntries(id raft.ServerID, target raft.ServerAddress, args *raft.AppendEntriesRequest, resp *raft.AppendEntriesResponse) error {
	err := t.NetworkTransport.AppendEntries(id, target, args, resp)
	if err == nil {
		t.f.appended(id, args, resp)
	}
	return err
}

// appended records an AppendEntries answer. One from a newer term says
// this node no longer leads: nothing is learnt of the follower's log.
func (f *followers) appended(id raft.ServerID, req *raft.AppendEntriesRequest, resp *raft.AppendEntriesResponse) {
	if resp.Term > req.Term {
		return
	}
	f.answered(id, req.Term, resp.Success, lastOf(req), resp.LastLog)
}

func (t *watchTransport) InstallSnapshot(id raft.ServerID, target raft.ServerAddress, args *raft.InstallSnapshotRequest, resp *raft.InstallSnapshotResponse, data io.Reader) error {
	err := t.NetworkTransport.InstallSnapshot(id, target, args, resp, data)
	if err == nil && resp.Term <= args.Term {
		// A refused snapshot says nothing of the follower's log.
		t.f.answered(id, args.Term, resp.Success, args.LastLogIndex, math.MaxUint64)
	}
	return err
}

func (t *watchTransport) AppendEntriesPipeline(id raft.ServerID, target raft.ServerAddress) (raft.AppendPipeline, error) {
	p, err := t.NetworkTransport.AppendEntriesPipeline(id, target)
	if err != nil {
		return nil, err
	}
	w := &watchPipeline{AppendPipeline: p, id: id, f: t.f, out: make(chan raft.AppendFuture, 128), stop: make(chan struct{})}
	go w.relay()
	return w, nil
}

// watchPipeline passes each answered pipelined request on to raft, once
// recorded.
type watchPipeline struct {
	raft.AppendPipeline
	id   raft.ServerID
	f    *followers
	out  chan raft.AppendFuture
	stop chan struct{}
	once sync.Once
}

func (w *watchPipeline) relay() {
	in := w.AppendPipeline.Consumer()
	for {
		select {
		case fut := <-in:
			if fut.Error() == nil {
				w.f.appended(w.id, fut.Request(), fut.Response())
			}
			select {
			case w.out <- fut:
			case <-w.stop:
				return
			}
		case <-w.stop:
			return
		}
	}
}

func (w *watchPipeline) Consumer() <-chan raft.AppendFuture { return w.out }

func (w *watchPipeline) Close() error {
	w.once.Do(func() { close(w.stop) })
	return w.AppendPipeline.Close()
}
