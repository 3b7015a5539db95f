package h1

import (
	"net"
	"sync"
)

// handoffListener is the listener net/http serves: the connections given
// to it.
type handoffListener struct {
	ch   chan net.Conn
	done chan struct{}
	once sync.Once
	addr net.Addr
}

func (l *handoffListener) give(c net.Conn) bool {
	select {
	case l.ch <- c:
		return true
	case <-l.done:
		c.Close()
		return true
	}
}

func (l *handoffListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.ch:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

func (l *handoffListener) Close() error {
	l.once.Do(func() { close(l.done) })
	return nil
}

func (l *handoffListener) Addr() net.Addr { return l.addr }

// rawConn is a TCP connection read and written through rawIO: what a
// TLS connection served here runs over. Deadlines and Close are the TCP
// connection's, which rawIO keeps.
type rawConn struct {
	net.Conn
	raw *rawIO
}

func (c *rawConn) Read(p []byte) (int, error)  { return c.raw.Read(p) }
func (c *rawConn) Write(p []byte) (int, error) { return c.raw.Write(p) }

// prefixConn reads pre, then the connection.
type prefixConn struct {
	net.Conn
	pre []byte
}

func (c *prefixConn) Read(p []byte) (int, error) {
	if len(c.pre) > 0 {
		n := copy(p, c.pre)
		c.pre = c.pre[n:]
		return n, nil
	}
	return c.Conn.Read(p)
}

// releasingConn is a connection handed to net/http, counted in the
// server's Limits until net/http closes it.
type releasingConn struct {
	net.Conn
	release func()
}

func (c *releasingConn) Close() error {
	err := c.Conn.Close()
	c.release()
	return err
}
