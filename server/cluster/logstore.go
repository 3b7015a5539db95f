package cluster

import (
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"
	_ "modernc.org/sqlite" // the driver the store uses too
)

// logStore is raft's log and stable store in a SQLite file of its own,
// beside the database's (docs/cluster.md: why not raft-boltdb). A batch of
// entries is one transaction, so one fsync: this is where the leader's
// group commit lands.
type logStore struct {
	db *sql.DB
	// writes and entries count StoreLogs calls and the entries they
	// stored: their ratio is the group commit's batch (metrics).
	writes, entries atomic.Uint64
}

func openLogStore(path string) (*logStore, error) {
	q := url.Values{"_pragma": {"busy_timeout(5000)", "journal_mode(WAL)", "synchronous(FULL)", "locking_mode(EXCLUSIVE)"}}
	db, err := sql.Open("sqlite", "file:"+(&url.URL{Path: path}).EscapedPath()+"?"+q.Encode())
	if err != nil {
		return nil, fmt.Errorf("raft log %s: %w", path, err)
	}
	db.SetMaxOpenConns(1)
	_, err = db.Exec(`CREATE TABLE IF NOT EXISTS log(idx INTEGER PRIMARY KEY, term INTEGER NOT NULL, type INTEGER NOT NULL, data BLOB, ext BLOB, at INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS kv(key BLOB PRIMARY KEY, value BLOB NOT NULL)`)
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("raft log %s: %w", path, err)
	}
	return &logStore{db: db}, nil
}

func (s *logStore) Close() error { return s.db.Close() }

func (s *logStore) FirstIndex() (uint64, error) {
	var i sql.NullInt64
	err := s.db.QueryRow(`SELECT min(idx) FROM log`).Scan(&i)
	return uint64(i.Int64), err
}

func (s *logStore) LastIndex() (uint64, error) {
	var i sql.NullInt64
	err := s.db.QueryRow(`SELECT max(idx) FROM log`).Scan(&i)
	return uint64(i.Int64), err
}

func (s *logStore) GetLog(index uint64, l *raft.Log) error {
	var at int64
	var typ uint8
	err := s.db.QueryRow(`SELECT idx, term, type, data, ext, at FROM log WHERE idx = ?`, int64(index)).
		Scan(&l.Index, &l.Term, &typ, &l.Data, &l.Extensions, &at)
	if errors.Is(err, sql.ErrNoRows) {
		return raft.ErrLogNotFound
	}
	l.Type = raft.LogType(typ)
	l.AppendedAt = time.Unix(0, at)
	return err
}

func (s *logStore) StoreLog(l *raft.Log) error { return s.StoreLogs([]*raft.Log{l}) }

func (s *logStore) StoreLogs(logs []*raft.Log) error {
	tx, err := s.db.Begin()
	if err != nil {
		return err
	}
	defer tx.Rollback()
	st, err := tx.Prepare(`INSERT OR REPLACE INTO log(idx, term, type, data, ext, at) VALUES (?, ?, ?, ?, ?, ?)`)
	if err != nil {
		return err
	}
	defer st.Close()
	for _, l := range logs {
		if _, err := st.Exec(int64(l.Index), int64(l.Term), int64(l.Type), l.Data, l.Extensions, l.AppendedAt.UnixNano()); err != nil {
			return err
		}
	}
	if err := tx.Commit(); err != nil {
		return err
	}
	s.writes.Add(1)
	s.entries.Add(uint64(len(logs)))
	return nil
}

func (s *logStore) DeleteRange(min, max uint64) error {
	_, err := s.db.Exec(`DELETE FROM log WHERE idx >= ? AND idx <= ?`, int64(min), int64(max))
	return err
}

func (s *logStore) Set(key, val []byte) error {
	_, err := s.db.Exec(`INSERT OR REPLACE INTO kv(key, value) VALUES (?, ?)`, key, val)
	return err
}

// Get returns raft's stable value; a missing key is raft's "not found",
// an error whose text it matches.
func (s *logStore) Get(key []byte) ([]byte, error) {
	var v []byte
	err := s.db.QueryRow(`SELECT value FROM kv WHERE key = ?`, key).Scan(&v)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, errors.New("not found")
	}
	return v, err
}

func (s *logStore) SetUint64(key []byte, val uint64) error {
	var b [8]byte
	for i := range b {
		b[i] = byte(val >> (8 * i))
	}
	return s.Set(key, b[:])
}

func (s *logStore) GetUint64(key []byte) (uint64, error) {
	v, err := s.Get(key)
	if err != nil {
		return 0, err
	}
	var n uint64
	for i := 0; i < len(v) && i < 8; i++ {
		n |= uint64(v[i]) << (8 * i)
	}
	return n, nil
}
