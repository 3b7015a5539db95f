package httpapi

import (
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/fenecdb/fenec/server/httpapi/internal/h1"
)

// HTTPServer serves fenec serve's HTTP/1.1 connections: the plain requests
// read and answered by the connection server of internal/h1, the odd ones
// by net/http (docs/architecture.md, "Connections").
type HTTPServer = h1.Server

// Limits bound the connections an HTTPServer holds (docs/http.md,
// "Connections and shutdown").
type Limits = h1.Limits

// Inbound counts requests on their way to a commit (HTTPServer.CountInbound).
type Inbound = h1.Inbound

// DefaultMaxConns is fenec serve's --max-conns.
const DefaultMaxConns = h1.DefaultMaxConns

// GuardFraming returns ln with every connection checked for requests that
// carry both Content-Length and Transfer-Encoding, which are answered 400
// and closed (h1.GuardFraming).
func GuardFraming(ln net.Listener) net.Listener { return h1.GuardFraming(ln) }

// Connection timeouts of NewHTTPServer. Writes get longer than the longest
// Fenec-Wait (30 s) so a held claim is answered on an open connection.
const (
	ReadHeaderTimeout = 10 * time.Second
	ReadTimeout       = 60 * time.Second
	WriteTimeout      = 75 * time.Second
	IdleTimeout       = 120 * time.Second
)

// NewHTTPServer returns the server that fenec serve runs h under, its
// errors logged to log at warning level: connections served by
// internal/h1, the odd ones by net/http under the same timeouts. Serve it
// with its Serve. The package's benchmarks serve through it too, so
// that their figures are the binary's.
func NewHTTPServer(h http.Handler, log *slog.Logger) *HTTPServer {
	return h1.New(h, &http.Server{
		Handler:           h,
		ReadHeaderTimeout: ReadHeaderTimeout,
		ReadTimeout:       ReadTimeout,
		WriteTimeout:      WriteTimeout,
		IdleTimeout:       IdleTimeout,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	})
}
