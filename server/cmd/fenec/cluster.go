package main

import (
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/fenecdb/fenec/server/cluster"
	"github.com/fenecdb/fenec/server/engine"
	"github.com/fenecdb/fenec/server/httpapi"
	"github.com/fenecdb/fenec/server/httpapi/gen"
	"github.com/fenecdb/fenec/server/tlsfiles"
)

// clusterFlags make `fenec serve` a cluster node (docs/cluster.md). With
// no --node-id the server is alone, as before, and none of this runs.
type clusterFlags struct {
	id, raft, advertise, dir, bootstrap, url string
	cert, key, ca                            string
	snapshotEvery                            uint64
	snapshotCheck                            time.Duration
	peers                                    []cluster.Peer
}

func (c *clusterFlags) define(fs *flag.FlagSet) {
	fs.StringVar(&c.id, "node-id", "", "make this server a cluster node with this `name`, unique in its cluster and kept for life (docs/cluster.md)")
	fs.StringVar(&c.raft, "raft", "", "the `host:port` a cluster node's raft transport listens on")
	fs.StringVar(&c.advertise, "raft-advertise", "", "the `host:port` other nodes reach --raft at (default --raft)")
	fs.StringVar(&c.dir, "raft-dir", "", "the `directory` of a cluster node's raft log and snapshots (default <file>.raft)")
	fs.StringVar(&c.bootstrap, "bootstrap", "", "the first voters, `id=host:port,...` (this node among them); used only on the first start, when --raft-dir is empty")
	fs.Uint64Var(&c.snapshotEvery, "raft-snapshot-every", 8192, "snapshot a cluster node's file, and truncate its log, after this many `entries`")
	fs.DurationVar(&c.snapshotCheck, "raft-snapshot-check", 5*time.Second, "how often raft looks whether --raft-snapshot-every entries have passed, as a `duration` (each look waits between it and twice it)")
	fs.StringVar(&c.url, "advertise-http", "", "the `URL` clients reach this node's API at, named to them by followers (default http://<the --http address>, https:// under --tls-cert)")
	fs.StringVar(&c.cert, "node-cert", "", "carry raft over mutual TLS: this node's PEM certificate `file`, signed by --node-ca; re-read when it changes")
	fs.StringVar(&c.key, "node-key", "", "the PEM private key `file` of --node-cert; re-read when it changes")
	fs.StringVar(&c.ca, "node-ca", "", "the PEM `file` of the cluster's CA: only nodes with a certificate it signed may connect to raft, and only they are dialed")
}

func (c *clusterFlags) check(file, sync string) error {
	if c.id == "" {
		if c.raft != "" || c.bootstrap != "" || c.advertise != "" || c.dir != "" || c.url != "" || c.cert != "" || c.key != "" || c.ca != "" {
			return errors.New("--raft, --raft-advertise, --raft-dir, --bootstrap, --advertise-http and --node-cert, --node-key, --node-ca need --node-id")
		}
		return nil
	}
	if (c.cert == "") != (c.key == "") || (c.cert == "") != (c.ca == "") {
		return errors.New("--node-cert, --node-key and --node-ca go together")
	}
	if c.raft == "" {
		return errors.New("--node-id needs --raft")
	}
	if c.snapshotEvery == 0 {
		return errors.New("--raft-snapshot-every 0: want 1 or more entries")
	}
	if c.snapshotCheck < 10*time.Millisecond {
		return fmt.Errorf("--raft-snapshot-check %v: want 10ms or more", c.snapshotCheck)
	}
	if file == ":memory:" {
		return errors.New("a cluster node needs a --file: the log's snapshots are copies of it")
	}
	if sync == "off" {
		// A crash could leave the file behind the last snapshot, whose log
		// entries are gone: docs/cluster.md.
		return errors.New("a cluster node needs --sync always or an interval, not off")
	}
	if c.dir == "" {
		c.dir = file + ".raft"
	}
	if c.bootstrap != "" {
		peers, err := cluster.ParsePeers(c.bootstrap)
		if err != nil {
			return fmt.Errorf("--bootstrap: %w", err)
		}
		found := false
		for _, p := range peers {
			found = found || p.ID == c.id
		}
		if !found {
			return fmt.Errorf("--bootstrap does not name this node (--node-id %s)", c.id)
		}
		c.peers = peers
	}
	return nil
}

