package cluster

import (
	"errors"
	"fmt"
	"time"

	"github.com/hashicorp/raft"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/fenecdb/fenec/server/engine"
)

// Member is one server of the cluster's configuration.
type Member struct {
	ID, RaftAddr, URL string
	Voter, Leader     bool
	// On the leader, for another member: what it has learnt of that
	// member's log in this term (lag.go). Known is false elsewhere.
	Known bool
	FollowerState
	Lag uint64 // the leader's last index past Match
}

// Status is this node's view of its cluster.
type Status struct {
	ID, Role, LeaderID, LeaderURL                   string
	Term, CommitIndex, AppliedIndex, LastIndex, Seq uint64
	LeaderChanges                                   uint64
	Members                                         []Member
}

// Status returns the node's view now.
func (n *Node) Status() Status {
	_, leader := n.raft.LeaderWithID()
	st := Status{
		ID: n.cfg.ID, Role: roleName(n.raft.State()), LeaderID: string(leader), LeaderURL: n.LeaderURL(),
		Term: n.raft.CurrentTerm(), CommitIndex: n.raft.CommitIndex(), AppliedIndex: n.raft.AppliedIndex(),
		LastIndex: n.raft.LastIndex(), Seq: n.db.Seq(), LeaderChanges: n.changes.Load(),
	}
	leading := st.Role == "leader"
	if f := n.raft.GetConfiguration(); f.Error() == nil {
		for _, s := range f.Configuration().Servers {
			m := Member{ID: string(s.ID), RaftAddr: string(s.Address), Voter: s.Suffrage == raft.Voter, Leader: s.ID == leader}
			if v, ok := n.addrs.Load(string(s.ID)); ok {
				m.URL = v.(string)
			}
			if leading && string(s.ID) != n.cfg.ID {
				m.Known = true
				m.FollowerState = n.peers.state(s.ID, st.Term)
				m.Lag = lag(st.LastIndex, m.Match)
			}
			st.Members = append(st.Members, m)
		}
	}
	return st
}

// lag is how far a follower's log is behind the leader's last entry, in
// entries; a follower not heard from in this term counts as holding none.
func lag(last, match uint64) uint64 {
	if last > match {
		return last - match
	}
	return 0
}

func roleName(s raft.RaftState) string {
	switch s {
	case raft.Leader:
		return "leader"
	case raft.Candidate:
		return "candidate"
	case raft.Follower:
		return "follower"
	}
	return "shutdown"
}

// adminTimeout bounds a membership change or a transfer.
const adminTimeout = 10 * time.Second

func (n *Node) adminError(err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, raft.ErrNotLeader) {
		return &engine.NotLeaderError{Leader: n.LeaderURL()}
	}
	return engine.ReplicationError(err, "the cluster's change")
}

// AddMember adds a voter, or a non-voter (a read replica).
func (n *Node) AddMember(id, raftAddr string, voter bool) error {
	if n.raft.State() != raft.Leader {
		return &engine.NotLeaderError{Leader: n.LeaderURL()}
	}
	var f raft.IndexFuture
	if voter {
		f = n.raft.AddVoter(raft.ServerID(id), raft.ServerAddress(raftAddr), 0, adminTimeout)
	} else {
		f = n.raft.AddNonvoter(raft.ServerID(id), raft.ServerAddress(raftAddr), 0, adminTimeout)
	}
	return n.adminError(f.Error())
}

// RemoveMember removes a node.
func (n *Node) RemoveMember(id string) error {
	if n.raft.State() != raft.Leader {
		return &engine.NotLeaderError{Leader: n.LeaderURL()}
	}
	if !n.isMember(id) {
		return fmt.Errorf("%w: no member %q", errUnknownMember, id)
	}
	return n.adminError(n.raft.RemoveServer(raft.ServerID(id), 0, adminTimeout).Error())
}

var errUnknownMember = errors.New("cluster: unknown member")

// IsUnknownMember reports an error naming a node that is no member.
func IsUnknownMember(err error) bool { return errors.Is(err, errUnknownMember) }

func (n *Node) isMember(id string) bool {
	f := n.raft.GetConfiguration()
	if f.Error() != nil {
		return false
	}
	for _, s := range f.Configuration().Servers {
		if string(s.ID) == id {
			return true
		}
	}
	return false
}

// Transfer hands leadership to the voter id, or to the one raft picks.
func (n *Node) Transfer(id string) error {
	if n.raft.State() != raft.Leader {
		return &engine.NotLeaderError{Leader: n.LeaderURL()}
	}
	if id == "" {
		return n.adminError(n.handOn(n.raft.LeadershipTransfer))
	}
	f := n.raft.GetConfiguration()
	if err := f.Error(); err != nil {
		return n.adminError(err)
	}
	for _, s := range f.Configuration().Servers {
		if string(s.ID) == id {
			if s.Suffrage != raft.Voter {
				return fmt.Errorf("%w: %q is not a voter", errUnknownMember, id)
			}
			return n.adminError(n.handOn(func() raft.Future { return n.raft.LeadershipTransferToServer(s.ID, s.Address) }))
		}
	}
	return fmt.Errorf("%w: no member %q", errUnknownMember, id)
}

