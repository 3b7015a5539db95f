package httpapi

import (
	"cmp"
	"context"
	"crypto/tls"
	"errors"
	"io"
	"log"
	"net"
	"net/http"
	"net/url"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
)

// HTTPServer serves fenec serve's HTTP/1.1 connections (docs/architecture.md,
// "Connections"). net/http's server spends a good share of a small
// request's CPU on what Fenec's clients never send — a MIME header reader
// for any head, a goroutine reading in the background during every
// request, deadlines set twice per request — so the plain requests are
// read and answered here, on one goroutine per connection. A head outside
// a strict subset of HTTP/1.1 (head.go) is not read here: the connection,
// with every byte read of that request, goes to a net/http server with the
// same handler and timeouts, which owns it from then on. net/http so stays
// the authority on every odd case, and its answers to them are unchanged.
type HTTPServer struct {
	handler  http.Handler
	fallback *http.Server
	handoff  *handoffListener
	errorLog *log.Logger

	readHeaderTimeout, readTimeout, writeTimeout, idleTimeout time.Duration
	watchAfter                                                time.Duration

	closing atomic.Bool
	done    chan struct{} // closed once Shutdown returns, and by Close: stops the sweeper
	doneOne sync.Once
	mu      sync.Mutex
	ln      net.Listener
	conns   map[*conn]struct{}
	served  bool
	// handoffs counts the connections handed to net/http (for the tests).
	handoffs atomic.Int64
	// inbound, if set, counts the requests on their way to a commit
	// (CountInbound).
	inbound Inbound
	// tls, if set, is the configuration every connection is served
	// under (ServeTLS).
	tls *tls.Config
	// asleep is set while the sweeper waits for a request to start rather
	// than ticking (sweep); a request that sees it wakes it (wake).
	asleep atomic.Bool
	wake   chan struct{}

	limits Limits
	count  connCount
	spare  spareFD // owned by Serve's goroutine
}

// Inbound counts requests on their way to a commit (store.Inbound): Add
// as one is read, Done once as it queues its write or ends without one.
type Inbound interface {
	Add()
	Done()
	// SetActive tells how many connections wrote lately (sweep).
	SetActive(n int)
}

// CountInbound has the server count in in every POST whose head it reads
// (the requests that may write), until the handler says its write is
// queued or will not be (arrival), or the request ends: under --sync
// always the store's sync waits a little for the requests so counted
// (docs/architecture.md, "The commit path"). Called before Serve. The
// connections handed to net/http are not counted.
func (s *HTTPServer) CountInbound(in Inbound) { s.inbound = in }

// watchAfter is how long a request runs before its connection is watched
// for the client going away (a request's statements stop then:
// docs/fenecql.md). Quicker requests are not watched: they end before a
// watch would tell anything.
const watchAfter = 50 * time.Millisecond

// activeWindow is how lately a connection queued a write for the store's
// syncs to expect its next one (CountInbound).
const activeWindow = 2 * watchAfter

// newHTTPServer returns a server of h under fallback's timeouts, fallback
// taking the connections handed over.
func newHTTPServer(h http.Handler, fallback *http.Server) *HTTPServer {
	return &HTTPServer{
		handler:      h,
		fallback:     fallback,
		handoff:      &handoffListener{ch: make(chan net.Conn), done: make(chan struct{})},
		errorLog:     fallback.ErrorLog,
		readTimeout:  fallback.ReadTimeout,
		writeTimeout: fallback.WriteTimeout,
		done:         make(chan struct{}),
		wake:         make(chan struct{}, 1),
		conns:        map[*conn]struct{}{},
		watchAfter:   watchAfter,
		// Unset, the header and idle timeouts are the read timeout, as
		// in net/http.
		readHeaderTimeout: cmp.Or(fallback.ReadHeaderTimeout, fallback.ReadTimeout),
		idleTimeout:       cmp.Or(fallback.IdleTimeout, fallback.ReadTimeout),
	}
}

// Serve serves ln until Shutdown or Close (http.ErrServerClosed) or until
// ln fails.
func (s *HTTPServer) Serve(ln net.Listener) error {
	s.mu.Lock()
	if s.closing.Load() || s.served {
		s.mu.Unlock()
		return http.ErrServerClosed
	}
	s.ln, s.served = ln, true
	s.handoff.addr = ln.Addr()
	s.mu.Unlock()
	go func() { _ = s.fallback.Serve(s.handoff) }()
	go s.sweep()
	s.spare.take()
	defer s.spare.free()
	var delay time.Duration
	for {
		rwc, err := ln.Accept()
		if err != nil {
			if s.closing.Load() {
				return http.ErrServerClosed
			}
			if errors.Is(err, net.ErrClosed) {
				return err
			}
			if outOfFDs(err) && s.spare.free() {
				// The spare descriptor lets one waiting connection in to
				// be refused, then is taken back once it is closed.
				if c, err := ln.Accept(); err == nil {
					s.refuse(c, "fd_limit")
				}
				s.spare.take()
				continue
			}
			// Out of file descriptors and the like: as net/http, wait and
			// try again.
			delay = min(max(2*delay, 5*time.Millisecond), time.Second)
			s.logf("http: Accept error: %v; retrying in %v", err, delay)
			time.Sleep(delay)
			continue
		}
		delay = 0
		s.spare.take() // if it could not be taken back before
		release, reason := s.take(rwc)
		if release == nil {
			s.refuse(rwc, reason)
			continue
		}
		c := s.newConn(rwc, release)
		if c == nil {
			rwc.Close()
			release()
			continue
		}
		go c.serve()
	}
}

