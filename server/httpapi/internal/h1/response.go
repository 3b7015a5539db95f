package h1

import (
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
)

// The answers of the requests Server reads itself (conn.go).

// MaxBuffered is how much of an answer is held to be written whole with
// its Content-Length; a longer one is sent as it comes, chunked.
const MaxBuffered = 64 << 10

// keptBuffer is the most room a connection keeps for its next answer.
const keptBuffer = 8 << 10

// response is the ResponseWriter of a request served here. It holds the
// head and body and writes them in one write once the handler returns,
// with the headers net/http would add (Content-Length, Content-Type
// sniffed when the handler set none, Date, Connection: close).
type response struct {
	c       *conn
	req     *http.Request
	started time.Time
	header  http.Header

	wroteHeader bool
	status      int
	head        []byte // the status line and the handler's headers as at WriteHeader
	body        []byte
	written     int64
	cl          int64 // the handler's Content-Length; -1: none
	hasType     bool  // the handler set Content-Type (even to nothing)
	hasEncoding bool
	hasDate     bool
	connClose   bool // the handler's Connection holds close
	closeAfter  bool
	streaming   bool // the head is written; writes go out as they come
	err         error
}

func (w *response) reset(c *conn, req *http.Request, now time.Time) {
	h := w.header
	if h == nil {
		h = http.Header{}
	}
	clear(h)
	*w = response{c: c, req: req, started: now, header: h, cl: -1, head: w.head[:0], body: w.body[:0]}
	// An idle connection keeps no large answer's room.
	if cap(w.body) > keptBuffer {
		w.body = nil
	}
	if cap(w.head) > keptBuffer {
		w.head = nil
	}
}

func (w *response) Header() http.Header { return w.header }

func (w *response) WriteHeader(code int) {
	if w.wroteHeader {
		w.c.s.logf("http: superfluous response.WriteHeader call")
		return
	}
	if code < 100 || code > 999 {
		panic("invalid WriteHeader code " + strconv.Itoa(code))
	}
	if code >= 100 && code <= 199 && code != http.StatusSwitchingProtocols {
		// An informational answer goes first, with the headers as now.
		w.head = appendStatus(w.head, code)
		w.head = appendHeaders(w.head, w.header, code)
		w.head = append(w.head, "\r\n"...)
		return
	}
	w.wroteHeader, w.status = true, code
	h := w.header
	if v := h.Get("Content-Length"); v != "" {
		if n := digits([]byte(v)); n >= 0 {
			w.cl = n
		} else {
			w.c.s.logf("http: invalid Content-Length of %q", v)
		}
	}
	_, w.hasType = h["Content-Type"]
	w.hasEncoding = h.Get("Content-Encoding") != ""
	_, w.hasDate = h["Date"]
	for _, v := range h["Connection"] {
		if hasToken(v, "close") {
			w.connClose = true
		}
	}
	if h.Get("Connection") == "close" {
		w.closeAfter = true
	}
	w.head = appendStatus(w.head, code)
	w.head = appendHeaders(w.head, h, code)
}

func (w *response) Write(p []byte) (int, error) {
	if !w.wroteHeader {
		w.WriteHeader(http.StatusOK)
	}
	if len(p) == 0 {
		return 0, nil
	}
	if !bodyAllowed(w.status) {
		return 0, http.ErrBodyNotAllowed
	}
	w.written += int64(len(p))
	if w.cl >= 0 && w.written > w.cl {
		return 0, http.ErrContentLength
	}
	if w.err != nil {
		return 0, w.err
	}
	if w.req.Method == http.MethodHead {
		// Eaten, as net/http does; the first bytes are kept to sniff
		// the Content-Type a GET would have.
		if len(w.body) < 512 {
			w.body = append(w.body, p[:min(len(p), 512-len(w.body))]...)
		}
		return len(p), nil
	}
	if w.streaming {
		return w.send(p)
	}
	if len(w.body)+len(p) <= MaxBuffered {
		w.body = append(w.body, p...)
		return len(p), nil
	}
	w.startStream()
	return w.send(p)
}

func (w *response) WriteString(s string) (int, error) {
	if w.wroteHeader && !w.streaming && w.req.Method != http.MethodHead && bodyAllowed(w.status) &&
		w.err == nil && len(w.body)+len(s) <= MaxBuffered && (w.cl < 0 || w.written+int64(len(s)) <= w.cl) {
		w.written += int64(len(s))
		w.body = append(w.body, s...)
		return len(s), nil
	}
	return w.Write([]byte(s))
}

