package fenecdb_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"runtime"
	"strings"
	"sync"
	"testing"

	"github.com/fenecdb/fenec/sdks/go"
)

// TestUserAgent: what arrives at an HTTP server on loopback (the header
// is the thing asserted, so the test reads it where it lands) names the
// SDK's version and Go's, through the SDK's own client and through a
// caller's.
func TestUserAgent(t *testing.T) {
	var mu sync.Mutex
	var seen []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = append(seen, r.Header.Get("User-Agent"))
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{"affected":0}`))
	}))
	defer srv.Close()
	want := "fenecdb-go/" + fenecdb.Version + " go/" + strings.TrimPrefix(runtime.Version(), "go")
	for _, opts := range [][]fenecdb.Option{nil, {fenecdb.WithHTTPClient(&http.Client{})}} {
		if _, err := connect(t, srv.URL, opts...).Query(context.Background(), "del jobs"); err != nil {
			t.Fatal(err)
		}
	}
	if len(seen) != 2 || seen[0] != want || seen[1] != want {
		t.Fatalf("User-Agent %q, want %q twice", seen, want)
	}
}

// TestVersionIsTheManifests: Version is the version the other SDKs'
// manifests hold (one release of every SDK), with Go's leading v.
func TestVersionIsTheManifests(t *testing.T) {
	for file, re := range map[string]string{
		"../js/package.json":       `"version": "([^"]+)"`,
		"../python/pyproject.toml": `(?m)^version = "([^"]+)"`,
		"../kotlin/pom.xml":        `<artifactId>fenecdb</artifactId>\s*<version>([^<]+)</version>`,
	} {
		b, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		m := regexp.MustCompile(re).FindSubmatch(b)
		if m == nil || "v"+string(m[1]) != fenecdb.Version {
			t.Errorf("%s: version %q, Version %q", file, m, fenecdb.Version)
		}
	}
}

// TestConnectFromEnv: Connect("") takes the URL from FENEC_URL and the
// token from FENEC_TOKEN; a real server with --token answers it; without
// FENEC_URL it is an error that says so.
func TestConnectFromEnv(t *testing.T) {
	_, url := server(t, "--token", "s3cret")
	t.Setenv("FENEC_URL", url)
	t.Setenv("FENEC_TOKEN", "s3cret")
	mustQuery(t, connect(t, ""), jobsSchema)
	t.Setenv("FENEC_URL", "")
	if _, err := fenecdb.Connect(""); err == nil || !strings.Contains(err.Error(), "FENEC_URL is not set") {
		t.Fatalf("Connect(\"\") without FENEC_URL: %v", err)
	}
}
