package h1

import (
	"bytes"
	"io"
	"net"
	"strconv"
	"sync"
)

// GuardFraming returns ln with every connection checked for requests that
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
	n        int  // bytes of the line so far ('\r' not counted)
	notCL    bool // the line's start is not clName's
	notTE    bool // the line's start is not teName's
	skip     bool // the line can name neither header any more: only its end counts
	cl, te   bool
	refused  bool
	answered sync.Once
}

// The header names looked for, lowercased, with their colon.
const clName, teName = "content-length:", "transfer-encoding:"

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

// scan returns whether b completes a block with both framing headers. Past a line's first bytes — as soon as
// they are neither name's start, or are a whole name — only the line's end
// matters, and the rest of the line (a body's whole JSON, most header
// values) is passed over by bytes.IndexByte rather than byte by byte.
func (c *framingConn) scan(b []byte) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	for i := 0; i < len(b); i++ {
		ch := b[i]
		if c.skip && ch != '\n' {
			j := bytes.IndexByte(b[i:], '\n')
			if j < 0 {
				return false
			}
			i += j
			ch = '\n'
		}
		switch ch {
		case '\n':
			if c.n == 0 { // an empty line ends the block
				if c.cl && c.te {
					c.refused = true
					return true
				}
				c.cl, c.te = false, false
			}
			c.n, c.skip, c.notCL, c.notTE = 0, false, false, false
			continue
		case '\r':
			continue
		}
		if 'A' <= ch && ch <= 'Z' {
			ch += 'a' - 'A'
		}
		// The line's start is matched against both names at once, a byte
		// at a time, as the bytes come (a name may be split between reads); a
		// name's byte is read only while the line is still that name's start.
		c.notCL = c.notCL || clName[c.n] != ch
		c.notTE = c.notTE || teName[c.n] != ch // c.n < len(teName): longer lines are skipped
		c.n++
		switch {
		case !c.notCL && c.n == len(clName):
			c.cl, c.skip = true, true
		case !c.notTE && c.n == len(teName):
			c.te, c.skip = true, true
		case c.notCL && c.notTE:
			c.skip = true
		}
	}
	return false
}