func (s *HTTPServer) logf(format string, args ...any) {
	if s.errorLog != nil {
		s.errorLog.Printf(format, args...)
	} else {
		log.Printf(format, args...)
	}
}

// ServeTLS serves ln as Serve does, each connection over TLS with cfg.
// The TLS records are read and written through the socket's raw system
// calls (rawio_linux.go) as a plain connection's requests are, and the
// handshake runs on the connection's first read, under the head's timeout.
func (s *HTTPServer) ServeTLS(ln net.Listener, cfg *tls.Config) error {
	s.mu.Lock()
	s.tls = cfg
	s.mu.Unlock()
	return s.Serve(ln)
}

// Shutdown stops accepting, closes idle connections and waits for the
// others to end their request, as http.Server.Shutdown does (the
// connections handed to net/http included), until ctx ends.
func (s *HTTPServer) Shutdown(ctx context.Context) error {
	s.stop()
	// The requests Shutdown waits for are still watched: a client gone
	// meanwhile still stops its request.
	defer s.stopSweep()
	fell := make(chan error, 1)
	go func() { fell <- s.fallback.Shutdown(ctx) }()
	poll := time.Millisecond
	t := time.NewTimer(poll)
	defer t.Stop()
	for !s.closeIdle() {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
			poll = min(2*poll, 500*time.Millisecond)
			t.Reset(poll)
		}
	}
	return <-fell
}

// Close closes the listener and every connection at once.
func (s *HTTPServer) Close() error {
	s.stop()
	s.stopSweep()
	err := s.fallback.Close()
	s.mu.Lock()
	for c := range s.conns {
		c.state.Store(stateClosed)
		c.rwc.Close()
	}
	s.mu.Unlock()
	return err
}

func (s *HTTPServer) stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closing.Swap(true) {
		return
	}
	// The hand-over closes here too: net/http's Shutdown may come before
	// its Serve has taken the listener, and then never closes it.
	s.handoff.Close()
	if s.ln != nil {
		s.ln.Close()
	}
}

func (s *HTTPServer) stopSweep() { s.doneOne.Do(func() { close(s.done) }) }

// closeIdle closes the connections waiting for a request (and, as
// net/http, those that sent nothing for 5 s), and reports whether none
// is left.
func (s *HTTPServer) closeIdle() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for c := range s.conns {
		st := c.state.Load()
		if st == stateNew && time.Since(c.accepted) <= 5*time.Second {
			continue // it may be sending its first request
		}
		if (st == stateIdle || st == stateNew) && c.state.CompareAndSwap(st, stateClosed) {
			c.rwc.Close()
		}
	}
	return len(s.conns) == 0
}

// sweep watches the connections of requests running past watchAfter.
//
// With no request running and no connection that wrote lately, it stops
// ticking until a request starts (serveRequest wakes it): an idle
// server's ticks, 40 a second, were more than half of its CPU (each wakes
// a thread of the runtime's), and a drive of queue-bench pays for some
// ten idle seconds while the store folds its log (docs/benchmarks.md,
// "The relaxed path's CPU").
func (s *HTTPServer) sweep() {
	period := s.watchAfter / 2
	t := time.NewTicker(period)
	defer t.Stop()
	for {
		select {
		case <-s.done:
			return
		case <-t.C:
		}
		if s.sweepOnce() {
			continue
		}
		// Asleep is set before the connections are looked at again: a
		// request that started meanwhile either sees it (and wakes the
		// sweeper) or is seen here.
		t.Stop()
		s.asleep.Store(true)
		if s.sweepOnce() {
			if s.asleep.Swap(false) {
				t.Reset(period)
				continue
			}
			// A request woke the sweeper meanwhile: take its wake.
		}
		select {
		case <-s.done:
			return
		case <-s.wake:
		}
		t.Reset(period)
	}
}

// sweepOnce starts the watch of each request running past watchAfter,
// tells the inbound how many connections wrote lately, and reports
// whether the sweeper has to tick on: whether a request runs or a
// connection wrote lately.
func (s *HTTPServer) sweepOnce() bool {
	now := time.Now()
	active, running := 0, false
	s.mu.Lock()
	for c := range s.conns {
		c.mu.Lock()
		if c.inRequest {
			running = true
			if now.Sub(c.started) >= s.watchAfter {
				c.startWatch()
			}
		}
		if !c.posted.IsZero() && now.Sub(c.posted) < activeWindow {
			active++
		}
		c.mu.Unlock()
	}
	s.mu.Unlock()
	if s.inbound != nil {
		s.inbound.SetActive(active)
	}
	return running || active > 0
}

