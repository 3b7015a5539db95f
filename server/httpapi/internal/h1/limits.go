package h1

import (
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"sync"
	"syscall"
	"time"
)

// Limits bound the connections an Server holds (docs/http.md,
// "Connections and shutdown"). Set with Server.Limit before Serve.
type Limits struct {
	// MaxConns caps the connections open at once; 0: no cap.
	MaxConns int
	// MaxConnsPerAddr caps those of one remote IP address; 0: no cap.
	MaxConnsPerAddr int
	// IdleTimeout is how long a connection waits for its next request;
	// 0: the server's (IdleTimeout).
	IdleTimeout time.Duration
	// Refused, if set, is told of each connection refused, by reason:
	// "max_conns", "max_conns_per_addr" or "fd_limit".
	Refused func(reason string)
}

// DefaultMaxConns is fenec serve's --max-conns: far past what a server's
// clients need, and below the file descriptors fenec serve asks for.
const DefaultMaxConns = 10_000

// connCount counts the open connections, all and by remote IP, for Limits.
type connCount struct {
	mu     sync.Mutex
	all    int
	byAddr map[string]int
}

// refuseWait bounds a refusal's time on its connection (refuse): a
// client that does not read it is not waited for.
const refuseWait = 100 * time.Millisecond

// Limit sets the server's limits; call it before Serve.
func (s *Server) Limit(l Limits) {
	s.limits = l
	if l.IdleTimeout > 0 {
		s.idleTimeout = l.IdleTimeout
		s.fallback.IdleTimeout = l.IdleTimeout
	}
}

// take counts a new connection in, or returns why it is refused. The
// connection's release undoes it, once.
func (s *Server) take(rwc net.Conn) (release func(), reason string) {
	ip := remoteIP(rwc)
	cc := &s.count
	cc.mu.Lock()
	defer cc.mu.Unlock()
	if s.limits.MaxConns > 0 && cc.all >= s.limits.MaxConns {
		return nil, "max_conns"
	}
	if s.limits.MaxConnsPerAddr > 0 && cc.byAddr[ip] >= s.limits.MaxConnsPerAddr {
		return nil, "max_conns_per_addr"
	}
	if cc.byAddr == nil {
		cc.byAddr = map[string]int{}
	}
	cc.all++
	cc.byAddr[ip]++
	var once sync.Once
	return func() {
		once.Do(func() {
			cc.mu.Lock()
			cc.all--
			if cc.byAddr[ip]--; cc.byAddr[ip] <= 0 {
				delete(cc.byAddr, ip)
			}
			cc.mu.Unlock()
		})
	}, ""
}

func remoteIP(c net.Conn) string {
	if a, ok := c.RemoteAddr().(*net.TCPAddr); ok {
		return a.IP.String()
	}
	if a := c.RemoteAddr(); a != nil {
		return a.String()
	}
	return ""
}

// refuse answers a connection 503 too_many_connections, at once and
// whatever it asks, and closes it: a client at a limit is told so rather
// than left waiting in the listen queue.
func (s *Server) refuse(c net.Conn, reason string) {
	if s.limits.Refused != nil {
		s.limits.Refused(reason)
	}
	why := "the server holds as many connections as its --max-conns"
	switch reason {
	case "max_conns_per_addr":
		why = "the server holds as many connections from this address as its --max-conns-per-addr"
	case "fd_limit":
		why = "the server is out of file descriptors"
	}
	body := fmt.Sprintf(`{"error":"%s: close idle connections or retry shortly","code":"too_many_connections"}`+"\n", why)
	answer := []byte("HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\nX-Content-Type-Options: nosniff\r\nRetry-After: 1\r\nConnection: close\r\nContent-Length: " +
		strconv.Itoa(len(body)) + "\r\n\r\n" + body)
	end := func() {
		// Closed with the client's request unread, the connection would
		// be reset, and the client might lose the answer before reading
		// it: the writes end first, and what the client sent is read off
		// for a moment (as net/http's closeWriteAndWait).
		deadline := time.Now().Add(refuseWait)
		c.SetDeadline(deadline)
		c.Write(answer)
		if cw, ok := c.(interface{ CloseWrite() error }); ok {
			cw.CloseWrite()
		}
		var sink [512]byte
		for {
			if _, err := c.Read(sink[:]); err != nil {
				break
			}
		}
		c.Close()
	}
	if reason == "fd_limit" {
		end() // the spare descriptor is taken back once this one is closed
		return
	}
	go end()
}

// spareFD is a file descriptor held back for the accept loop: out of
// descriptors, it lets one go to accept a waiting connection and refuse it
// (refuse), rather than leave the connection in the listen queue,
// unanswered, until the client gives up.
type spareFD struct{ f *os.File }

func (sp *spareFD) take() {
	if sp.f == nil {
		sp.f, _ = os.Open(os.DevNull)
	}
}

func (sp *spareFD) free() bool {
	if sp.f == nil {
		return false
	}
	sp.f.Close()
	sp.f = nil
	return true
}

// outOfFDs reports whether an accept failed for want of file descriptors.
func outOfFDs(err error) bool {
	return errors.Is(err, syscall.EMFILE) || errors.Is(err, syscall.ENFILE)
}
