package fenecdb_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"net/http"
	"os"
	"strings"
	"testing"

	"github.com/fenecdb/fenec/sdks/go"
	"github.com/fenecdb/fenec/sdks/go/internal/fenectest"
)

// TestTLS: a Client reaches fenec serve --tls-cert over https with the
// server's CA given by WithTLSConfig, or by WithHTTPClient's transport;
// without it, the call fails with the TLS check's error.
func TestTLS(t *testing.T) {
	certs := fenectest.MakeCerts(t, t.TempDir(), "server")
	url := fenectest.Start(t, "--tls-cert", certs.Cert, "--tls-key", certs.Key)
	if !strings.HasPrefix(url, "https://") {
		t.Fatalf("URL %s", url)
	}
	pem, err := os.ReadFile(certs.CA)
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(pem)
	ctx := context.Background()

	db := connect(t, url, fenecdb.WithTLSConfig(&tls.Config{RootCAs: roots}))
	if _, err := db.Query(ctx, "create collection notes (s text)"); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Query(ctx, `put notes {s: "over tls"}`); err != nil {
		t.Fatal(err)
	}
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots}}}
	res, err := connect(t, url, fenecdb.WithHTTPClient(hc)).Query(ctx, "get notes select s")
	if err != nil || len(res.Rows) != 1 {
		t.Fatalf("through WithHTTPClient: %v %v", res, err)
	}

	_, err = connect(t, url).Query(ctx, "get notes")
	var unknown x509.UnknownAuthorityError
	if !errors.As(err, &unknown) {
		t.Errorf("without the CA: %v, want an x509.UnknownAuthorityError", err)
	}
	if _, err := fenecdb.Connect(url, fenecdb.WithTLSConfig(&tls.Config{}), fenecdb.WithHTTPClient(hc)); err == nil ||
		!strings.Contains(err.Error(), "WithTLSConfig and WithHTTPClient") {
		t.Errorf("both options: %v", err)
	}
}
