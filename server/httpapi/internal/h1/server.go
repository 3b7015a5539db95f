package h1

import (
	"cmp"
	"context"
	"crypto/tls"
	"errors"
	"log"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// Server serves fenec serve's HTTP/1.1 connections (docs/architecture.md,
// "Connections"). net/http's server spends a good share of a small
// request's CPU on what Fenec's clients never send — a MIME header reader
// for any head, a goroutine reading in the background during every
// request, deadlines set twice per request — so the plain requests are
// read and answered here, on one goroutine per connection. A head outside
// a strict subset of HTTP/1.1 (head.go) is not read here: the connection,
// with every byte read of that request, goes to a net/http server with the
// same handler and timeouts, which owns it from then on. net/http so stays
// the authority on every odd case, and its answers to them are unchanged.
type Server struct {
	handler  http.Handler
	fallback *http.Server
	handoff  *handoffListener
	errorLog *log.Logger

	readHeaderTimeout, readTimeout, writeTimeout, idleTimeout time.Duration
	watchAfter                                                time.Duration
	newGrace                                                  time.Duration

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
func (s *Server) CountInbound(in Inbound) { s.inbound = in }

// watchAfter is how long a request runs before its connection is watched
// for the client going away (a request's statements stop then:
// docs/fenecql.md). Quicker requests are not watched: they end before a
// watch would tell anything.
const watchAfter = 50 * time.Millisecond

// newGrace is how long, as net/http, Shutdown leaves a new connection
// that has sent nothing yet to send its first request.
const newGrace = 5 * time.Second

// activeWindow is how lately a connection queued a write for the store's
// syncs to expect its next one (CountInbound).
const activeWindow = 2 * watchAfter

// New returns a server of h under fallback's timeouts, fallback taking
// the connections handed over.
func New(h http.Handler, fallback *http.Server) *Server {
	return &Server{
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
		newGrace:     newGrace,
		// Unset, the header and idle timeouts are the read timeout, as
		// in net/http.
		readHeaderTimeout: cmp.Or(fallback.ReadHeaderTimeout, fallback.ReadTimeout),
		idleTimeout:       cmp.Or(fallback.IdleTimeout, fallback.ReadTimeout),
	}
}

// Serve serves ln until Shutdown or Close (http.ErrServerClosed) or until
// ln fails.
func (s *Server) Serve(ln net.Listener) error {
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

func (s *Server) logf(format string, args ...any) {
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
func (s *Server) ServeTLS(ln net.Listener, cfg *tls.Config) error {
	s.mu.Lock()
	s.tls = cfg
	s.mu.Unlock()
	return s.Serve(ln)
}

// Shutdown stops accepting, closes idle connections and waits for the
// others to end their request, as http.Server.Shutdown does (the
// connections handed to net/http included), until ctx ends.
func (s *Server) Shutdown(ctx context.Context) error {
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
func (s *Server) Close() error {
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

func (s *Server) stop() {
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

func (s *Server) stopSweep() { s.doneOne.Do(func() { close(s.done) }) }

// closeIdle closes the connections waiting for a request (and, as
// net/http, those that sent nothing for newGrace), and reports whether none
// is left.
func (s *Server) closeIdle() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for c := range s.conns {
		st := c.state.Load()
		if st == stateNew && time.Since(c.accepted) <= s.newGrace {
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
// ticking until a request starts (serveRequest wakes it): each tick wakes
// a thread of the runtime's, which would be most of an idle server's CPU,
// and queue-bench counts the idle seconds while the store folds its log
// (docs/benchmarks.md, "The relaxed path's CPU").
func (s *Server) sweep() {
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
func (s *Server) sweepOnce() bool {
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
func (s *Server) wakeSweep() {
	if s.asleep.Load() && s.asleep.CompareAndSwap(true, false) {
		select {
		case s.wake <- struct{}{}:
		default:
		}
	}
}

// SetWatchAfter sets how long a request runs before its connection is
// watched (watchAfter); for tests, before Serve.
func (s *Server) SetWatchAfter(d time.Duration) { s.watchAfter = d }

// Conns returns how many connections the server serves itself.
func (s *Server) Conns() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.conns)
}

// Pipelined returns how many connections hold a byte their watch read
// while a request ran: the start of a request pipelined behind it, kept
// for it. Tests wait on it; nothing else needs it.
func (s *Server) Pipelined() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for c := range s.conns {
		c.mu.Lock()
		if c.pend > 0 {
			n++
		}
		c.mu.Unlock()
	}
	return n
}

// Handoffs returns how many connections were handed to net/http.
func (s *Server) Handoffs() int64 { return s.handoffs.Load() }
