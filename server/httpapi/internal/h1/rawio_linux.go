//go:build linux

package h1

import (
	"errors"
	"io"
	"net"
	"os"
	"syscall"

	"golang.org/x/sys/unix"
)

// rawIO reads and writes a TCP connection's socket with raw system calls
// inside net's RawConn, which keeps net's deadlines, its wait for
// readiness (the netpoller) and its closing. A read or write through
// net.Conn enters the runtime's syscall state, and the first call after
// the server went idle — at one to four workers, every request's read and
// answer — wakes the runtime's monitor thread (sysmon), which then polls
// every 20 µs for a millisecond and sleeps again: a futex wake, about one
// nanosleep per request and their context switches. The socket is
// non-blocking, so neither call can block the thread: nothing needs the
// syscall state's hand-off of the processor. (sysRead and sysWrite:
// rawio_norace_linux.go; under the race detector, syscall's own.)
//
// It pays at few workers under --sync off, where nothing else wakes
// sysmon; under --sync always the log's fdatasync wakes it anyway
// (BenchmarkHTTPQueue shows it; docs/benchmarks.md, "Raw system calls on
// a connection").
type rawIO struct {
	rc syscall.RawConn
	nc net.Conn
	// rd and wr are the call under way of each direction, apart, so that
	// a read and a write may run at once as net's do.
	rd, wr rawCall
}

// rawCall is one Read's or Write's buffer and outcome, and the function
// RawConn calls with the socket (made once: a method value per call
// would allocate).
type rawCall struct {
	p     []byte
	n     int
	errno syscall.Errno
	f     func(fd uintptr) bool
}

// newRawIO returns rawIO on rwc, or nil when rwc is not a TCP connection.
func newRawIO(rwc net.Conn) *rawIO {
	tc, ok := rwc.(*net.TCPConn)
	if !ok {
		return nil
	}
	rc, err := tc.SyscallConn()
	if err != nil {
		return nil
	}
	r := &rawIO{rc: rc, nc: rwc}
	r.rd.f, r.wr.f = r.rd.read1, r.wr.write1
	return r
}

func (r *rawCall) read1(fd uintptr) bool {
	for {
		n, e := sysRead(fd, r.p)
		switch e {
		case syscall.EINTR:
			continue
		case syscall.EAGAIN:
			return false // wait until the socket is readable
		}
		r.n, r.errno = int(n), e
		return true
	}
}

func (r *rawCall) write1(fd uintptr) bool {
	for len(r.p) > 0 {
		n, e := sysWrite(fd, r.p)
		switch e {
		case 0:
			r.n += int(n)
			r.p = r.p[n:]
		case syscall.EINTR:
		case syscall.EAGAIN:
			return false // wait until the socket takes more
		default:
			r.errno = e
			return true
		}
	}
	return true
}

// Read is net.Conn's Read, its errors as net's.
func (r *rawIO) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	n, err := r.call(&r.rd, p, false)
	switch {
	case err != nil:
		return 0, err
	case n == 0:
		return 0, io.EOF
	}
	return n, nil
}

// Write is net.Conn's Write, its errors as net's.
func (r *rawIO) Write(p []byte) (int, error) { return r.call(&r.wr, p, true) }

// call runs c's read or write of p through RawConn, which waits for the
// socket's readiness and keeps net's deadlines and closing.
func (r *rawIO) call(c *rawCall, p []byte, write bool) (int, error) {
	op, do := "read", r.rc.Read
	if write {
		op, do = "write", r.rc.Write
	}
	c.p, c.n, c.errno = p, 0, 0
	err := do(c.f)
	n := c.n
	c.p = nil
	switch {
	case err != nil:
		return n, r.opError(op, err)
	case c.errno != 0:
		return n, r.opError(op, os.NewSyscallError(op, c.errno))
	}
	return n, nil
}

// opError wraps err as net.Conn's Read and Write do; RawConn's own
// errors (closed, past the deadline) come as net's "raw-read" ones.
func (r *rawIO) opError(op string, err error) error {
	var oe *net.OpError
	if errors.As(err, &oe) {
		err = oe.Err
	}
	return &net.OpError{Op: op, Net: "tcp", Source: r.nc.LocalAddr(), Addr: r.nc.RemoteAddr(), Err: err}
}

// peerClosed reports whether the peer of the TCP socket sock has closed
// its end or reset the connection: the socket's state (TCP_INFO) is past
// established on the peer's side. The kernel sets it as the peer's FIN or
// RST arrives, before any read returns it, and a pipelined request's
// bytes or a TLS close alert waiting to be read do not hide it. Control
// takes no read lock, so it may run while the watch's read waits.
func peerClosed(sock syscall.RawConn) bool {
	if sock == nil {
		return false
	}
	closed := false
	sock.Control(func(fd uintptr) {
		info, err := unix.GetsockoptTCPInfo(int(fd), unix.IPPROTO_TCP, unix.TCP_INFO)
		if err != nil {
			return
		}
		switch info.State {
		case unix.BPF_TCP_CLOSE_WAIT, unix.BPF_TCP_LAST_ACK, unix.BPF_TCP_CLOSE, unix.BPF_TCP_CLOSING:
			closed = true
		}
	})
	return closed
}
