// Package tlsfiles serves TLS from certificate files that may be replaced
// while the server runs (docs/http.md, "TLS"; docs/cluster.md, "The
// nodes' own traffic"): a certificate, its key and, optionally, a CA
// whose certificates the other end must present. The files are looked at
// again at each handshake and re-read once they change, so a rotated
// certificate is served to the next connection without a restart.
package tlsfiles

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"
)

// Files is a certificate, its key and an optional CA, read from their
// files and re-read when any of them changes.
type Files struct {
	cert, key, ca string
	// minVersion and protos go into every configuration made.
	minVersion uint16
	protos     []string

	mu    sync.Mutex
	stamp [3]stamp
	cur   *state
}

// state is what one reading of the files made.
type state struct {
	cert *tls.Certificate
	pool *x509.CertPool // nil without a CA file
	srv  *tls.Config    // the server's configuration made of them
}

// stamp tells whether a file changed: its size and modification time.
type stamp struct {
	size int64
	mod  time.Time
}

// Options tunes the configurations Files makes.
type Options struct {
	// MinVersion is the oldest TLS version accepted (default TLS 1.2).
	MinVersion uint16
	// NextProtos are the ALPN protocols offered (none by default).
	NextProtos []string
}

// Load reads cert and key (PEM), and ca when not empty, and returns them
// as Files; an error names the file at fault.
func Load(cert, key, ca string, o Options) (*Files, error) {
	f := &Files{cert: cert, key: key, ca: ca, minVersion: o.MinVersion, protos: o.NextProtos}
	if f.minVersion == 0 {
		f.minVersion = tls.VersionTLS12
	}
	st, stamps, err := f.read()
	if err != nil {
		return nil, err
	}
	f.cur, f.stamp = st, stamps
	return f, nil
}

// read reads the files: the stamps are taken before the contents, so a
// file replaced meanwhile is read again at the next look.
func (f *Files) read() (*state, [3]stamp, error) {
	var stamps [3]stamp
	for i, name := range []string{f.cert, f.key, f.ca} {
		if name == "" {
			continue
		}
		fi, err := os.Stat(name)
		if err != nil {
			return nil, stamps, err
		}
		stamps[i] = stamp{fi.Size(), fi.ModTime()}
	}
	pair, err := tls.LoadX509KeyPair(f.cert, f.key)
	if err != nil {
		return nil, stamps, fmt.Errorf("certificate %s with key %s: %w", f.cert, f.key, err)
	}
	st := &state{cert: &pair}
	if f.ca != "" {
		pem, err := os.ReadFile(f.ca)
		if err != nil {
			return nil, stamps, err
		}
		st.pool = x509.NewCertPool()
		if !st.pool.AppendCertsFromPEM(pem) {
			return nil, stamps, fmt.Errorf("CA file %s: no PEM certificate in it", f.ca)
		}
	}
	st.srv = &tls.Config{MinVersion: f.minVersion, NextProtos: f.protos, Certificates: []tls.Certificate{pair}}
	if st.pool != nil {
		st.srv.ClientAuth = tls.RequireAndVerifyClientCert
		st.srv.ClientCAs = st.pool
	}
	return st, stamps, nil
}

// current returns the files' state, re-read if any file changed since
// the last reading. A change that does not read (a certificate replaced
// before its key, say) keeps the last good state until it does.
func (f *Files) current() *state {
	f.mu.Lock()
	defer f.mu.Unlock()
	changed := false
	for i, name := range []string{f.cert, f.key, f.ca} {
		if name == "" {
			continue
		}
		fi, err := os.Stat(name)
		if err != nil {
			return f.cur
		}
		if s := (stamp{fi.Size(), fi.ModTime()}); s != f.stamp[i] {
			changed = true
		}
	}
	if !changed {
		return f.cur
	}
	if st, stamps, err := f.read(); err == nil {
		f.cur, f.stamp = st, stamps
	}
	return f.cur
}

// ServerConfig returns the configuration a server listens with: the
// certificate of the files at each handshake and, with a CA file, a
// client certificate that CA signed required.
func (f *Files) ServerConfig() *tls.Config {
	return &tls.Config{
		MinVersion: f.minVersion,
		NextProtos: f.protos,
		GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) {
			return f.current().srv, nil
		},
	}
}

// PeerConfig returns the configuration a node dials another with: it
// presents the files' certificate and accepts the other's only if the
// CA file signed it. The other's name is not checked against the address
// dialed: in a cluster, whatever the cluster's CA signed is a node
// (docs/cluster.md). Needs a CA file.
func (f *Files) PeerConfig() (*tls.Config, error) {
	if f.ca == "" {
		return nil, errors.New("tlsfiles: a peer's configuration needs a CA file")
	}
	return &tls.Config{
		MinVersion: f.minVersion,
		NextProtos: f.protos,
		GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
			return f.current().cert, nil
		},
		// The chain is verified below, against the CA file as it is now;
		// only the name check is left out.
		InsecureSkipVerify: true,
		VerifyConnection: func(cs tls.ConnectionState) error {
			if len(cs.PeerCertificates) == 0 {
				return errors.New("tlsfiles: the peer presented no certificate")
			}
			inter := x509.NewCertPool()
			for _, c := range cs.PeerCertificates[1:] {
				inter.AddCert(c)
			}
			_, err := cs.PeerCertificates[0].Verify(x509.VerifyOptions{
				Roots: f.current().pool, Intermediates: inter,
				KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
			})
			return err
		},
	}, nil
}