// Flush sends what is held, the rest following as it comes.
func (w *response) Flush() {
	if !w.wroteHeader {
		w.WriteHeader(http.StatusOK)
	}
	if !w.streaming && w.req.Method != http.MethodHead {
		w.startStream()
	}
}

// SetReadDeadline and SetWriteDeadline set the connection's deadlines for
// a handler that streams for long (a live query: docs/changes.md), as
// http.ResponseController does under net/http. The next request's are set
// anew.
func (w *response) SetReadDeadline(t time.Time) error {
	w.c.mu.Lock()
	defer w.c.mu.Unlock()
	w.c.rdl, w.c.rdlSet = t, true
	return w.c.rwc.SetReadDeadline(t)
}

func (w *response) SetWriteDeadline(t time.Time) error {
	w.c.wdl, w.c.wdlSet = t, true
	return w.c.rwc.SetWriteDeadline(t)
}

// chunked reports whether a streamed body is sent chunked: when the
// handler set no Content-Length.
func (w *response) chunked() bool { return w.cl < 0 && bodyAllowed(w.status) }

// startStream writes the head and the body held so far.
func (w *response) startStream() {
	w.streaming = true
	w.prepareClose()
	out := w.head
	if w.chunked() {
		out = append(out, "Transfer-Encoding: chunked\r\n"...)
	} else if bodyAllowed(w.status) {
		out = append(out, "Content-Length: "...)
		out = strconv.AppendInt(out, w.cl, 10)
		out = append(out, "\r\n"...)
	}
	out = w.appendTail(out, w.body)
	w.head = out
	held := w.body
	w.body = w.body[:0]
	if _, err := w.c.write(out); err != nil {
		w.err = err
		return
	}
	if len(held) > 0 {
		w.send(held)
	}
}

// send writes p as it comes: a chunk, or bytes of a declared length.
func (w *response) send(p []byte) (int, error) {
	if w.err != nil {
		return 0, w.err
	}
	var err error
	if w.chunked() {
		size := strconv.AppendUint(make([]byte, 0, 20), uint64(len(p)), 16)
		size = append(size, "\r\n"...)
		bufs := net.Buffers{size, p, []byte("\r\n")}
		_, err = bufs.WriteTo(w.c.rwc)
	} else {
		_, err = w.c.write(p)
	}
	if err != nil {
		w.err = err
		return 0, err
	}
	return len(p), nil
}

// prepareClose settles, before the head goes, whether the connection
// closes after the answer, as net/http does.
func (w *response) prepareClose() {
	c := w.c
	if w.req.Close || c.s.closing.Load() || c.gone() {
		w.closeAfter = true
	}
	if !w.closeAfter && !c.body.discard() {
		// The rest of the body cannot be read off: it is not another
		// request, so the connection ends here.
		w.closeAfter = true
	}
}

// appendTail adds the headers the server sets and the head's end.
func (w *response) appendTail(out, sniff []byte) []byte {
	if bodyAllowed(w.status) && !w.hasType && !w.hasEncoding && len(sniff) > 0 {
		out = append(out, "Content-Type: "...)
		out = append(out, http.DetectContentType(sniff)...)
		out = append(out, "\r\n"...)
	}
	if !w.hasDate {
		out = appendDate(out, time.Now())
	}
	if w.closeAfter && !w.connClose {
		out = append(out, "Connection: close\r\n"...)
	}
	return append(out, "\r\n"...)
}

// finish writes the answer once the handler has returned; false: the
// connection is to be closed.
func (w *response) finish() bool {
	if !w.wroteHeader {
		w.WriteHeader(http.StatusOK)
	}
	if w.streaming {
		if w.err == nil && w.chunked() {
			_, w.err = w.c.write([]byte("0\r\n\r\n"))
		}
		return w.err == nil && !w.closeAfter && (w.cl < 0 || w.written == w.cl)
	}
	w.prepareClose()
	out := w.head
	if bodyAllowed(w.status) {
		switch {
		case w.cl >= 0:
			out = append(out, "Content-Length: "...)
			out = strconv.AppendInt(out, w.cl, 10)
			out = append(out, "\r\n"...)
			if w.req.Method != http.MethodHead && w.written < w.cl {
				w.closeAfter = true // short of what it declared: as net/http, the connection ends
			}
		case w.req.Method != http.MethodHead || w.written > 0:
			out = append(out, "Content-Length: "...)
			out = strconv.AppendInt(out, w.written, 10)
			out = append(out, "\r\n"...)
		}
	}
	out = w.appendTail(out, w.body)
	if w.req.Method != http.MethodHead && bodyAllowed(w.status) {
		out = append(out, w.body...)
	}
	w.head = out
	if _, err := w.c.write(out); err != nil {
		return false
	}
	return !w.closeAfter
}

