package store

import (
	"os"
	"syscall"
)

// fdatasync makes f's data durable, with the metadata needed to read it
// back (its size), but not its timestamps: what SQLite's own Linux builds
// use for a commit, and as durable.
func fdatasync(f *os.File) error {
	for {
		err := syscall.Fdatasync(int(f.Fd()))
		if err != syscall.EINTR {
			return err
		}
	}
}
