// Package console serves the queue console (README.md, "The console"):
// a page, its style and its script, embedded in the binary so that the
// server is all an operator needs — no CDN, no second server.
//
// assets/console.js is generated from console/ at the repository's root
// by `make generate` (esbuild over the TypeScript and the JS SDK), and
// `make check-generated` fails when it is stale: it is never edited by
// hand, and building the server needs no npm.
package console

import (
	"embed"
	"net/http"
	"path"
)

//go:embed assets
var assets embed.FS

// Prefix is the path the console is served under.
const Prefix = "/console"

// files maps a path under Prefix to its asset and content type. Nothing
// else is served: an unknown path is 404.
var files = map[string]struct{ name, ctype string }{
	"":             {"assets/index.html", "text/html; charset=utf-8"},
	"/":            {"assets/index.html", "text/html; charset=utf-8"},
	"/console.js":  {"assets/console.js", "text/javascript; charset=utf-8"},
	"/console.css": {"assets/console.css", "text/css; charset=utf-8"},
}

// Headers are set on every answer of the console. The page runs only its
// own script (no inline script, no eval), talks only to the server it came
// from, cannot be framed, and sends no Referer, so a link followed from it
// carries nothing of the operator's session.
var Headers = map[string]string{
	"Content-Security-Policy": "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
	"X-Content-Type-Options":  "nosniff",
	"Referrer-Policy":         "no-referrer",
	"X-Frame-Options":         "DENY",
	"Cache-Control":           "no-cache",
}

// Handler serves the console: GET or HEAD of a path under Prefix.
func Handler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		for k, v := range Headers {
			w.Header().Set(k, v)
		}
		rest := r.URL.Path[len(Prefix):]
		f, ok := files[rest]
		if !ok {
			w.Header().Set("Content-Type", "text/plain; charset=utf-8")
			w.WriteHeader(http.StatusNotFound)
			_, _ = w.Write([]byte("no console asset " + path.Clean(r.URL.Path) + "\n"))
			return
		}
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			w.Header().Set("Content-Type", "text/plain; charset=utf-8")
			w.WriteHeader(http.StatusMethodNotAllowed)
			_, _ = w.Write([]byte(r.Method + " " + r.URL.Path + ": the console answers GET and HEAD\n"))
			return
		}
		b, err := assets.ReadFile(f.name)
		if err != nil {
			http.Error(w, "the console was built without "+f.name, http.StatusNotFound)
			return
		}
		w.Header().Set("Content-Type", f.ctype)
		w.WriteHeader(http.StatusOK)
		if r.Method == http.MethodGet {
			_, _ = w.Write(b)
		}
	})
}
