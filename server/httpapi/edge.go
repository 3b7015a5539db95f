package httpapi

import (
	"fmt"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"github.com/fenecdb/fenec/server/console"
	"github.com/fenecdb/fenec/server/fenecql"
	"github.com/fenecdb/fenec/server/httpapi/gen"
)

// The edge: what every request meets before routing (docs/http.md,
// "Browsers"). The checks that keep a web page from using a server it can
// reach through the browser of someone on the server's machine (guard);
// the console's pages and CORS, which a browser asks for (front).

// loopbackHosts are the Host names a server without a token answers
// whatever --host says: the names a local client (curl, an SDK, the
// console opened at http://localhost:8080) sends.
var loopbackHosts = []string{"localhost", "127.0.0.1", "::1"}

// guard refuses, before routing, a request that a page of another site
// may have made, and a head that says two things: a Host the server does
// not answer to (when it has no token: DNS rebinding), an Origin that is
// neither the server's own nor one of --cors-origin, or two
// Authorization headers. It sets the headers every answer carries, and
// returns the refusal, if any.
func (s *Server) guard(w http.ResponseWriter, r *http.Request) *apiError {
	// No answer of the API is to be read as anything but its Content-Type
	// (a JSON error echoing input must not be taken for a script or page).
	w.Header().Set("X-Content-Type-Options", "nosniff")
	if s.gate.Open() && !s.hostAllowed(r.Host) {
		// A page on evil.example whose name is made to point at 127.0.0.1
		// sends Host: evil.example; without a token, nothing else would
		// stop it, and its page is then same-origin with the answers.
		return &apiError{code: gen.ErrorCodeHostNotAllowed,
			msg: fmt.Sprintf("Host %q is not one this server answers without a token: use localhost or 127.0.0.1, or start it with --host %s", Clip(r.Host), Clip(hostName(r.Host)))}
	}
	if origin, ok := r.Header["Origin"]; ok {
		if len(origin) != 1 || !s.originAllowed(origin[0], r) {
			// Browsers send Origin on every cross-origin request that is
			// not a plain GET (a form's POST, sendBeacon, fetch), and a
			// request refused here runs nothing: a page cannot write by
			// one the browser sends without asking first.
			return &apiError{code: gen.ErrorCodeOriginNotAllowed,
				msg: fmt.Sprintf("origin %s is not one of the server's --cors-origin", Clip(strings.Join(origin, ", ")))}
		}
	}
	if len(r.Header["Authorization"]) > 1 {
		// Two credentials: which one counts would be the reader's choice.
		return badRequest("the request has %d Authorization headers: send one", len(r.Header["Authorization"]))
	}
	return nil
}

// hostName returns the name of a Host header, without its port or an
// IPv6 address's brackets, in lower case.
func hostName(host string) string {
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	} else {
		host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	}
	return strings.ToLower(strings.TrimSuffix(host, "."))
}

// hostAllowed reports whether a server without a token answers Host
// host: a loopback name or one of --host, with any port.
func (s *Server) hostAllowed(host string) bool {
	name := hostName(host)
	return name != "" && (slices.Contains(loopbackHosts, name) || slices.Contains(s.hosts, name))
}

// originAllowed reports whether a request from a page of origin may be
// answered: one of --cors-origin, or the server's own origin (the
// console's page, served here). The server's own origin is the request's
// scheme and Host: without a token, the Host is one the server answers
// to (guard's first check), so a page at another name cannot pass for
// it; with a token, a page at a rebound name is same-origin with the
// server but holds no token to send (a token is never sent by the
// browser on its own, as a cookie would be).
func (s *Server) originAllowed(origin string, r *http.Request) bool {
	if slices.Contains(s.cfg.CORSOrigins, origin) {
		return true
	}
	scheme := "http://"
	if r.TLS != nil {
		scheme = "https://"
	}
	return r.Host != "" && strings.EqualFold(origin, scheme+r.Host)
}

// Clip cuts text a client sent to at most 200 bytes (on a rune boundary,
// marked with "…") for an error message that echoes it: a megabyte
// identifier is named by its start, not sent back whole.
func Clip(s string) string { return fenecql.Clip(s) }

// What a browser page on another origin may send to /query and /batch,
// and read back: the headers the JS SDK sends, and those it reads.
const (
	corsAllowHeaders  = "Authorization, Content-Type, Fenec-Wait, Idempotency-Key"
	corsExposeHeaders = "Fenec-Seq, Idempotent-Replayed"
	corsMaxAge        = "600"
)

// corsRoutes are the routes a page on an allowed origin may call.
var corsRoutes = []string{"/query", "/batch"}

// CheckOrigin checks an origin given to --cors-origin: exactly one
// origin, as a browser sends it in Origin (scheme, host, and a port other
// than the scheme's), so that matching it is comparing strings. "*" is
// refused: a wildcard would let every page send the token it holds.
func CheckOrigin(o string) error {
	u, err := url.Parse(o)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" ||
		u.User != nil || u.RawQuery != "" || u.Fragment != "" || (u.Path != "" && u.Path != "/") {
		return fmt.Errorf("%q is not an origin: want scheme://host[:port], such as https://app.example.com", o)
	}
	canon := u.Scheme + "://" + strings.ToLower(u.Host)
	if u.Port() == "80" && u.Scheme == "http" || u.Port() == "443" && u.Scheme == "https" {
		canon = u.Scheme + "://" + strings.ToLower(u.Hostname())
	}
	if canon != o {
		return fmt.Errorf("%q: a browser sends this origin as %q; give that", o, canon)
	}
	return nil
}

// front answers what is not the API's: the console's pages, and CORS
// preflights. It returns whether it has answered; otherwise it may have
// set CORS headers on w for the API's answer to carry.
func (s *Server) front(w http.ResponseWriter, r *http.Request) bool {
	p := r.URL.Path
	if !s.cfg.NoConsole && (p == console.Prefix || strings.HasPrefix(p, console.Prefix+"/")) {
		s.console.ServeHTTP(w, r)
		return true
	}
	origin := r.Header.Get("Origin")
	if origin == "" || !slices.Contains(corsRoutes, p) {
		return false
	}
	allowed := slices.Contains(s.cfg.CORSOrigins, origin)
	h := w.Header()
	h.Add("Vary", "Origin")
	preflight := r.Method == http.MethodOptions && r.Header.Get("Access-Control-Request-Method") != ""
	if !preflight {
		// A request from a page not allowed goes on without CORS headers:
		// the browser then keeps its answer from the page.
		if allowed {
			h.Set("Access-Control-Allow-Origin", origin)
			h.Set("Access-Control-Expose-Headers", corsExposeHeaders)
		}
		return false
	}
	if !allowed {
		writeError(w, &apiError{code: gen.ErrorCodeForbidden,
			msg: fmt.Sprintf("origin %s is not one of the server's --cors-origin", origin)})
		return true
	}
	h.Set("Access-Control-Allow-Origin", origin)
	h.Set("Access-Control-Allow-Methods", "POST")
	h.Set("Access-Control-Allow-Headers", corsAllowHeaders)
	h.Set("Access-Control-Max-Age", corsMaxAge)
	w.WriteHeader(http.StatusNoContent)
	return true
}
