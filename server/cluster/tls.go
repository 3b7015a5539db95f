package cluster

import (
	"context"
	"crypto/tls"
	"errors"
	"log/slog"
	"net"
	"sync"
	"time"

	"github.com/hashicorp/raft"
)

// handshakeTimeout bounds a TLS handshake on the raft port: a connection
// that has not proven itself by then is closed, unread.
const handshakeTimeout = 10 * time.Second

// tlsLayer is raft's stream layer over mutual TLS (docs/cluster.md, "The
// nodes' own traffic"). Accept returns only connections whose handshake
// completed, with a certificate the cluster's CA signed: raft reads
// nothing of any other. Handshakes run on goroutines of their own, so a
// client that sends nothing holds up no one but itself.
type tlsLayer struct {
	ln   net.Listener
	adv  net.Addr
	srv  *tls.Config
	dial *tls.Config
	log  *slog.Logger

	ready chan net.Conn
	done  chan struct{}
	once  sync.Once
}

func newTLSLayer(addr string, adv net.Addr, srv, dial *tls.Config, log *slog.Logger) (*tlsLayer, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	l := &tlsLayer{ln: ln, adv: adv, srv: srv, dial: dial, log: log, ready: make(chan net.Conn), done: make(chan struct{})}
	if tcp, ok := adv.(*net.TCPAddr); ok && tcp.IP.IsUnspecified() {
		// As raft's own TCP transport: an address others cannot dial
		// cannot be advertised.
		ln.Close()
		return nil, errors.New("raft address to advertise is unspecified: give --raft-advertise")
	}
	go l.accept()
	return l, nil
}

func (l *tlsLayer) accept() {
	var delay time.Duration
	for {
		c, err := l.ln.Accept()
		if err != nil {
			select {
			case <-l.done:
				return
			default:
			}
			if errors.Is(err, net.ErrClosed) {
				return
			}
			delay = min(max(2*delay, 5*time.Millisecond), time.Second)
			time.Sleep(delay)
			continue
		}
		delay = 0
		go l.handshake(c)
	}
}

func (l *tlsLayer) handshake(c net.Conn) {
	tc := tls.Server(c, l.srv)
	ctx, cancel := context.WithTimeout(context.Background(), handshakeTimeout)
	err := tc.HandshakeContext(ctx)
	cancel()
	if err != nil {
		l.log.Warn("cluster: refused a connection to the raft port", "from", c.RemoteAddr().String(), "err", err)
		c.Close()
		return
	}
	select {
	case l.ready <- tc:
	case <-l.done:
		tc.Close()
	}
}

// Accept returns the next connection whose handshake completed.
func (l *tlsLayer) Accept() (net.Conn, error) {
	select {
	case c := <-l.ready:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

func (l *tlsLayer) Close() error {
	l.once.Do(func() { close(l.done) })
	return l.ln.Close()
}

// Addr is the address advertised to the other nodes.
func (l *tlsLayer) Addr() net.Addr { return l.adv }

// Dial dials another node, the handshake included in timeout.
func (l *tlsLayer) Dial(address raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	d := &tls.Dialer{NetDialer: &net.Dialer{Timeout: timeout}, Config: l.dial}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	return d.DialContext(ctx, "tcp", string(address))
}