// node is the running cluster node; nil when the server is alone.
type node struct{ n *cluster.Node }

func startNode(o options, db *engine.DB, httpURL string, metrics *httpapi.Metrics, log *slog.Logger) (*node, error) {
	c := o.cluster
	if c.id == "" {
		return nil, nil
	}
	url := c.url
	if url == "" {
		url = httpURL
	}
	cfg := cluster.Config{ID: c.id, RaftAddr: c.raft, Advertise: c.advertise, HTTPURL: strings.TrimSuffix(url, "/"),
		Dir: c.dir, Bootstrap: c.peers, Log: log, SnapshotThreshold: c.snapshotEvery,
		SnapshotCheck: c.snapshotCheck}
	if c.cert != "" {
		// Both ends are Fenec nodes: TLS 1.3, nothing older.
		files, err := tlsfiles.Load(c.cert, c.key, c.ca, tlsfiles.Options{MinVersion: tls.VersionTLS13})
		if err != nil {
			return nil, fmt.Errorf("--node-cert: %w", err)
		}
		cfg.ServerTLS = files.ServerConfig()
		if cfg.DialTLS, err = files.PeerConfig(); err != nil {
			return nil, err
		}
	}
	n, err := cluster.Start(db, cfg)
	if err != nil {
		return nil, err
	}
	if err := metrics.Register(n.Collector()); err != nil {
		n.Shutdown()
		return nil, err
	}
	log.Info("cluster node", "id", c.id, "raft", c.raft, "dir", c.dir, "url", url, "mutual_tls", c.cert != "")
	return &node{n}, nil
}

func (nd *node) api() httpapi.Cluster {
	if nd == nil {
		return nil
	}
	return nd
}

func (nd *node) shutdown() {
	if nd != nil {
		_ = nd.n.Shutdown()
	}
}

func (nd *node) Status() gen.ClusterStatus {
	s := nd.n.Status()
	out := gen.ClusterStatus{Id: s.ID, Role: gen.ClusterStatusRole(s.Role), Term: int64(s.Term), CommitIndex: int64(s.CommitIndex),
		AppliedIndex: int64(s.AppliedIndex), LastIndex: int64(s.LastIndex), Seq: int64(s.Seq), LeaderChanges: int64(s.LeaderChanges),
		Members: []gen.ClusterMember{}}
	if s.LeaderID != "" {
		out.LeaderId = &s.LeaderID
	}
	if s.LeaderURL != "" {
		out.LeaderUrl = &s.LeaderURL
	}
	for _, m := range s.Members {
		gm := gen.ClusterMember{Id: m.ID, RaftAddress: m.RaftAddr, Voter: m.Voter, Leader: m.Leader}
		if m.URL != "" {
			u := m.URL
			gm.Url = &u
		}
		if m.Known {
			match, lag := int64(m.Match), int64(m.Lag)
			gm.MatchIndex, gm.LagEntries = &match, &lag
			if !m.Contact.IsZero() {
				ms := time.Since(m.Contact).Milliseconds()
				gm.LastContactMs = &ms
			}
		}
		out.Members = append(out.Members, gm)
	}
	return out
}

func (nd *node) member(err error) error {
	if cluster.IsUnknownMember(err) {
		return fmt.Errorf("%w: %v", httpapi.ErrNoMember, err)
	}
	return err
}

func (nd *node) AddMember(id, raftAddr string, voter bool) error {
	return nd.n.AddMember(id, raftAddr, voter)
}
func (nd *node) RemoveMember(id string) error { return nd.member(nd.n.RemoveMember(id)) }
func (nd *node) Transfer(id string) error     { return nd.member(nd.n.Transfer(id)) }
func (nd *node) TermContext() context.Context { return nd.n.TermContext() }
func (nd *node) NotLeader() error             { return nd.n.NotLeader() }