// NotLeader is the refusal of a write on this node now.
func (n *Node) NotLeader() error { return &engine.NotLeaderError{Leader: n.LeaderURL()} }

// Collector returns the node's gauges (docs/cluster.md, Metrics).
func (n *Node) Collector() prometheus.Collector { return collector{n} }

type collector struct{ n *Node }

var (
	descRole    = prometheus.NewDesc("fenec_cluster_role", "This node's role: 1 on the role it has (leader, follower, candidate, shutdown).", []string{"role"}, nil)
	descTerm    = prometheus.NewDesc("fenec_cluster_term", "The raft term this node is in.", nil, nil)
	descCommit  = prometheus.NewDesc("fenec_cluster_commit_index", "The log's last entry this node knows committed.", nil, nil)
	descApplied = prometheus.NewDesc("fenec_cluster_applied_index", "The log's last entry applied on this node.", nil, nil)
	descLast    = prometheus.NewDesc("fenec_cluster_last_index", "The log's last entry stored on this node.", nil, nil)
	descChanges = prometheus.NewDesc("fenec_cluster_leader_changes_total", "Leaders this node has seen since it started.", nil, nil)
	descContact = prometheus.NewDesc("fenec_cluster_last_contact_seconds", "On a follower, the time since it last heard from the leader.", nil, nil)
	descWrites  = prometheus.NewDesc("fenec_cluster_log_writes_total", "Batches of entries this node wrote to its raft log: one transaction, one fsync each.", nil, nil)
	descEntries = prometheus.NewDesc("fenec_cluster_log_entries_total", "Entries this node wrote to its raft log (each a write's changes, or raft's own).", nil, nil)
	descMatch   = prometheus.NewDesc("fenec_cluster_follower_match_index", "On the leader, per follower: the log's last entry known to be in that follower's log (0 until it answers in this term).", []string{"node"}, nil)
	descLag     = prometheus.NewDesc("fenec_cluster_follower_lag_entries", "On the leader, per follower: the leader's last index past the follower's match index.", []string{"node"}, nil)
	descPeerAt  = prometheus.NewDesc("fenec_cluster_follower_last_contact_seconds", "On the leader, per follower: the time since it last answered (absent until it answers in this term).", []string{"node"}, nil)
)

func (c collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descRole, descTerm, descCommit, descApplied, descLast, descChanges, descContact, descWrites, descEntries, descMatch, descLag, descPeerAt} {
		ch <- d
	}
}

func (c collector) Collect(ch chan<- prometheus.Metric) {
	r := c.n.raft
	state := roleName(r.State())
	for _, role := range []string{"leader", "follower", "candidate", "shutdown"} {
		v := 0.0
		if role == state {
			v = 1
		}
		ch <- prometheus.MustNewConstMetric(descRole, prometheus.GaugeValue, v, role)
	}
	ch <- prometheus.MustNewConstMetric(descTerm, prometheus.GaugeValue, float64(r.CurrentTerm()))
	ch <- prometheus.MustNewConstMetric(descCommit, prometheus.GaugeValue, float64(r.CommitIndex()))
	ch <- prometheus.MustNewConstMetric(descApplied, prometheus.GaugeValue, float64(r.AppliedIndex()))
	ch <- prometheus.MustNewConstMetric(descLast, prometheus.GaugeValue, float64(r.LastIndex()))
	ch <- prometheus.MustNewConstMetric(descChanges, prometheus.CounterValue, float64(c.n.changes.Load()))
	ch <- prometheus.MustNewConstMetric(descWrites, prometheus.CounterValue, float64(c.n.logs.writes.Load()))
	ch <- prometheus.MustNewConstMetric(descEntries, prometheus.CounterValue, float64(c.n.logs.entries.Load()))
	if state == "leader" {
		c.followers(ch)
	}
	if state == "follower" {
		if last := r.LastContact(); !last.IsZero() {
			ch <- prometheus.MustNewConstMetric(descContact, prometheus.GaugeValue, time.Since(last).Seconds())
		}
	}
}

// followers sends the leader's gauges of each other member.
func (c collector) followers(ch chan<- prometheus.Metric) {
	r := c.n.raft
	f := r.GetConfiguration()
	if f.Error() != nil {
		return
	}
	term, last := r.CurrentTerm(), r.LastIndex()
	for _, s := range f.Configuration().Servers {
		if string(s.ID) == c.n.cfg.ID {
			continue
		}
		fs := c.n.peers.state(s.ID, term)
		ch <- prometheus.MustNewConstMetric(descMatch, prometheus.GaugeValue, float64(fs.Match), string(s.ID))
		ch <- prometheus.MustNewConstMetric(descLag, prometheus.GaugeValue, float64(lag(last, fs.Match)), string(s.ID))
		if !fs.Contact.IsZero() {
			ch <- prometheus.MustNewConstMetric(descPeerAt, prometheus.GaugeValue, time.Since(fs.Contact).Seconds(), string(s.ID))
		}
	}
}
