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

// preallocate gives f size bytes of zeros on the disk (fallocate), so that
// a record's sync writes data into blocks the file already has.
func preallocate(f *os.File, size int64) error {
	for {
		err := syscall.Fallocate(int(f.Fd()), 0, 0, size)
		if err != syscall.EINTR {
			return err
		}
	}
}
