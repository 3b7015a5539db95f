package main

import (
	"database/sql"
	"fmt"
	"io"
	"runtime"

	_ "modernc.org/sqlite"
)

// version and commit are stamped by `make dist` (-ldflags -X); a plain
// `go build` leaves them as below. The version is `git describe --tags
// --always --dirty` of the checkout that built it (README.md, Building).
var (
	version = "dev"
	commit  = "unknown"
)

// printVersion writes the version, the commit, the Go release that built
// the binary and the SQLite it embeds (modernc.org/sqlite, asked in memory).
func printVersion(w io.Writer) error {
	lite, err := sqliteVersion()
	if err != nil {
		return fmt.Errorf("asking SQLite its version: %w", err)
	}
	_, err = fmt.Fprintf(w, "fenec %s\ncommit %s\ngo %s\nsqlite %s\n", version, commit, runtime.Version(), lite)
	return err
}

func sqliteVersion() (string, error) {
	db, err := sql.Open("sqlite", ":memory:")
	if err != nil {
		return "", err
	}
	defer db.Close()
	var v string
	err = db.QueryRow("select sqlite_version()").Scan(&v)
	return v, err
}
