// The SQLite layer: the file's format, its check at open, and the
// statements run outside the folds (fold.go holds theirs).

package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"

	"modernc.org/sqlite"
)

// The file format. The application id marks a SQLite file as Fenec's; the
// format version (SQLite's user_version) changes when the tables do.
// Version 1 kept the log in the log table; version 2 keeps it in segment
// files beside the SQLite file (logfile.go), so a build that reads only
// version 1 (and would ignore the segments) refuses it. A version 1 file is
// upgraded at open: its log rows are replayed and folded as before, and
// the table stays, empty, in every file.
const (
	applicationID = 0x46454e43 // "FENC"
	formatVersion = 2
	legacyVersion = 1
)

const schemaSQL = `
CREATE TABLE state(key TEXT PRIMARY KEY, value INTEGER NOT NULL) WITHOUT ROWID;
INSERT INTO state(key, value) VALUES ('folded_seq', 0);
CREATE TABLE log(seq INTEGER PRIMARY KEY, body BLOB NOT NULL);
CREATE TABLE collections(name TEXT PRIMARY KEY, seqno INTEGER NOT NULL, schema BLOB, next_id INTEGER NOT NULL);
CREATE TABLE docs(coll TEXT NOT NULL, id INTEGER NOT NULL, body BLOB, PRIMARY KEY(coll, id)) WITHOUT ROWID;
CREATE TABLE meta(key TEXT PRIMARY KEY, body BLOB, expires INTEGER NOT NULL);
`

// prepare checks that the file is a Fenec store of a known format (or
// empty, and then creates the tables), switches it to WAL mode and takes
// the exclusive lock.
func (s *Store) prepare(path string) error {
	ctx := context.Background()
	conn, err := s.db.Conn(ctx)
	if err != nil {
		return describeOpenError(path, err)
	}
	s.conn = conn
	var appID, version, objects int64
	err = conn.QueryRowContext(ctx, `SELECT (SELECT application_id FROM pragma_application_id), (SELECT user_version FROM pragma_user_version), (SELECT count(*) FROM sqlite_schema)`).Scan(&appID, &version, &objects)
	if err != nil {
		return describeOpenError(path, err)
	}
	switch {
	case appID == 0 && objects == 0:
		// A new (or empty) file: make it a Fenec store.
		if err := s.exec(ctx, "BEGIN IMMEDIATE", schemaSQL,
			"PRAGMA application_id = "+strconv.Itoa(applicationID),
			"PRAGMA user_version = "+strconv.Itoa(formatVersion),
			"COMMIT"); err != nil {
			return fmt.Errorf("store: create %s: %w", path, err)
		}
	case appID != applicationID:
		return fmt.Errorf("store: %s is a SQLite database but not a Fenec store", path)
	case version != formatVersion && version != legacyVersion:
		return fmt.Errorf("store: %s has Fenec format version %d; this build reads versions %d and %d", path, version, legacyVersion, formatVersion)
	default:
		// A damaged file could load in part, with nothing said: check its
		// structure (every page, every B-tree, the schema) before loading.
		// It reads the whole file once.
		if err := quickCheck(ctx, conn); err != nil {
			return fmt.Errorf("store: %s is damaged and was not opened (%w); restore it from a backup, or recover what can be read with the sqlite3 shell's .recover command", path, err)
		}
	}
	var jm string
	if err := conn.QueryRowContext(ctx, `PRAGMA journal_mode = WAL`).Scan(&jm); err != nil {
		return describeOpenError(path, err)
	}
	if jm != "wal" {
		return fmt.Errorf("store: %s: cannot switch to WAL mode (journal mode is %s)", path, jm)
	}
	// In exclusive locking mode the first write takes the lock and keeps it;
	// take it now, so a second server fails here rather than later. A
	// version 1 file becomes version 2 here, before any segment is made.
	stmts := []string{"BEGIN IMMEDIATE", "COMMIT"}
	if version == legacyVersion {
		stmts = []string{"BEGIN IMMEDIATE", "PRAGMA user_version = " + strconv.Itoa(formatVersion), "COMMIT"}
	}
	if err := s.exec(ctx, stmts...); err != nil {
		return describeOpenError(path, err)
	}
	// The WAL SQLite writes, opened here too so that dropFolded can sync
	// it: a sync applies to the file, whichever descriptor asks. In
	// exclusive locking mode SQLite keeps this one file (it only truncates
	// it) until the connection closes.
	if s.wal, err = os.OpenFile(path+"-wal", os.O_RDWR|os.O_CREATE, 0o644); err != nil {
		return fmt.Errorf("store: %s: opening its WAL: %w", path, err)
	}
	if version == legacyVersion {
		if err := fdatasync(s.wal); err != nil {
			return fmt.Errorf("store: %s: syncing its WAL: %w", path, err)
		}
	}
	return nil
}

// quickCheck runs PRAGMA quick_check and returns its findings as an error.
func quickCheck(ctx context.Context, conn *sql.Conn) error {
	var found []string
	rows, err := conn.QueryContext(ctx, `PRAGMA quick_check(10)`)
	if err != nil {
		return fmt.Errorf("PRAGMA quick_check: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var line string
		if err := rows.Scan(&line); err != nil {
			return fmt.Errorf("PRAGMA quick_check: %w", err)
		}
		if line != "ok" {
			found = append(found, line)
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("PRAGMA quick_check: %w", err)
	}
	if len(found) > 0 {
		return fmt.Errorf("PRAGMA quick_check: %s", strings.Join(found, "; "))
	}
	return nil
}

func describeOpenError(path string, err error) error {
	var se *sqlite.Error
	if errors.As(err, &se) {
		switch se.Code() & 0xff {
		case 26: // SQLITE_NOTADB
			return fmt.Errorf("store: %s is not a Fenec store (not a SQLite database file)", path)
		case 5, 6: // SQLITE_BUSY, SQLITE_LOCKED
			return fmt.Errorf("store: %s is in use by another process", path)
		case 11: // SQLITE_CORRUPT
			return fmt.Errorf("store: %s is damaged and was not opened (%v); restore it from a backup, or recover what can be read with the sqlite3 shell's .recover command", path, err)
		}
	}
	return fmt.Errorf("store: open %s: %w", path, err)
}

func (s *Store) exec(ctx context.Context, stmts ...string) error {
	for _, q := range stmts {
		if _, err := s.conn.ExecContext(ctx, q); err != nil {
			if q != "BEGIN IMMEDIATE" {
				s.conn.ExecContext(ctx, "ROLLBACK") // best effort; the error that matters is err
			}
			return err
		}
	}
	return nil
}

// query runs q and calls each for every row.
func query(ctx context.Context, conn *sql.Conn, q string, each func(*sql.Rows) error, args ...any) error {
	rows, err := conn.QueryContext(ctx, q, args...)
	if err != nil {
		return fmt.Errorf("store: load: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		if err := each(rows); err != nil {
			return err
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("store: load: %w", err)
	}
	return nil
}
