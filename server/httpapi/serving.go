package httpapi

import (
	"log/slog"
	"net"
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

// NewHTTPServer answers the http.Server that fenec serve runs h under, its
// errors logged to log at warning level. Serve it on a listener wrapped by
// GuardFraming (ServeGuarded does both). The package's benchmarks serve
// through it too, so that their figures are the binary's.
func NewHTTPServer(h http.Handler, log *slog.Logger) *http.Server {
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: ReadHeaderTimeout,
		ReadTimeout:       ReadTimeout,
		WriteTimeout:      WriteTimeout,
		IdleTimeout:       IdleTimeout,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
}

// ServeGuarded serves srv on ln with every connection checked by
// GuardFraming, until srv is shut down or ln closed.
func ServeGuarded(srv *http.Server, ln net.Listener) error {
	return srv.Serve(GuardFraming(ln))
}
