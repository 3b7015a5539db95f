package h1

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"net/http"
	"net/url"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

func (s *Server) newConn(rwc net.Conn, release func()) *conn {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closing.Load() {
		return nil
	}
	c := &conn{s: s, rwc: rwc, raw: newRawIO(rwc), accepted: time.Now(), buf: make([]byte, connBufSize), release: release}
	if tc, ok := rwc.(*net.TCPConn); ok {
		c.sock, _ = tc.SyscallConn()
	}
	if s.tls != nil {
		var under net.Conn = rwc
		if c.raw != nil {
			under = &rawConn{Conn: rwc, raw: c.raw}
		}
		c.rwc, c.raw = tls.Server(under, s.tls), nil
	}
	if ra := rwc.RemoteAddr(); ra != nil {
		c.remote = ra.String()
	}
	ctx := context.WithValue(context.Background(), http.ServerContextKey, s.fallback)
	ctx = context.WithValue(ctx, http.LocalAddrContextKey, rwc.LocalAddr())
	// The connection is in its requests' contexts once, not per request
	// (ConnOf).
	c.ctx = context.WithValue(ctx, connKey{}, c)
	s.conns[c] = struct{}{}
	return c
}

// Connection states, as net/http's: a new connection has sent nothing
// yet; an idle one waits for its next request.
const (
	stateNew int32 = iota
	stateIdle
	stateActive
	stateClosed
)

// connBufSize is the read buffer of a connection: a head that does not
// fit goes to net/http (whose limit is 1 MB). Bodies past it are read
// straight into the handler's buffer.
const connBufSize = 4096

// maxPostHandlerRead is, as in net/http, how much of a body its handler
// left unread is read off to keep the connection; past it, it is closed.
const maxPostHandlerRead = 256 << 10

var aLongTimeAgo = time.Unix(1, 0)

// conn is one connection served here. Its goroutine owns everything but
// what mu guards: the watch, which a held claim or the sweeper starts
// while the handler runs.
type conn struct {
	s        *Server
	rwc      net.Conn
	raw      *rawIO          // rwc read and written with raw system calls, if a TCP connection (rawio_linux.go)
	sock     syscall.RawConn // the TCP socket under rwc (also under TLS), for Gone; nil if not TCP
	remote   string
	ctx      context.Context
	accepted time.Time
	state    atomic.Int32
	release  func() // counts the connection out of the server's Limits, once closed

	buf  []byte // read buffer: buf[r:w] is read and not yet used
	r, w int
	hd   head
	text []byte // the head, copied to make its keys canonical

	rdl, wdl       time.Time // the deadlines set on rwc, if set
	rdlSet, wdlSet bool
	lastMethod     string

	req    http.Request
	url    url.URL
	vals   []string
	body   body
	res    response
	cancel context.CancelFunc

	counted bool // the request is counted in s.inbound (CountInbound)
	wrote   bool // and it queued a write: posted is set once it ends

	mu        sync.Mutex
	inRequest bool      // a handler runs: the watch may start
	started   time.Time // when its head was read
	posted    time.Time // when the head of the last request that queued a write was read (CountInbound)
	watching  bool
	aborted   bool // the watch's read is being stopped
	bgDone    chan struct{}
	bgByte    [1]byte
	pend      int   // bgByte holds a byte the watch read (a pipelined request's)
	bgErr     error // the watch's read failed: the client is gone
}

func (c *conn) close() {
	c.rwc.Close()
	c.release()
	c.s.mu.Lock()
	delete(c.s.conns, c)
	c.s.mu.Unlock()
}

// readConn reads the connection, the byte the watch read first.
func (c *conn) readConn(p []byte) (int, error) {
	if c.pend > 0 && len(p) > 0 {
		p[0] = c.bgByte[0]
		c.pend = 0
		return 1, nil
	}
	if c.bgErr != nil {
		return 0, c.bgErr
	}
	if c.raw != nil {
		return c.raw.Read(p)
	}
	return c.rwc.Read(p)
}

// write writes p whole to the connection, or fails.
func (c *conn) write(p []byte) (int, error) {
	if c.raw != nil {
		return c.raw.Write(p)
	}
	return c.rwc.Write(p)
}

// readBy keeps the read deadline within [want-slack, want], setting it
// only when it is not: with slack a fraction of the timeout, a connection
// serving request after request sets it once in a while, not per request.
// A zero want is no deadline.
func (c *conn) readBy(want time.Time, slack time.Duration) {
	if !c.rdlSet || !within(c.rdl, want, slack) {
		c.rwc.SetReadDeadline(want)
		c.rdl, c.rdlSet = want, true
	}
}

func (c *conn) writeBy(want time.Time, slack time.Duration) {
	if !c.wdlSet || !within(c.wdl, want, slack) {
		c.rwc.SetWriteDeadline(want)
		c.wdl, c.wdlSet = want, true
	}
}

func within(t, want time.Time, slack time.Duration) bool {
	if want.IsZero() || t.IsZero() {
		return want.IsZero() && t.IsZero()
	}
	return !t.After(want) && !t.Before(want.Add(-slack))
}

