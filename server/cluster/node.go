// Package cluster makes a Fenec server one node of a cluster replicated by
// hashicorp/raft (docs/cluster.md). It sits at the store's boundary: the
// engine's leader runs statements as a lone server does and hands each
// write's changes — computed values — to the log here; every node writes
// its store from the committed log alone.
package cluster

import (
	"context"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"

	"github.com/fenecdb/fenec/server/engine"
	"github.com/fenecdb/fenec/server/store"
)

// Peer is a voter of the first configuration: a node's id and raft address.
type Peer struct {
	ID, Addr string
}

// ParsePeers parses --bootstrap: id=host:port, comma-separated.
func ParsePeers(s string) ([]Peer, error) {
	var out []Peer
	seen := map[string]bool{}
	for _, part := range strings.Split(s, ",") {
		id, addr, ok := strings.Cut(strings.TrimSpace(part), "=")
		if !ok || id == "" || addr == "" {
			return nil, fmt.Errorf("%q: want id=host:port", part)
		}
		if _, _, err := net.SplitHostPort(addr); err != nil {
			return nil, fmt.Errorf("%q: %v", part, err)
		}
		if seen[id] {
			return nil, fmt.Errorf("node id %q twice", id)
		}
		seen[id] = true
		out = append(out, Peer{ID: id, Addr: addr})
	}
	return out, nil
}

// Config configures a node.
type Config struct {
	ID        string // the node's name, unique in its cluster, kept for life
	RaftAddr  string // host:port the raft transport listens on
	Advertise string // host:port others reach the transport at; default RaftAddr
	HTTPURL   string // the URL clients reach this node's API at
	Dir       string // the raft log and snapshots
	Bootstrap []Peer // the first voters; used only when Dir holds no state
	Log       *slog.Logger
	// Timings; zero picks docs/cluster.md's defaults.
	Heartbeat, Election, LeaderLease time.Duration
	// SnapshotThreshold: log entries between snapshots; zero picks 8192.
	SnapshotThreshold uint64
	// SnapshotCheck: how often raft looks whether SnapshotThreshold
	// entries have passed (staggered up to twice that); zero picks 5 s.
	SnapshotCheck time.Duration
	// ServerTLS and DialTLS, both set, carry raft over mutual TLS: the
	// configuration the raft port accepts with (it must require a client
	// certificate) and the one this node dials the others with. Both nil,
	// raft is plain TCP.
	ServerTLS, DialTLS *tls.Config
}

// addrPrefix is the side record (engine.Meta) a leader keeps its HTTP URL
// under, so followers can name it: written through the log like any write.
const addrPrefix = "cluster:http:"

// Node is a running cluster node.
type Node struct {
	cfg   Config
	db    *engine.DB
	log   *slog.Logger
	raft  *raft.Raft
	logs  *logStore
	trans *raft.NetworkTransport
	snaps *raft.FileSnapshotStore
	peers followers // what this node, leading, has learnt of each follower (lag.go)
	// unwritten: the writes applied here the file may not have yet,
	// oldest first, and their entries' bytes; raft's apply loop alone
	// touches them (behind).
	unwritten      []pendingWrite
	unwrittenBytes int

	// office: the raft term this node's memory takes writes in, set once
	// the term's barrier has applied every earlier term's write; nil while
	// it takes none. A write is admitted, and proposed, only while raft
	// leads in that same term: see Writable.
	office  atomic.Pointer[office]
	addrs   sync.Map // node id → HTTP URL
	changes atomic.Uint64
	notify  chan bool
	obsCh   chan raft.Observation
	obs     *raft.Observer
	done    chan struct{}
	// watchHold, set by a test, is called by watch before it handles each
	// notification of raft's: it holds the watch as a loaded machine may.
	watchHold atomic.Pointer[func(leader bool)]

	termMu     sync.Mutex
	termCtx    context.Context // ends when this node's term as leader does
	termCancel context.CancelFunc

	// Proposals go to raft from a goroutine of their own, in the order
	// the engine made them: raft.Apply can block while raft waits for
	// this node's state machine, which waits for the engine's write lock,
	// under which the engine proposes. A proposal made by memory since
	// discarded (its mark is not the engine's now) is refused, never
	// appended; sendMu keeps a discard from falling between that check
	// and raft.Apply.
	propMu   sync.Mutex
	queue    []*proposal
	propWake chan struct{}
	propStop chan struct{}
	propDone chan struct{}
	sendMu   sync.RWMutex
}

