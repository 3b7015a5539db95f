package engine

// Durable returns the last write that is kept whatever happens next: on a
// lone server the store's (the file has it, synced under --sync always or
// an interval; every write with no file); on a cluster node the last one
// the log has committed and this node applied (a leader's memory may hold
// writes it proposed that the log never commits: docs/cluster.md, A
// leader that loses its term). A change stream hands out no write after
// it, so that a consumer never acts on a write that is then undone.
func (db *DB) Durable() uint64 {
	db.mu.RLock()
	seq, stored, cluster := db.seq, db.repl.stored, db.repl.r != nil
	db.mu.RUnlock()
	if cluster {
		return stored
	}
	return min(db.st.Durable(), seq)
}

// Clustered reports whether the database is a cluster node (SetReplicator).
func (db *DB) Clustered() bool {
	db.mu.RLock()
	defer db.mu.RUnlock()
	return db.repl.r != nil
}
