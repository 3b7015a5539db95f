package httpapi

import (
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/fenecdb/fenec/server/engine"
)

// TestBackup: GET /_backup answers the file with every write answered
// before it, which opens as a database; Fenec-Seq names the last write it
// holds; no temporary file is left beside the database.
func TestBackup(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ts := newTestServer(t, filepath.Join(dir, "f.db"), nil)
	ts.c.MustQuery("create collection jobs (payload json, n int)")
	for i := range 50 {
		ts.c.MustQuery("put jobs {payload: $1, n: $2}", map[string]any{"i": i}, i)
	}
	r, err := ts.c.Do("GET", "/_backup", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if r.Status != 200 || r.Header.Get("Content-Type") != "application/vnd.sqlite3" {
		t.Fatalf("%d %s %.200s", r.Status, r.Header.Get("Content-Type"), r.Body)
	}
	seq, err := strconv.ParseUint(r.Header.Get("Fenec-Seq"), 10, 64)
	if err != nil || seq != ts.db.Seq() {
		t.Fatalf("Fenec-Seq %q: want %d", r.Header.Get("Fenec-Seq"), ts.db.Seq())
	}
	copyPath := filepath.Join(t.TempDir(), "copy.db")
	if err := os.WriteFile(copyPath, r.Body, 0o644); err != nil {
		t.Fatal(err)
	}
	db, err := engine.Open(engine.Options{File: copyPath})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if db.Seq() != seq {
		t.Errorf("the copy opens at seq %d, want %d", db.Seq(), seq)
	}
	if c := db.Collections(); len(c) != 1 || c[0].Docs != 50 {
		t.Errorf("the copy holds %+v, want jobs with 50 documents", c)
	}
	left, _ := filepath.Glob(filepath.Join(dir, "*.backup-*"))
	if len(left) > 0 {
		t.Errorf("left beside the database: %v", left)
	}
}

// TestBackupNoFile: a server that keeps nothing has nothing to back up.
func TestBackupNoFile(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, ":memory:", nil)
	r, err := ts.c.Do("GET", "/_backup", nil, nil)
	if err != nil || r.Status != 404 || r.Code() != "not_found" {
		t.Fatalf("%v %d %s", err, r.Status, r.Body)
	}
}
