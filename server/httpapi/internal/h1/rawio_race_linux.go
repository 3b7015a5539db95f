//go:build linux && race

package h1

import "syscall"

// Under the race detector, reads and writes go through syscall's Read
// and Write, which tell the detector what they read and write and order a
// socket's writer before its reader (a test's client in the same process,
// and its handler), as net's own reads and writes do.
func sysRead(fd uintptr, p []byte) (int, syscall.Errno) {
	n, err := syscall.Read(int(fd), p)
	return max(n, 0), errnoOf(err)
}

func sysWrite(fd uintptr, p []byte) (int, syscall.Errno) {
	n, err := syscall.Write(int(fd), p)
	return max(n, 0), errnoOf(err)
}

func errnoOf(err error) syscall.Errno {
	if err == nil {
		return 0
	}
	return err.(syscall.Errno)
}
