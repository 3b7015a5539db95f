//go:build !linux

package store

import (
	"errors"
	"os"
)

// fdatasync makes f's data durable; where the platform has no fdatasync,
// with fsync.
func fdatasync(f *os.File) error { return f.Sync() }

// preallocate fails where the platform has no fallocate: the segment
// grows as it is written.
func preallocate(f *os.File, size int64) error { return errors.ErrUnsupported }
