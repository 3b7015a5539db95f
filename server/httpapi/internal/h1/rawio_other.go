//go:build !linux

package h1

import "net"

// rawIO is rawio_linux.go's; elsewhere a connection is read through net.
type rawIO struct{ net.Conn }

func newRawIO(net.Conn) *rawIO { return nil }
