//go:build !linux

package store

import "os"

// fdatasync makes f's data durable; where the platform has no fdatasync,
// with fsync.
func fdatasync(f *os.File) error { return f.Sync() }

// preallocate does nothing where the platform has no fallocate.
func preallocate(f *os.File, size int64) error { return nil }
