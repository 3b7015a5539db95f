package httpapi

import (
	"io"
	"net"
	"strconv"
	"sync"
)

// GuardFraming answers ln with every connection checked for requests that
// carry both Content-Length and Transfer-Encoding. RFC 9112 §6.1 lets a
// server read such a request by its Transfer-Encoding, and net/http does,
// dropping the Content-Length before a handler could see it; but a proxy in
// front that reads the Content-Length instead would see another request
// boundary than this server — the shape of request smuggling — so the RFC
// says the message "ought to be handled as an error". A connection that
// sends one is answered 400 and closed before the request reaches net/http.
func GuardFraming(ln net.Listener) net.Listener { return framingListener{ln} }

type framingListener struct{ net.Listener }

func (l framingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &framingConn{Conn: c}, nil
}

// ambiguousFramingAnswer is the whole 400 such a connection is sent.
var ambiguousFramingAnswer = func() string {
	body := `{"error":"a request may not carry both Content-Length and Transfer-Encoding (RFC 9112 §6.1)","code":"bad_request"}` + "\n"
	return "HTTP/1.1 400 Bad Request\r\n" +
		"Content-Type: application/json\r\n" +
		"Connection: close\r\n" +
		"Content-Length: " + strconv.Itoa(len(body)) + "\r\n\r\n" + body
}()

// framingConn scans what is read as lines. Between two empty lines — a
// header block, or a body — it notes a Content-Length and a
// Transfer-Encoding line; a block that had both is refused. A body is
// JSON, which holds no such lines (a string cannot hold a raw line break),
// so only header blocks can trip it.
type framingConn struct {
	net.Conn
	mu       sync.Mutex
	line     [len("transfer-encoding:")]byte // the start of the line, lowercased
	n        int                             // bytes of the line so far
	cl, te   bool
	refused  bool
	answered sync.Once
}

func (c *framingConn) Read(b []byte) (int, error) {
	c.mu.Lock()
	refused := c.refused
	c.mu.Unlock()
	if refused {
		return 0, io.EOF
	}
	n, err := c.Conn.Read(b)
	if n > 0 && c.scan(b[:n]) {
		// The bytes that close the block are withheld, so net/http never
		// has the whole request: it sees the connection end, and closes
		// it without an answer of its own.
		c.answered.Do(func() { c.Conn.Write([]byte(ambiguousFramingAnswer)) })
		return 0, io.EOF
	}
	return n, err
}

// scan answers whether b completes a block with both framing headers.
func (c *framingConn) scan(b []byte) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, ch := range b {
		switch ch {
		case '\n':
			if c.n == 0 { // an empty line ends the block
				if c.cl && c.te {
					c.refused = true
					return true
				}
				c.cl, c.te = false, false
			}
			c.n = 0
			continue
		case '\r':
			continue
		}
		if c.n < len(c.line) {
			if 'A' <= ch && ch <= 'Z' {
				ch += 'a' - 'A'
			}
			c.line[c.n] = ch
			c.n++
			switch string(c.line[:c.n]) {
			case "content-length:":
				c.cl = true
			case "transfer-encoding:":
				c.te = true
			}
		} else {
			c.n++ // longer than any name looked for: only its being non-empty counts
		}
	}
	return false
}
