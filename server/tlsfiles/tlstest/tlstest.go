// Package tlstest makes certificates for tests: a CA, and leaf
// certificates it signs for loopback, written as PEM files.
package tlstest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"
)

// CA is a certificate authority made for a test (or a benchmark).
type CA struct {
	t    testing.TB // nil when made by MakeCA
	dir  string
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	// File is the CA certificate's PEM file.
	File string
}

var serial atomic.Int64

func init() { serial.Store(time.Now().UnixNano()) }

// NewCA makes a CA named name, its certificate written under dir.
func NewCA(t testing.TB, dir, name string) *CA {
	t.Helper()
	ca, err := MakeCA(dir, name)
	if err != nil {
		t.Fatal(err)
	}
	ca.t = t
	return ca
}

// MakeCA is NewCA outside a test: it returns the error NewCA fails on.
func MakeCA(dir, name string) (*CA, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(serial.Add(1)),
		Subject:               pkix.Name{CommonName: name},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, err
	}
	cert, _ := x509.ParseCertificate(der)
	ca := &CA{dir: dir, cert: cert, key: key, File: filepath.Join(dir, name+"-ca.pem")}
	return ca, writePEM(ca.File, "CERTIFICATE", der)
}

// Pool returns a certificate pool that trusts ca alone.
func (ca *CA) Pool() *x509.CertPool {
	p := x509.NewCertPool()
	p.AddCert(ca.cert)
	return p
}

// Leaf is a certificate a CA signed and its key, as files.
type Leaf struct {
	CertFile, KeyFile string
	Serial            *big.Int
}

// Issue makes a certificate for localhost, 127.0.0.1 and ::1, usable by
// a server and a client, and writes it and its key to
// <dir>/<name>.pem and <dir>/<name>-key.pem, replacing what was there by
// rename (as a rotation does).
func (ca *CA) Issue(name string) Leaf {
	ca.t.Helper()
	l, err := ca.MakeLeaf(name)
	if err != nil {
		ca.t.Fatal(err)
	}
	return l
}

// MakeLeaf is Issue outside a test: it returns the error Issue fails on.
func (ca *CA) MakeLeaf(name string) (Leaf, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return Leaf{}, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(serial.Add(1)),
		Subject:      pkix.Name{CommonName: name},
		DNSNames:     []string{"localhost"},
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		return Leaf{}, err
	}
	kder, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return Leaf{}, err
	}
	l := Leaf{CertFile: filepath.Join(ca.dir, name+".pem"), KeyFile: filepath.Join(ca.dir, name+"-key.pem"), Serial: tmpl.SerialNumber}
	// The key first: a server that looks between the two renames sees a
	// pair that does not match, and keeps its last one.
	if err := writePEM(l.KeyFile, "PRIVATE KEY", kder); err != nil {
		return Leaf{}, err
	}
	return l, writePEM(l.CertFile, "CERTIFICATE", der)
}

func writePEM(path, typ string, der []byte) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}
