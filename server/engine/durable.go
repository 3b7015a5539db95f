package engine

// Durable returns the last write that is kept whatever happens next: on a
// lone server the store's (the file has it, synced under --sync always or
// an interval; every write with no file); on a cluster node its last
// applied write, which the log has committed (a leader's own writes
// excepted: docs/changes.md, Not yet). A change stream hands out no
// write after it, so that a consumer never acts on a write a crash undoes.
func (db *DB) Durable() uint64 {
	db.mu.RLock()
	seq, cluster := db.seq, db.repl.r != nil
	db.mu.RUnlock()
	if cluster {
		return seq
	}
	return min(db.st.Durable(), seq)
}
