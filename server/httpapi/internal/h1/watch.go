package h1

import (
	"context"
	"io"
	"sync/atomic"
)

// Conn is what a handler may ask of the connection serving its request
// (ConnOf): the connection, not the handler, knows when its client went
// away and which requests it counts on their way to a commit.
type Conn interface {
	// Watch has the request's context end when its client goes away. A
	// request is watched only once it runs past watchAfter, or once it
	// asks: a held claim must stop holding as soon as its client is gone,
	// not take a job nobody will work on.
	Watch()
	// Gone reports whether the client has gone away: the watch's read
	// failed, or the peer's end of the socket is closed though no read has
	// seen it yet. A held claim about to run asks: a client that gave up
	// its claim closes the connection before it releases what the claim's
	// owner holds, so the claim must not take a job after that release
	// (docs/workers.md, "Stop").
	Gone() bool
	// Arrived tells that the request's write is queued (wrote), or that
	// it will queue none soon (CountInbound). Only the first call counts.
	Arrived(wrote bool)
}

// connKey is the context key of the connection serving a request.
type connKey struct{}

// ConnOf returns the connection serving the request whose context is
// ctx, if a Server serves it (not a connection handed to net/http, whose
// request contexts are always watched and not counted).
func ConnOf(ctx context.Context) (Conn, bool) {
	c, ok := ctx.Value(connKey{}).(*conn)
	return c, ok
}

// Arrived lowers the count of requests on their way to a commit, once per
// request counted (CountInbound); wrote: its unit is queued, and the
// connection counts as one that wrote lately (sweep).
func (c *conn) Arrived(wrote bool) {
	if c.counted {
		c.counted = false
		c.wrote = wrote
		c.s.inbound.Done()
	}
}

// Watch makes the current request's context end when its client goes
// away, as net/http's does: one read in the background, on a connection
// whose request body is read whole, so the only bytes that can come are a
// next request's (kept for it) or its end. It lasts until the answer is
// written (serveRequest).
func (c *conn) Watch() {
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

// Gone is Conn's: the watch saw the client go, or the socket says so
// (peerClosed), which it does as soon as the client's close arrives —
// before the watch's goroutine has run to read it.
func (c *conn) Gone() bool {
	return c.gone() || peerClosed(c.sock)
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