// after returns t+d, or no deadline (zero) for no timeout.
func after(t time.Time, d time.Duration) time.Time {
	if d <= 0 {
		return time.Time{}
	}
	return t.Add(d)
}

func (c *conn) serve() {
	handedOff := false
	defer func() {
		if p := recover(); p != nil && p != http.ErrAbortHandler {
			buf := make([]byte, 64<<10)
			buf = buf[:runtime.Stack(buf, false)]
			c.s.logf("http: panic serving %v: %v\n%s", c.remote, p, buf)
		}
		if handedOff {
			return
		}
		c.Arrived(false) // a handler's panic
		c.stopWatch()
		if c.cancel != nil {
			c.cancel()
		}
		if c.body.left.Load() > 0 && c.body.err == nil && c.state.Load() != stateClosed {
			// A body left unread, not one whose read failed (the client
			// gone or too slow): as net/http, only then the wait.
			c.closeWriteAndWait()
		}
		c.close()
	}()
	// A new connection's first head is due within the header timeout, as
	// net/http's.
	c.readBy(after(c.accepted, c.s.readHeaderTimeout), 0)
	for {
		v, err := c.readHead()
		if v == headOdd || (err != nil && c.w > c.r && !isTimeout(err)) {
			// What was read of the request goes to net/http with the
			// connection: an odd head, or part of a head and then the
			// connection's end (net/http answers that as it would have).
			handedOff = c.handOff()
			return
		}
		if err != nil {
			c.plainToTLS(err)
			return // gone, or silent past a timeout: net/http answers neither
		}
		if !c.buildRequest() {
			handedOff = c.handOff() // a target net/url refuses: net/http's 400
			return
		}
		if !c.state.CompareAndSwap(stateIdle, stateActive) && !c.state.CompareAndSwap(stateNew, stateActive) {
			return // closed by Shutdown as the head came
		}
		if c.s.inbound != nil && c.req.Method == http.MethodPost {
			c.s.inbound.Add()
			c.counted = true
		}
		if !c.serveRequest() {
			return
		}
		c.state.Store(stateIdle)
		if c.s.closing.Load() {
			return
		}
	}
}

// plainToTLS answers, as net/http does, a client that sent plain HTTP to
// the TLS port: with a 400 that says so, in plain HTTP, rather than a
// closed connection.
func (c *conn) plainToTLS(err error) {
	var re tls.RecordHeaderError
	if !errors.As(err, &re) || re.Conn == nil || !looksLikeHTTP(re.RecordHeader[:]) {
		return
	}
	re.Conn.SetWriteDeadline(time.Now().Add(time.Second))
	io.WriteString(re.Conn, "HTTP/1.0 400 Bad Request\r\nContent-Type: text/plain; charset=utf-8\r\nConnection: close\r\n\r\nClient sent an HTTP request to an HTTPS server.\n")
}

// looksLikeHTTP reports whether a TLS record's first bytes are an HTTP
// request's method.
func looksLikeHTTP(hdr []byte) bool {
	switch string(hdr[:min(len(hdr), 5)]) {
	case "GET /", "HEAD ", "POST ", "PUT /", "OPTIO", "DELET", "PATCH":
		return true
	}
	return false
}

// rstAvoidanceDelay is how long a connection closed with its request's
// body unread waits after its answer, as net/http's closeWriteAndWait.
const rstAvoidanceDelay = 500 * time.Millisecond

