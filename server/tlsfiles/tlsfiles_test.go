package tlsfiles_test

import (
	"crypto/tls"
	"crypto/x509"
	"os"
	"testing"
	"time"

	"github.com/fenecdb/fenec/server/tlsfiles"
	"github.com/fenecdb/fenec/server/tlsfiles/tlstest"
)

// serve accepts TLS connections on loopback with cfg, and completes each
// one's handshake; it returns the address.
func serve(t *testing.T, cfg *tls.Config) string {
	ln, err := tls.Listen("tcp", "127.0.0.1:0", cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				c.SetDeadline(time.Now().Add(5 * time.Second))
				if c.(*tls.Conn).Handshake() == nil {
					c.Write([]byte("ok"))
				}
			}()
		}
	}()
	return ln.Addr().String()
}

func pool(t *testing.T, file string) *x509.CertPool {
	pem, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	p := x509.NewCertPool()
	p.AppendCertsFromPEM(pem)
	return p
}

// served dials addr and returns the serial of the certificate served.
func served(t *testing.T, addr string, cfg *tls.Config) (string, error) {
	c, err := tls.Dial("tcp", addr, cfg)
	if err != nil {
		return "", err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	var b [2]byte
	if _, err := c.Read(b[:]); err != nil {
		return "", err
	}
	return c.ConnectionState().PeerCertificates[0].SerialNumber.String(), nil
}

// TestRotation: a certificate replaced on disk is served to the next
// connection; a half-made rotation (a key that does not match the
// certificate) keeps the last good pair.
func TestRotation(t *testing.T) {
	dir := t.TempDir()
	ca := tlstest.NewCA(t, dir, "test")
	first := ca.Issue("server")
	f, err := tlsfiles.Load(first.CertFile, first.KeyFile, "", tlsfiles.Options{})
	if err != nil {
		t.Fatal(err)
	}
	addr := serve(t, f.ServerConfig())
	client := &tls.Config{RootCAs: pool(t, ca.File), ServerName: "localhost"}
	if got, err := served(t, addr, client); err != nil || got != first.Serial.String() {
		t.Fatalf("first certificate: %v %v, want serial %v", got, err, first.Serial)
	}
	second := ca.Issue("server")
	if got, err := served(t, addr, client); err != nil || got != second.Serial.String() {
		t.Fatalf("after rotation: %v %v, want serial %v", got, err, second.Serial)
	}
	// A key of another pair under the certificate's key file: not served.
	other := ca.Issue("other")
	key, _ := os.ReadFile(other.KeyFile)
	if err := os.WriteFile(second.KeyFile, key, 0o600); err != nil {
		t.Fatal(err)
	}
	if got, err := served(t, addr, client); err != nil || got != second.Serial.String() {
		t.Fatalf("with a mismatched key: %v %v, want the last good serial %v", got, err, second.Serial)
	}
}

// TestPeers: with a CA file both ends must hold a certificate it signed.
func TestPeers(t *testing.T) {
	dir := t.TempDir()
	ca := tlstest.NewCA(t, dir, "cluster")
	rogueCA := tlstest.NewCA(t, dir, "rogue")
	a, b, r := ca.Issue("a"), ca.Issue("b"), rogueCA.Issue("r")
	load := func(l tlstest.Leaf, caFile string) *tlsfiles.Files {
		f, err := tlsfiles.Load(l.CertFile, l.KeyFile, caFile, tlsfiles.Options{MinVersion: tls.VersionTLS13})
		if err != nil {
			t.Fatal(err)
		}
		return f
	}
	addr := serve(t, load(a, ca.File).ServerConfig())
	peer := func(f *tlsfiles.Files) *tls.Config {
		c, err := f.PeerConfig()
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	if _, err := served(t, addr, peer(load(b, ca.File))); err != nil {
		t.Fatalf("a node the CA signed: %v", err)
	}
	if _, err := served(t, addr, peer(load(r, rogueCA.File))); err == nil {
		t.Fatal("a certificate of another CA was taken")
	}
	if _, err := served(t, addr, &tls.Config{InsecureSkipVerify: true}); err == nil {
		t.Fatal("a client without a certificate was taken")
	}
	// A node dialing a server whose certificate another CA signed refuses it.
	raddr := serve(t, load(r, rogueCA.File).ServerConfig())
	if _, err := served(t, raddr, peer(load(b, ca.File))); err == nil {
		t.Fatal("a node took a server of another CA")
	}
}