type proposal struct {
	data []byte
	mark uint64
	term *office               // the term the memory that made it took writes in
	sent chan raft.ApplyFuture // nil when refused
}

// office is a term in which this node's memory takes writes, and the tag
// its proposals carry in their log entries' Extensions (see fsm.Apply).
type office struct {
	term uint64
	tag  []byte
}

func newOffice(term uint64) *office {
	return &office{term: term, tag: binary.AppendUvarint([]byte{termTag}, term)}
}

// termTag starts the Extensions of an entry: the term its memory took
// writes in follows (a uvarint).
const termTag = 1

// entryTerm returns the term an entry's Extensions name; ok false for an
// entry without (one logged before they carried it).
func entryTerm(ext []byte) (term uint64, ok bool) {
	if len(ext) < 2 || ext[0] != termTag {
		return 0, false
	}
	term, k := binary.Uvarint(ext[1:])
	return term, k > 0
}

// leads returns whether raft leads now in o's term.
func (n *Node) leads(o *office) bool {
	return o != nil && n.raft.State() == raft.Leader && n.raft.CurrentTerm() == o.term
}

// Start makes db a node of a cluster and starts raft. db serves no write
// until this node is the leader.
func Start(db *engine.DB, cfg Config) (*Node, error) {
	if cfg.ID == "" || cfg.RaftAddr == "" || cfg.Dir == "" {
		return nil, errors.New("cluster: a node needs an id, a raft address and a directory")
	}
	if cfg.Advertise == "" {
		cfg.Advertise = cfg.RaftAddr
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if err := os.MkdirAll(cfg.Dir, 0o755); err != nil {
		return nil, err
	}
	n := &Node{cfg: cfg, db: db, log: cfg.Log, notify: make(chan bool, 16), obsCh: make(chan raft.Observation, 64), done: make(chan struct{}),
		propWake: make(chan struct{}, 1), propStop: make(chan struct{}), propDone: make(chan struct{})}
	n.termCtx, n.termCancel = context.WithCancel(context.Background())
	n.termCancel()
	n.addrs.Store(cfg.ID, cfg.HTTPURL)

	rc := raft.DefaultConfig()
	rc.LocalID = raft.ServerID(cfg.ID)
	rc.HeartbeatTimeout = orDefault(cfg.Heartbeat, 500*time.Millisecond)
	rc.ElectionTimeout = orDefault(cfg.Election, 500*time.Millisecond)
	rc.LeaderLeaseTimeout = orDefault(cfg.LeaderLease, 250*time.Millisecond)
	rc.CommitTimeout = 20 * time.Millisecond
	rc.BatchApplyCh = true
	rc.MaxAppendEntries = 256
	rc.SnapshotThreshold = cfg.SnapshotThreshold
	if rc.SnapshotThreshold == 0 {
		rc.SnapshotThreshold = 8192
	}
	// How often raft looks whether SnapshotThreshold entries have passed:
	// the look is cheap, the snapshot is taken only then.
	rc.SnapshotInterval = orDefault(cfg.SnapshotCheck, 5*time.Second)
	rc.TrailingLogs = min(1024, rc.SnapshotThreshold)
	// The store's file is this node's state already: restoring the latest
	// snapshot over it at every start would only move it back.
	rc.NoSnapshotRestoreOnStart = true
	rc.NotifyCh = n.notify
	rc.Logger = hclog.New(&hclog.LoggerOptions{Name: "raft", Level: hclog.Warn, Output: os.Stderr})

	var err error
	if n.logs, err = openLogStore(filepath.Join(cfg.Dir, "raft.db")); err != nil {
		return nil, err
	}
	if n.snaps, err = raft.NewFileSnapshotStore(cfg.Dir, 2, os.Stderr); err != nil {
		n.logs.Close()
		return nil, err
	}
	adv, err := net.ResolveTCPAddr("tcp", cfg.Advertise)
	if err != nil {
		n.logs.Close()
		return nil, fmt.Errorf("cluster: --raft-advertise %s: %w", cfg.Advertise, err)
	}
	if (cfg.ServerTLS == nil) != (cfg.DialTLS == nil) {
		n.logs.Close()
		return nil, errors.New("cluster: mutual TLS needs both a server and a dialing configuration")
	}
	if cfg.ServerTLS != nil {
		layer, err := newTLSLayer(cfg.RaftAddr, adv, cfg.ServerTLS, cfg.DialTLS, n.log)
		if err != nil {
			n.logs.Close()
			return nil, fmt.Errorf("cluster: --raft %s: %w", cfg.RaftAddr, err)
		}
		n.trans = raft.NewNetworkTransport(layer, 4, 5*time.Second, os.Stderr)
	} else if n.trans, err = raft.NewTCPTransport(cfg.RaftAddr, adv, 4, 5*time.Second, os.Stderr); err != nil {
		n.logs.Close()
		return nil, fmt.Errorf("cluster: --raft %s: %w", cfg.RaftAddr, err)
	}
	existing, err := raft.HasExistingState(n.logs, n.logs, n.snaps)
	if err != nil {
		n.close()
		return nil, err
	}
	if seq := db.Seq(); !existing && seq > 0 {
		// The log numbers writes from the file's first: a file that
		// already holds some would disagree with every other node's.
		n.close()
		return nil, fmt.Errorf("cluster: the file holds %d writes but %s holds no raft state: a node starts from an empty file, or restarts with its raft directory (docs/cluster.md)", seq, cfg.Dir)
	}
	// The engine learns of the cluster before raft replays its log, so the
	// replay skips what the file already holds.
	db.SetReplicator(n)
	n.learnAddrs()
	if n.raft, err = raft.NewRaft(rc, (*fsm)(n), n.logs, n.logs, n.snaps, &watchTransport{n.trans, &n.peers}); err != nil {
		n.close()
		return nil, err
	}
	n.obs = raft.NewObserver(n.obsCh, false, func(o *raft.Observation) bool {
		_, ok := o.Data.(raft.LeaderObservation)
		return ok
	})
	n.raft.RegisterObserver(n.obs)
	go n.propose()
	if !existing && len(cfg.Bootstrap) > 0 {
		var servers []raft.Server
		for _, p := range cfg.Bootstrap {
			servers = append(servers, raft.Server{ID: raft.ServerID(p.ID), Address: raft.ServerAddress(p.Addr), Suffrage: raft.Voter})
		}
		if err := n.raft.BootstrapCluster(raft.Configuration{Servers: servers}).Error(); err != nil && !errors.Is(err, raft.ErrCantBootstrap) {
			n.Shutdown()
			return nil, fmt.Errorf("cluster: bootstrap: %w", err)
		}
	}
	go n.watch()
	return n, nil
}

// propose hands queued proposals to raft, in order, until Shutdown.
func (n *Node) propose() {
	defer close(n.propDone)
	for {
		select {
		case <-n.propWake:
		case <-n.propStop:
			n.propMu.Lock()
			for _, p := range n.queue {
				p.sent <- nil
			}
			n.queue = nil
			n.propMu.Unlock()
			return
		}
		n.propMu.Lock()
		batch := n.queue
		n.queue = nil
		n.propMu.Unlock()
		for _, p := range batch {
			n.sendMu.RLock()
			// Not from memory since discarded, nor from a term that is
			// over: raft, leading again in a later term, would append it
			// there, on top of what this term's log may lack (a write
			// raft refused once it no longer led stays in memory until
			// leaveOffice discards it); nor once the office is given up
			// (handOn), for raft refuses writes while it hands its
			// leadership on, and leads on in the same term if that fails.
			if p.mark != n.db.Mark() || p.term != n.office.Load() || !n.leads(p.term) {
				n.sendMu.RUnlock()
				p.sent <- nil
				continue
			}
			p.sent <- n.raft.ApplyLog(raft.Log{Data: p.data, Extensions: p.term.tag}, 0)
			n.sendMu.RUnlock()
		}
	}
}

func orDefault(d, def time.Duration) time.Duration {
	if d > 0 {
		return d
	}
	return def
}

// learnAddrs reads the HTTP URLs leaders have recorded.
func (n *Node) learnAddrs() {
	for _, m := range n.db.MetaWithPrefix(addrPrefix) {
		n.addrs.Store(m.Key[len(addrPrefix):], string(m.Body))
	}
}

// watch follows this node's leadership: a new leader serves writes once
// it has applied every write of the terms before (a barrier), so its
// memory is the log's; a leader that loses its term stops writing at once,
// ends its held claims, and discards what it had not committed.
func (n *Node) watch() {
	defer close(n.done)
	for {
		select {
		case o, ok := <-n.obsCh:
			if !ok {
				return
			}
			if _, isLeader := o.Data.(raft.LeaderObservation); isLeader {
				n.changes.Add(1)
			}
		case leader, ok := <-n.notify:
			if !ok {
				return
			}
			if h := n.watchHold.Load(); h != nil {
				(*h)(leader)
			}
			if leader {
				n.takeOffice()
			} else {
				n.leaveOffice()
			}
		}
	}
}

func (n *Node) takeOffice() {
	// The term is read before the barrier: a barrier that succeeds while
	// raft still leads in it was applied in it, so memory then holds every
	// write of the terms before. If the term moved meanwhile, the
	// notifications of its loss and of the next election follow this one.
	o := newOffice(n.raft.CurrentTerm())
	if err := n.raft.Barrier(10 * time.Second).Error(); err != nil {
		n.log.Warn("cluster: elected, but the barrier failed", "err", err)
		return
	}
	if !n.leads(o) {
		n.log.Warn("cluster: elected, but the term ended before its barrier was applied", "term", o.term)
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	n.termMu.Lock()
	n.termCtx, n.termCancel = ctx, cancel
	n.termMu.Unlock()
	n.office.Store(o)
	n.log.Info("cluster: leading", "term", o.term)
	if m, ok := n.db.GetMeta(addrPrefix + n.cfg.ID); ok && string(m.Body) == n.cfg.HTTPURL {
		return
	}
	_, err := n.db.Run(context.Background(), nil, engine.RunOptions{Meta: func([]*engine.Result) map[string]engine.Meta {
		return map[string]engine.Meta{addrPrefix + n.cfg.ID: {Body: []byte(n.cfg.HTTPURL)}}
	}})
	if err != nil {
		n.log.Warn("cluster: recording this leader's URL", "err", err)
	}
}

// stopWriting gives up the office: from now on no write is admitted, and
// no proposal handed to raft (under sendMu, which the send loop holds from
// its look at the office to raft's Apply).
func (n *Node) stopWriting() {
	n.sendMu.Lock()
	n.office.Store(nil)
	n.sendMu.Unlock()
}

// handOn runs a transfer of this node's leadership. raft refuses writes
// while it runs and, if it fails, leads on in the same term: a write it
// refused would stay in this memory, and the next one, appended in that
// term, would not follow the log (the term's tag does not tell them
// apart). So this node gives its office up first, and if it still leads
// in the same term afterwards, takes it again as a new leader does: the
// writes raft did not take discarded, and a barrier so memory holds every
// write the log has before it serves.
func (n *Node) handOn(transfer func() raft.Future) error {
	o := n.office.Load()
	n.stopWriting()
	// Every proposal sent before is in raft's queue, which a barrier
	// follows: once it passes, raft has taken them all, so none is
	// refused by the transfer and then one after it taken if it fails.
	if o != nil {
		if err := n.raft.Barrier(10 * time.Second).Error(); err != nil {
			n.log.Warn("cluster: before handing leadership on, the barrier failed", "err", err)
		}
	}
	err := transfer().Error()
	if o == nil || !n.leads(o) {
		return err
	}
	n.sendMu.Lock()
	derr := n.db.Discard()
	n.sendMu.Unlock()
	if derr != nil {
		n.log.Error("cluster: discarding the writes not taken while handing leadership on", "err", derr)
		return err
	}
	// raft answers a failed transfer a moment before it takes entries
	// again (it says so in its leaderLoop): the barrier is sent again
	// until it is taken.
	berr := n.raft.Barrier(10 * time.Second).Error()
	for deadline := time.Now().Add(10 * time.Second); errors.Is(berr, raft.ErrLeadershipTransferInProgress) && n.leads(o) && time.Now().Before(deadline); {
		time.Sleep(time.Millisecond)
		berr = n.raft.Barrier(10 * time.Second).Error()
	}
	if berr != nil || !n.leads(o) {
		n.log.Warn("cluster: still leading after handing leadership on failed, but the barrier did not pass", "err", berr)
		return err
	}
	// Unless the watch has moved the office meanwhile (a later term's).
	n.office.CompareAndSwap(nil, newOffice(o.term))
	return err
}

func (n *Node) leaveOffice() {
	n.office.Store(nil)
	n.termMu.Lock()
	n.termCancel()
	n.termMu.Unlock()
	n.sendMu.Lock()
	if err := n.db.Discard(); err != nil {
		n.log.Error("cluster: discarding the writes not committed", "err", err)
	}
	n.sendMu.Unlock()
	n.log.Info("cluster: following")
}

// TermContext returns a context that ends when this node's current term
// as leader does (already ended on a follower): held claims wait under it.
func (n *Node) TermContext() context.Context {
	n.termMu.Lock()
	defer n.termMu.Unlock()
	return n.termCtx
}

// Writable implements engine.Replicator. A write is admitted only while
// raft leads in the term this node took office in: not between the term's
// loss and leaveOffice (raft would refuse the proposal, and its write would
// stay in memory until the discard), nor in a later term before its
// takeOffice (a proposal appended there would rest on that memory). The
// watch that runs them follows raft behind, by as long as the machine
// holds it. Three atomic loads.
func (n *Node) Writable() error {
	if n.leads(n.office.Load()) {
		return nil
	}
	if n.raft != nil && n.raft.State() == raft.Leader {
		return &engine.NotLeaderError{Elected: true}
	}
	return &engine.NotLeaderError{Leader: n.LeaderURL()}
}

// LeaderURL returns the leader's HTTP URL; "" while unknown.
func (n *Node) LeaderURL() string {
	if n.raft == nil {
		return ""
	}
	_, id := n.raft.LeaderWithID()
	if id == "" {
		return ""
	}
	if v, ok := n.addrs.Load(string(id)); ok {
		return v.(string)
	}
	return ""
}

// Propose implements engine.Replicator: one write, one log entry. raft's
// leader takes every entry queued while it writes the last batch into its
// next one, so writes share the log's fsync as they share the store's.
// The answer waits for the entry to be committed (on a majority's raft
// log, fsynced) and applied to this node's memory — not for this node's
// SQLite file, which follows the log behind it on every node alike (see
// storeBehind).
func (n *Node) Propose(seq, mark uint64, changes []store.Change) func() error {
	p := &proposal{data: encodeEntry(seq, mark, changes), mark: mark, term: n.office.Load(), sent: make(chan raft.ApplyFuture, 1)}
	n.propMu.Lock()
	n.queue = append(n.queue, p)
	n.propMu.Unlock()
	select {
	case n.propWake <- struct{}{}:
	default: // already woken: the proposer takes this one too
	}
	return func() error {
		f := <-p.sent
		if f == nil {
			return &engine.NotLeaderError{Leader: n.LeaderURL()}
		}
		if err := f.Error(); err != nil {
			if errors.Is(err, raft.ErrNotLeader) {
				return &engine.NotLeaderError{Leader: n.LeaderURL()}
			}
			return engine.ReplicationError(err, "the write was not committed")
		}
		a, _ := f.Response().(applied)
		return a.err
	}
}

// StoreFailed implements engine.Replicator: a node whose file no longer
// follows the log stops taking part, so it acknowledges no entry it cannot
// keep; restarted, it replays the log from its file.
func (n *Node) StoreFailed(err error) {
	n.office.Store(nil)
	n.log.Error("cluster: this node can no longer follow the log and stops taking part until restarted", "err", err)
	go func() { _ = n.raft.Shutdown().Error() }()
}

// Shutdown stops raft and closes its files; the engine is the caller's. A
// leader first hands its leadership on, so the cluster writes on without
// waiting out an election.
func (n *Node) Shutdown() error {
	if n.raft.State() == raft.Leader {
		n.stopWriting()
		if err := n.raft.LeadershipTransfer().Error(); err != nil {
			n.log.Warn("cluster: handing leadership on before stopping", "err", err)
		}
	}
	err := n.raft.Shutdown().Error()
	close(n.propStop)
	<-n.propDone
	n.raft.DeregisterObserver(n.obs)
	close(n.obsCh)
	<-n.done
	n.office.Store(nil)
	n.termMu.Lock()
	n.termCancel()
	n.termMu.Unlock()
	n.close()
	return err
}

func (n *Node) close() {
	if n.trans != nil {
		n.trans.Close()
	}
	n.logs.Close()
}

// applied is an entry's answer to the leader that proposed it.
type applied struct{ err error }

// storeBehind and storeBehindBytes bound the writes a node has applied to
// memory and handed to its SQLite file that the file has not yet written:
// past either, the log's apply waits for the file, so a disk slower than
// the log holds raft back (and, on a follower, the leader's commits)
// instead of growing a queue without end. A write's answer does not wait
// for the file: it is durable once committed, on a majority's raft log,
// and a node that stops before its file has the write applies it again
// from its log at restart (raft replays every entry after the last
// snapshot, which is taken from the file, and the engine skips what the
// file holds). So the leader's answer takes no extra fsync in series, and
// no stall of the file — a fold of a large write into its tables, which
// the store lets a commit wait for — reaches the clients unless it
// outlasts this many writes.
const (
	storeBehind      = 8192
	storeBehindBytes = 64 << 20 // of log entries: the changes the store holds meanwhile
)

// fsm is the node as raft's state machine.
type fsm Node

func (f *fsm) Apply(l *raft.Log) any {
	n := (*Node)(f)
	seq, mark, changes, err := decodeEntry(l.Data)
	if term, tagged := entryTerm(l.Extensions); err == nil && tagged && term != l.Term {
		// Made by memory that took writes in another term than the one
		// raft appended it in: a leader that lost its term and was elected
		// again before its watch had discarded that memory, and the
		// proposal passed Writable and the send loop's look at the term
		// just before. The memory may hold a write raft refused meanwhile,
		// so this one may not follow the log. Every node skips it alike —
		// the entry decides, not the node's state, so a replay after a
		// restart skips it again — and the node that made it rebuilds that
		// memory. Its write was not done: refused, as a new leader refuses
		// writes before its barrier.
		if err := n.db.Refused(mark); err != nil {
			n.StoreFailed(fmt.Errorf("discarding the memory of a write of an earlier term (log entry %d): %w", l.Index, err))
			return applied{err: engine.ReplicationError(err, "this node could not discard its memory")}
		}
		return applied{err: &engine.NotLeaderError{Elected: true}}
	}
	if err == nil {
		var wait func() error
		if wait, err = n.db.Apply(seq, mark, changes); err == nil {
			for _, c := range changes {
				if c.Op == store.OpMetaPut && strings.HasPrefix(c.Key, addrPrefix) {
					n.addrs.Store(c.Key[len(addrPrefix):], string(c.Body))
				}
			}
			n.behind(wait, len(l.Data))
			return applied{}
		}
	}
	// This node cannot follow the log any more (an entry it cannot read,
	// or its memory and the log disagree): like a failed store, it stops
	// taking part, and a restart replays the log from its file.
	n.StoreFailed(fmt.Errorf("applying log entry %d: %w", l.Index, err))
	return applied{err: engine.ReplicationError(err, "this node could not apply the write")}
}

// behind keeps a write's wait for the file, and past storeBehind of them
// (or storeBehindBytes) waits for the older half: the file writes in
// order, so when one is written every earlier one is. A failed write is
// the store's to report (its failure event to the engine, then
// StoreFailed); here it only ends the wait. Called by raft's apply loop
// alone, as Apply and Restore are.
func (n *Node) behind(wait func() error, size int) {
	n.unwritten = append(n.unwritten, pendingWrite{wait, size})
	n.unwrittenBytes += size
	if len(n.unwritten) <= storeBehind && n.unwrittenBytes <= storeBehindBytes {
		return
	}
	half := max(1, len(n.unwritten)/2)
	_ = n.unwritten[half-1].wait()
	for _, w := range n.unwritten[:half] {
		n.unwrittenBytes -= w.size
	}
	n.unwritten = append(n.unwritten[:0], n.unwritten[half:]...)
}

// pendingWrite is a write applied here that the file may not have yet.
type pendingWrite struct {
	wait func() error
	size int // of its log entry
}