// closeWriteAndWait ends the connection's writes and waits a while before
// it is closed: closed at once with the client's bytes unread, TCP resets
// it, and the client's side may drop the answer (a body past --max-body
// would then get a reset rather than its 413) — RFC 9112 §9.6.
func (c *conn) closeWriteAndWait() {
	if cw, ok := c.rwc.(interface{ CloseWrite() error }); ok {
		cw.CloseWrite()
	}
	time.Sleep(rstAvoidanceDelay)
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// readHead reads until buf[r:] starts with a whole head in the subset, or
// with bytes that are not one, or the connection fails.
func (c *conn) readHead() (headVerdict, error) {
	// As net/http, a request after the first is read once 4 of its bytes
	// have come: fewer, then the end, close the connection unanswered.
	peeked := c.state.Load() == stateNew
	var headStart time.Time
	var rerr error
	for {
		b := c.buf[c.r:c.w]
		if !peeked && len(b) >= 4 {
			peeked = true
			if c.lastMethod == http.MethodPost {
				// As net/http: a client may follow a POST's body with a
				// stray CRLF (RFC 9112 §2.2).
				n := 0
				for n < 4 && (b[n] == '\r' || b[n] == '\n') {
					n++
				}
				c.r += n
				b = b[n:]
			}
		}
		if peeked && len(b) > 0 {
			if v := c.hd.scan(b); v != headMore {
				return v, nil
			}
		}
		if rerr != nil {
			if !peeked {
				c.r = c.w // not 4 bytes: dropped, not handed over
			}
			return headMore, rerr
		}
		if len(b) == len(c.buf) {
			return headOdd, nil // a head past the buffer: net/http's
		}
		if c.r > 0 {
			copy(c.buf, b)
			c.w -= c.r
			c.r = 0
		}
		now := time.Now()
		if len(b) == 0 {
			if c.state.Load() != stateNew {
				// Waiting for the next request, up to the idle timeout.
				c.readBy(after(now, c.s.idleTimeout), c.s.idleTimeout/8)
			}
		} else {
			// Part of a head is here: the rest is due within the header
			// timeout of its first bytes (slowloris).
			if headStart.IsZero() {
				headStart = now
			}
			c.readBy(after(headStart, c.s.readHeaderTimeout), c.s.readHeaderTimeout/8)
		}
		n, err := c.readConn(c.buf[c.w:])
		c.w += n
		rerr = err
	}
}

// handOff gives the connection, the bytes of its request read so far
// first, to net/http, behind GuardFraming's check.
func (c *conn) handOff() bool {
	pre := append([]byte(nil), c.buf[c.r:c.w]...)
	if c.pend > 0 {
		pre = append(pre, c.bgByte[0])
	}
	// net/http sets its own deadlines, request by request.
	c.rwc.SetReadDeadline(time.Time{})
	c.rwc.SetWriteDeadline(time.Time{})
	c.s.mu.Lock()
	delete(c.s.conns, c)
	c.s.mu.Unlock()
	c.s.handoffs.Add(1)
	return c.s.handoff.give(&releasingConn{Conn: &framingConn{Conn: &prefixConn{Conn: c.rwc, pre: pre}}, release: c.release})
}

// buildRequest makes c.req of the head scanned, as net/http's readRequest
// would; false: net/url refuses the target.
func (c *conn) buildRequest() bool {
	h := &c.hd
	c.text = append(c.text[:0], c.buf[c.r:c.r+h.n]...)
	for i := 0; i < h.nl; i++ {
		l := h.lines[i]
		canonicalKey(c.text[l.ks:l.ke])
	}
	text := string(c.text) // one string: the head's parts are slices of it
	target := text[h.ts:h.te]
	u := &c.url
	if plainPath(target) {
		*u = url.URL{Path: target}
	} else {
		parsed, err := url.ParseRequestURI(target)
		if err != nil {
			return false
		}
		*u = *parsed
	}
	c.r += h.n
	hdr := c.req.Header
	if hdr == nil {
		hdr = http.Header{}
	}
	clear(hdr)
	if cap(c.vals) < h.nl {
		c.vals = make([]string, h.nl)
	}
	vals := c.vals[:h.nl]
	host := ""
	for i := 0; i < h.nl; i++ {
		l := h.lines[i]
		k, v := text[l.ks:l.ke], text[l.vs:l.ve]
		if i == h.host {
			host = v
			continue // net/http keeps it in Request.Host alone
		}
		if have, ok := hdr[k]; ok {
			hdr[k] = append(have, v)
		} else {
			vals[i] = v
			hdr[k] = vals[i : i+1 : i+1]
		}
	}
	// As net/http (RFC 9111 §5.4): Pragma: no-cache stands for
	// Cache-Control: no-cache when there is none.
	if p := hdr["Pragma"]; len(p) > 0 && p[0] == "no-cache" {
		if _, ok := hdr["Cache-Control"]; !ok {
			hdr["Cache-Control"] = []string{"no-cache"}
		}
	}
	c.req = http.Request{
		Method:     h.method,
		URL:        u,
		Proto:      "HTTP/1.1",
		ProtoMajor: 1,
		ProtoMinor: 1,
		Header:     hdr,
		Body:       http.NoBody,
		Host:       host,
		RemoteAddr: c.remote,
		RequestURI: target,
		Close:      h.close,
	}
	c.body.c = c
	c.body.left.Store(0)
	if h.cl > 0 {
		c.req.ContentLength = h.cl
		c.body.left.Store(h.cl)
		c.req.Body = &c.body
	}
	c.lastMethod = h.method
	return true
}

// serveRequest runs the handler on c.req and writes its answer; false:
// the connection is to be closed.
func (c *conn) serveRequest() bool {
	now := time.Now()
	ctx, cancel := context.WithCancel(c.ctx)
	c.cancel = cancel
	req := c.req.WithContext(ctx)
	c.writeBy(after(now, c.s.writeTimeout), c.s.writeTimeout/8)
	w := &c.res
	w.reset(c, req, now)
	c.mu.Lock()
	c.inRequest, c.started = true, now
	c.mu.Unlock()
	c.s.wakeSweep()
	c.s.handler.ServeHTTP(w, req)
	c.Arrived(false) // a handler that never said: it wrote nothing, or failed
	ok := w.finish()
	// The watch stops once the answer is out, not before: stopping it
	// wakes its goroutine and waits for it, and a held claim's answer,
	// the one request watched from its start, need not wait for that.
	c.stopWatch()
	cancel()
	c.cancel = nil
	return ok
}