// wakeSweep wakes the sweeper if it waits for a request (sweep); a
// request calls it once it counts as running (inRequest).
func (s *HTTPServer) wakeSweep() {
	if s.asleep.Load() && s.asleep.CompareAndSwap(true, false) {
		select {
		case s.wake <- struct{}{}:
		default:
		}
	}
}

func (s *HTTPServer) newConn(rwc net.Conn, release func()) *conn {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closing.Load() {
		return nil
	}
	c := &conn{s: s, rwc: rwc, raw: newRawIO(rwc), accepted: time.Now(), buf: make([]byte, connBufSize), release: release}
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
	c.ctx = context.WithValue(context.WithValue(context.Background(), http.ServerContextKey, s.fallback), http.LocalAddrContextKey, rwc.LocalAddr())
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
	s        *HTTPServer
	rwc      net.Conn
	raw      *rawIO // rwc read and written with raw system calls, if a TCP connection (rawio_linux.go)
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
		c.arrived(false) // a handler's panic
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
	c.arrived(false) // a handler that never said: it wrote nothing, or failed
	ok := w.finish()
	// The watch stops once the answer is out, not before: stopping it
	// wakes its goroutine and waits for it, and a held claim's answer,
	// the one request watched from its start, need not wait for that.
	c.stopWatch()
	cancel()
	c.cancel = nil
	return ok
}

// arrived lowers the count of requests on their way to a commit, once per
// request counted (CountInbound); wrote: its unit is queued, and the
// connection counts as one that wrote lately (sweep).
func (c *conn) arrived(wrote bool) {
	if c.counted {
		c.counted = false
		c.wrote = wrote
		c.s.inbound.Done()
	}
}

// watch makes the current request's context end when its client goes
// away, as net/http's does: one read in the background, on a connection
// whose request body is read whole, so the only bytes that can come are a
// next request's (kept for it) or its end. It lasts until the answer is
// written (serveRequest).
func (c *conn) watch() {
	c.mu.Lock()
	c.startWatch()
	c.mu.Unlock()
}

// startWatch starts the watch if it can and has not; c.mu is held.
func (c *conn) startWatch() {
	if !c.inRequest || c.watching || c.pend > 0 || c.body.left.Load() != 0 {
		return
	}
	if c.bgErr != nil {
		c.cancel()
		return
	}
	// The read may wait as long as the request may (net/http's read
	// deadline of the whole request).
	c.readBy(after(c.started, c.s.readTimeout), c.s.readTimeout/8)
	c.watching = true
	done := make(chan struct{})
	c.bgDone = done
	cancel := c.cancel
	go func() {
		n, err := c.rwc.Read(c.bgByte[:])
		c.mu.Lock()
		if n == 1 {
			c.pend = 1
		}
		if err != nil && !(c.aborted && isTimeout(err)) {
			c.bgErr = err
			cancel()
		}
		c.watching, c.aborted = false, false
		c.mu.Unlock()
		close(done)
	}()
}

// gone reports whether the watch's read failed: the client is gone. A
// streamed answer asks while the watch may run.
func (c *conn) gone() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.bgErr != nil
}

// stopWatch ends the request's watch, if any, and waits for its read.
func (c *conn) stopWatch() {
	c.mu.Lock()
	c.inRequest = false
	if c.wrote {
		c.posted, c.wrote = c.started, false
	}
	w, done := c.watching, c.bgDone
	if w {
		c.aborted = true
		c.rwc.SetReadDeadline(aLongTimeAgo)
		c.rdlSet = false
	}
	c.mu.Unlock()
	if w {
		<-done
	}
}

// body is a request's body: the Content-Length's bytes, from the buffer
// first, then straight from the connection.
type body struct {
	c    *conn
	left atomic.Int64 // the watch reads it
	err  error
}

func (b *body) Read(p []byte) (int, error) {
	left := b.left.Load()
	if left == 0 {
		return 0, io.EOF
	}
	if b.err != nil {
		return 0, b.err
	}
	if int64(len(p)) > left {
		p = p[:left]
	}
	c := b.c
	var n int
	if c.w > c.r {
		n = copy(p, c.buf[c.r:c.w])
		c.r += n
	} else {
		// The whole request is due within the read timeout of its head.
		c.readBy(after(c.res.started, c.s.readTimeout), c.s.readTimeout/8)
		var err error
		n, err = c.readConn(p)
		if err != nil {
			if err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			b.err = err
			if n == 0 {
				return 0, err
			}
		}
	}
	b.left.Store(left - int64(n))
	if left == int64(n) {
		return n, io.EOF
	}
	return n, nil
}

func (b *body) Close() error { return nil }

// discard reads off what the handler left of the body, up to
// maxPostHandlerRead; false: the connection cannot serve another request.
func (b *body) discard() bool {
	if b.left.Load() == 0 {
		return true
	}
	if b.left.Load() > maxPostHandlerRead || b.err != nil {
		return false
	}
	_, err := io.Copy(io.Discard, b)
	return err == nil && b.left.Load() == 0
}

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
