package cluster

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/hashicorp/raft"
)

// A snapshot is a copy of the store's SQLite file as the log had committed
// it (store.Store.Backup): a node that is far behind, or new, gets it and
// then the log's tail, and raft truncates its log behind it.

func (f *fsm) Snapshot() (raft.FSMSnapshot, error) {
	n := (*Node)(f)
	tmp, err := os.CreateTemp(n.cfg.Dir, "snapshot-*.db")
	if err != nil {
		return nil, err
	}
	path := tmp.Name()
	tmp.Close()
	os.Remove(path) // VACUUM INTO wants a path with no file
	if _, err := n.db.Backup(context.Background(), path); err != nil {
		os.Remove(path)
		return nil, err
	}
	return fileSnapshot(path), nil
}

// fileSnapshot is a copy of the file waiting to be written to raft's
// snapshot store.
type fileSnapshot string

func (s fileSnapshot) Persist(sink raft.SnapshotSink) error {
	f, err := os.Open(string(s))
	if err != nil {
		sink.Cancel()
		return err
	}
	defer f.Close()
	if _, err := io.Copy(sink, f); err != nil {
		sink.Cancel()
		return err
	}
	return sink.Close()
}

func (s fileSnapshot) Release() { os.Remove(string(s)) }

// Restore replaces this node's file with a snapshot's, and its memory.
func (f *fsm) Restore(rc io.ReadCloser) error {
	n := (*Node)(f)
	defer rc.Close()
	path := filepath.Join(n.cfg.Dir, "restore.db")
	out, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, rc); err != nil {
		out.Close()
		os.Remove(path)
		return err
	}
	if err := out.Sync(); err != nil {
		out.Close()
		os.Remove(path)
		return err
	}
	if err := out.Close(); err != nil {
		return err
	}
	// The file is replaced: its writes pending were written as it closed.
	n.unwritten, n.unwrittenBytes = nil, 0
	if err := n.db.Restore(path); err != nil {
		return fmt.Errorf("cluster: restoring a snapshot: %w", err)
	}
	n.learnAddrs()
	return nil
}

// Seed makes dir the raft directory of the first node of a new cluster
// whose state is the file at path (a restored backup holding seq writes):
// one snapshot of the file, its configuration this node alone (id at
// raftAddr). The node then starts with raft state (Start refuses a file
// with writes and none) and leads itself; each node added afterwards is
// sent the snapshot, then the log from there (docs/cluster.md, "Restoring
// a cluster"). The snapshot's index is seq: every entry the new log takes
// comes after it.
func Seed(dir, id, raftAddr, path string, seq uint64) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	logs, err := openLogStore(filepath.Join(dir, "raft.db"))
	if err != nil {
		return err
	}
	snaps, err := raft.NewFileSnapshotStore(dir, 2, io.Discard)
	if err != nil {
		logs.Close()
		return err
	}
	existing, err := raft.HasExistingState(logs, logs, snaps)
	logs.Close()
	if err != nil {
		return err
	}
	if existing {
		return fmt.Errorf("cluster: %s already holds raft state: a seed starts a new cluster", dir)
	}
	conf := raft.Configuration{Servers: []raft.Server{{ID: raft.ServerID(id), Address: raft.ServerAddress(raftAddr), Suffrage: raft.Voter}}}
	// The transport only encodes the peers of the snapshot's older format.
	_, trans := raft.NewInmemTransport(raft.ServerAddress(raftAddr))
	defer trans.Close()
	index := max(seq, 1)
	sink, err := snaps.Create(raft.SnapshotVersionMax, index, 1, conf, index, trans)
	if err != nil {
		return err
	}
	return fileSnapshot(path).Persist(sink)
}
