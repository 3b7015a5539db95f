package cluster

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fenecdb/fenec/server/engine"
	"github.com/fenecdb/fenec/server/httpapi/apitest"
	"github.com/fenecdb/fenec/server/internal/testwait"
	"github.com/fenecdb/fenec/server/store"
)

// The tests run nodes in this process and wait on their elections and
// commits far more than they compute: more of them than cores at once.
func TestMain(m *testing.M) {
	flag.Parse()
	testwait.Parallel(4)
	os.Exit(m.Run())
}

// The end-to-end tests run real `fenec serve` nodes (cmd/fenec); these
// run three nodes in one process, each with its own engine, SQLite file,
// raft log and TCP transport on loopback, to reach the store's fault hook.

type testNode struct {
	db      *engine.DB
	n       *Node
	stopped bool
}

func (nd *testNode) stop() {
	if !nd.stopped {
		nd.stopped = true
		_ = nd.n.Shutdown()
		_ = nd.db.Close()
	}
}

// count returns the notes a database holds, from its JSON answer.
func count(t *testing.T, db *engine.DB) string {
	t.Helper()
	r, err := db.Exec(context.Background(), "get notes count", nil)
	if err != nil {
		t.Fatal(err)
	}
	return string(r.AppendJSON(nil))
}

// startNodes starts k nodes whose stores ask fault before each write.
func startNodes(t *testing.T, k int, fault func(at string) error) []*testNode {
	t.Helper()
	return startNodesWith(t, k, fault, Config{})
}

// startNodesWith starts k nodes with base's timings.
func startNodesWith(t *testing.T, k int, fault func(at string) error, base Config) []*testNode {
	t.Helper()
	dir := t.TempDir()
	var peers []Peer
	for i := 1; i <= k; i++ {
		peers = append(peers, Peer{ID: fmt.Sprintf("n%d", i), Addr: apitest.FreeAddr(t)})
	}
	var nodes []*testNode
	for _, p := range peers {
		db, err := engine.Open(engine.Options{File: filepath.Join(dir, p.ID+".db"), Sync: store.SyncMode{Kind: store.SyncAlways}, StoreFault: fault})
		if err != nil {
			t.Fatal(err)
		}
		cfg := base
		cfg.ID, cfg.RaftAddr, cfg.HTTPURL, cfg.Dir, cfg.Bootstrap = p.ID, p.Addr, "http://"+p.ID, filepath.Join(dir, p.ID+".raft"), peers
		n, err := Start(db, cfg)
		if err != nil {
			t.Fatal(err)
		}
		nd := &testNode{db: db, n: n}
		nodes = append(nodes, nd)
		t.Cleanup(nd.stop)
	}
	return nodes
}

// leader waits for the node that takes writes.
func leader(t *testing.T, nodes []*testNode) *testNode {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		for _, nd := range nodes {
			if nd.n.Writable() == nil {
				return nd
			}
		}
	}
	t.Fatal("no leader within 20 s")
	return nil
}

// TestAnswerDoesNotWaitForTheFile: a write is answered once the log has
// committed it, even while the leader's SQLite file is stalled (here by
// the store's fault hook; in life by a fold of a large write into its
// tables, or a slow disk); the file catches up behind, and past
// storeBehind writes not yet written the log's apply waits for it.
// Before, every answer on the leader waited for its file too: an fsync
// in series with the log's, and each stall of the file in full
// (docs/cluster.md, Timings).
func TestAnswerDoesNotWaitForTheFile(t *testing.T) {
	t.Parallel()
	var stall atomic.Int64 // ns each write to a file is held, while set
	nodes := startNodes(t, 3, func(at string) error {
		if at == store.FaultCommit {
			time.Sleep(time.Duration(stall.Load()))
		}
		return nil
	})
	lead := leader(t, nodes)
	ctx := context.Background()
	if _, err := lead.db.Exec(ctx, "create collection notes (n int)", nil); err != nil {
		t.Fatal(err)
	}
	// Let every node's file take the create, then stall every node's
	// file for 2 s a write.
	for _, nd := range nodes {
		testwait.Until(t, nd.n.cfg.ID+"'s file taking the create", func() bool { return nd.db.Seq() >= lead.db.Seq() })
	}
	const hold = 2 * time.Second
	stall.Store(int64(hold))
	defer stall.Store(0)
	for i := 0; i < 3; i++ {
		start := time.Now()
		r, err := lead.db.Exec(ctx, "put notes {n: 1}", nil)
		if err != nil {
			t.Fatal(err)
		}
		if took := time.Since(start); took >= hold {
			t.Errorf("write %d (seq %d) answered after %v: it waited for the stalled file", i, r.Seq, took)
		}
	}
	stall.Store(0)
	// The file follows: every node's holds the writes once it stops.
	want := count(t, lead.db)
	for _, nd := range nodes {
		deadline := time.Now().Add(20 * time.Second)
		for nd.db.Seq() < lead.db.Seq() && time.Now().Before(deadline) {
			time.Sleep(20 * time.Millisecond)
		}
	}
	for _, nd := range nodes {
		file := nd.n.cfg.Dir[:len(nd.n.cfg.Dir)-len(".raft")] + ".db"
		nd.stop()
		db, err := engine.Open(engine.Options{File: file})
		if err != nil {
			t.Fatal(err)
		}
		if got := count(t, db); got != want || want != `[{"count":3}]` {
			t.Errorf("%s's file holds %s; the leader answered %s, want 3 notes", nd.n.cfg.ID, got, want)
		}
		db.Close()
	}
}
