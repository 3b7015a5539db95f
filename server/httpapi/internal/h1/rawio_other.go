//go:build !linux

package h1

import (
	"net"
	"syscall"
)

// rawIO is rawio_linux.go's; elsewhere a connection is read through net.
type rawIO struct{ net.Conn }

func newRawIO(net.Conn) *rawIO { return nil }

// peerClosed is rawio_linux.go's; elsewhere only the watch's read tells
// that a client went away.
func peerClosed(syscall.RawConn) bool { return false }
