package auth

import (
	"crypto/rsa"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/big"
	"os"
	"strings"
	"sync"
	"time"
)

// MinRSABits is the smallest RSA modulus a key set may hold.
const MinRSABits = 2048

// recheck is how often a key file is looked at for changes: at most once
// a second, on use, so rotating keys needs no restart and no watcher.
const recheck = time.Second

// keyFile is a --jwt-keys JWKS file, re-read when its modification time,
// size or identity (a rename over it) changes. A re-read that fails keeps
// the keys read before and is logged; the file is tried again later.
type keyFile struct {
	path  string
	every time.Duration
	now   func() time.Time // wall time: a manual server clock must not stop rotation
	log   *slog.Logger

	mu      sync.Mutex
	checked time.Time
	info    os.FileInfo
	keys    map[string]*key
}

func openKeyFile(path string) (*keyFile, error) {
	f := &keyFile{path: path, every: recheck, now: time.Now, log: slog.Default()}
	info, keys, err := f.read()
	if err != nil {
		return nil, err
	}
	f.info, f.keys, f.checked = info, keys, f.now()
	return f, nil
}

func (f *keyFile) read() (os.FileInfo, map[string]*key, error) {
	info, err := os.Stat(f.path)
	if err != nil {
		return nil, nil, fmt.Errorf("--jwt-keys: %w", err)
	}
	data, err := os.ReadFile(f.path)
	if err != nil {
		return nil, nil, fmt.Errorf("--jwt-keys: %w", err)
	}
	keys, err := parseJWKS(data)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", f.path, err)
	}
	return info, keys, nil
}

// lookup returns the key with the given kid, or nil, first re-reading the
// file if it changed and was last looked at a second or more ago.
func (f *keyFile) lookup(kid string) *key {
	f.mu.Lock()
	defer f.mu.Unlock()
	if now := f.now(); now.Sub(f.checked) >= f.every {
		f.checked = now
		f.refresh()
	}
	return f.keys[kid]
}

func (f *keyFile) refresh() {
	info, err := os.Stat(f.path)
	if err == nil && os.SameFile(info, f.info) && info.ModTime().Equal(f.info.ModTime()) && info.Size() == f.info.Size() {
		return
	}
	info, keys, err := f.read()
	if err != nil {
		f.log.Warn("keeping the JWT keys read before", "err", err)
		return
	}
	f.info, f.keys = info, keys
	f.log.Info("read JWT keys", "file", f.path, "keys", len(keys))
}

// jwk is the part of a JSON Web Key (RFC 7517) a verifier reads.
type jwk struct {
	Kty string `json:"kty"`
	Kid string `json:"kid"`
	Alg string `json:"alg"`
	Use string `json:"use"`
	K   string `json:"k"` // oct: the secret
	N   string `json:"n"` // RSA: modulus
	E   string `json:"e"` // RSA: public exponent
}

// parseJWKS reads a key set: oct keys verify HS256, RSA keys of at least
// 2048 bits RS256. Every key needs a distinct kid, since tokens pick
// their key by it.
func parseJWKS(data []byte) (map[string]*key, error) {
	var set struct {
		Keys []jwk `json:"keys"`
	}
	if err := json.Unmarshal(data, &set); err != nil {
		return nil, fmt.Errorf("not a JWKS file: %v", err)
	}
	if len(set.Keys) == 0 {
		return nil, errors.New(`no keys: a JWKS file is {"keys": [...]}`)
	}
	keys := make(map[string]*key, len(set.Keys))
	for i, j := range set.Keys {
		k, err := j.key()
		if err != nil {
			if j.Kid != "" {
				return nil, fmt.Errorf("key %d (kid %q): %v", i+1, j.Kid, err)
			}
			return nil, fmt.Errorf("key %d: %v", i+1, err)
		}
		if keys[k.kid] != nil {
			return nil, fmt.Errorf("key %d: kid %q is taken by an earlier key", i+1, k.kid)
		}
		keys[k.kid] = k
	}
	return keys, nil
}

func (j *jwk) key() (*key, error) {
	if j.Kid == "" {
		return nil, errors.New("no kid; tokens pick their key by kid")
	}
	if j.Use != "" && j.Use != "sig" {
		return nil, fmt.Errorf("use is %q; a verification key is \"sig\"", j.Use)
	}
	switch j.Kty {
	case "oct":
		if j.Alg != "" && j.Alg != "HS256" {
			return nil, fmt.Errorf("alg %q: an oct key verifies HS256", j.Alg)
		}
		secret, err := b64url(j.K)
		if err != nil {
			return nil, fmt.Errorf("k: %v", err)
		}
		if len(secret) < MinSecret {
			return nil, fmt.Errorf("the secret has %d bytes; HS256 needs at least %d", len(secret), MinSecret)
		}
		return &key{kid: j.Kid, alg: "HS256", pub: secret}, nil
	case "RSA":
		if j.Alg != "" && j.Alg != "RS256" {
			return nil, fmt.Errorf("alg %q: an RSA key verifies RS256", j.Alg)
		}
		n, err := b64url(j.N)
		if err != nil {
			return nil, fmt.Errorf("n: %v", err)
		}
		e, err := b64url(j.E)
		if err != nil {
			return nil, fmt.Errorf("e: %v", err)
		}
		pub := &rsa.PublicKey{N: new(big.Int).SetBytes(n)}
		if bits := pub.N.BitLen(); bits < MinRSABits {
			return nil, fmt.Errorf("the RSA key has %d bits; at least %d are needed", bits, MinRSABits)
		}
		ev := new(big.Int).SetBytes(e)
		if !ev.IsInt64() || ev.Int64() < 3 || ev.Int64() > 1<<31-1 || ev.Bit(0) == 0 {
			return nil, errors.New("e is not a usable RSA exponent")
		}
		pub.E = int(ev.Int64())
		return &key{kid: j.Kid, alg: "RS256", pub: pub}, nil
	case "":
		return nil, errors.New("no kty")
	}
	return nil, fmt.Errorf("kty %q is not supported (oct for HS256, RSA for RS256)", j.Kty)
}

// b64url decodes base64url, with or without padding, as JWKS writers
// differ on it.
func b64url(s string) ([]byte, error) {
	if s == "" {
		return nil, errors.New("missing")
	}
	return base64.RawURLEncoding.DecodeString(strings.TrimRight(s, "="))
}
