package httpapi

import (
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"github.com/fenecdb/fenec/server/console"
	"github.com/fenecdb/fenec/server/httpapi/gen"
)

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
