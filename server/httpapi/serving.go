package httpapi

import (
	"log/slog"
	"net/http"
	"time"
)

// Connection timeouts of NewHTTPServer. Writes get longer than the longest
// Fenec-Wait (30 s) so a held claim is answered on an open connection.
const (
	ReadHeaderTimeout = 10 * time.Second
	ReadTimeout       = 60 * time.Second
	WriteTimeout      = 75 * time.Second
	IdleTimeout       = 120 * time.Second
)

// NewHTTPServer returns the server that fenec serve runs h under, its
// errors logged to log at warning level: connections served by HTTPServer
// (conn.go), the odd ones by net/http under the same timeouts. Serve it
// with its Serve. The package's benchmarks serve through it too, so
// that their figures are the binary's.
func NewHTTPServer(h http.Handler, log *slog.Logger) *HTTPServer {
	return newHTTPServer(h, &http.Server{
		Handler:           h,
		ReadHeaderTimeout: ReadHeaderTimeout,
		ReadTimeout:       ReadTimeout,
		WriteTimeout:      WriteTimeout,
		IdleTimeout:       IdleTimeout,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	})
}