func bodyAllowed(status int) bool {
	return !(status >= 100 && status <= 199 || status == 204 || status == 304)
}

// appendStatus adds the status line, as net/http writes it.
func appendStatus(b []byte, code int) []byte {
	b = append(b, "HTTP/1.1 "...)
	if text := http.StatusText(code); text != "" {
		b = strconv.AppendInt(b, int64(code), 10)
		b = append(b, ' ')
		b = append(b, text...)
	} else {
		b = append(b, byte('0'+code/100), byte('0'+code/10%10), byte('0'+code%10))
		b = append(b, " status code "...)
		b = strconv.AppendInt(b, int64(code), 10)
	}
	return append(b, "\r\n"...)
}

// appendHeaders adds h's lines, sorted by name as net/http writes them:
// invalid names dropped, line breaks in values made spaces, the framing
// headers left to the server, and for a status without a body those it
// may not have.
func appendHeaders(b []byte, h http.Header, code int) []byte {
	var room [16]string
	keys := room[:0]
	for k := range h {
		switch k {
		case "Content-Length", "Transfer-Encoding":
			continue
		case "Content-Type":
			if code == http.StatusNotModified {
				continue
			}
		}
		if !validName(k) {
			continue
		}
		keys = append(keys, k)
	}
	// Insertion sort: a handful of names, no allocation.
	for i := 1; i < len(keys); i++ {
		for j := i; j > 0 && keys[j] < keys[j-1]; j-- {
			keys[j], keys[j-1] = keys[j-1], keys[j]
		}
	}
	for _, k := range keys {
		for _, v := range h[k] {
			b = append(b, k...)
			b = append(b, ": "...)
			b = appendValue(b, v)
			b = append(b, "\r\n"...)
		}
	}
	return b
}

func validName(k string) bool {
	if k == "" {
		return false
	}
	for i := 0; i < len(k); i++ {
		if !isTokenByte(k[i]) {
			return false
		}
	}
	return true
}

// appendValue adds v with CR and LF made spaces and the spaces and tabs
// around it trimmed, as net/http's Header.Write.
func appendValue(b []byte, v string) []byte {
	i, j := 0, len(v)
	for i < j && (v[i] == ' ' || v[i] == '\t' || v[i] == '\r' || v[i] == '\n') {
		i++
	}
	for j > i && (v[j-1] == ' ' || v[j-1] == '\t' || v[j-1] == '\r' || v[j-1] == '\n') {
		j--
	}
	for k := i; k < j; k++ {
		c := v[k]
		if c == '\r' || c == '\n' {
			c = ' '
		}
		b = append(b, c)
	}
	return b
}

// hasToken reports whether the comma-separated v holds token, any case.
func hasToken(v, token string) bool {
	for len(v) > 0 {
		var part string
		part, v, _ = strings.Cut(v, ",")
		for len(part) > 0 && (part[0] == ' ' || part[0] == '\t') {
			part = part[1:]
		}
		for len(part) > 0 && (part[len(part)-1] == ' ' || part[len(part)-1] == '\t') {
			part = part[:len(part)-1]
		}
		if equalFold([]byte(part), token) {
			return true
		}
	}
	return false
}

// The Date header's value changes once a second: it is made once a second.
type dateLine struct {
	sec  int64
	line []byte
}

var lastDate atomic.Pointer[dateLine]

func appendDate(b []byte, now time.Time) []byte {
	sec := now.Unix()
	d := lastDate.Load()
	if d == nil || d.sec != sec {
		line := append([]byte("Date: "), now.UTC().AppendFormat(nil, http.TimeFormat)...)
		d = &dateLine{sec: sec, line: append(line, "\r\n"...)}
		lastDate.Store(d)
	}
	return append(b, d.line...)
}
