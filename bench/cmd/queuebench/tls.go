package main

import (
	"crypto/tls"

	"github.com/fenecdb/fenec/server/tlsfiles/tlstest"
)

// overTLS is the method of the https line: one statement, as oneStatement,
// over TLS (fenec serve --tls-cert), so that the pair of lines reads as
// TLS's cost per job.
const overTLS = "one statement over https"

// serverCert writes a CA and a P-256 certificate it signed for loopback
// under dir, as a deployment would have them, and returns the certificate
// and key files and a client configuration that trusts the CA.
func serverCert(dir string) (certFile, keyFile string, client *tls.Config, err error) {
	ca, err := tlstest.MakeCA(dir, "queuebench")
	if err != nil {
		return "", "", nil, err
	}
	leaf, err := ca.MakeLeaf("queuebench")
	if err != nil {
		return "", "", nil, err
	}
	return leaf.CertFile, leaf.KeyFile, &tls.Config{RootCAs: ca.Pool()}, nil
}
