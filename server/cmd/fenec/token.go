package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/fenecdb/fenec/server/auth"
)

// tokenMain runs `fenec token` and returns its exit status.
func tokenMain(args []string) int {
	if err := tokenCmd(args, os.Stdout, os.Stderr); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		fmt.Fprintln(os.Stderr, "fenec token:", err)
		return 1
	}
	return 0
}

// tokenCmd is `fenec token`: it prints a signed JWT, for operators and
// tests. HS256 with --secret (or $FENEC_JWT_SECRET), RS256 with --key.
//
//	fenec token --secret … --claims '{"sub":"w1","role":"worker","queue":"mail"}' --ttl 1h
func tokenCmd(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("fenec token", flag.ContinueOnError)
	fs.SetOutput(stderr)
	secret := fs.String("secret", "", "sign HS256 with this `secret`, as given to fenec serve --jwt-secret (default $FENEC_JWT_SECRET)")
	keyFile := fs.String("key", "", "sign RS256 with the RSA private key in this PEM `file` (PKCS#1 or PKCS#8)")
	kid := fs.String("kid", "", "the `kid` header: which --jwt-keys key verifies the token")
	claimsJSON := fs.String("claims", "{}", "the token's claims, a JSON `object`")
	ttl := fs.Duration("ttl", time.Hour, "how long the token is valid: exp is now + ttl, unless --claims sets exp")
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), "Usage: fenec token [flags]\n\nPrints a JWT for a server started with --jwt-secret or --jwt-keys.\n\nFlags:\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	if *secret == "" && *keyFile == "" {
		*secret = os.Getenv("FENEC_JWT_SECRET")
	}
	claims, err := tokenClaims(*claimsJSON, *ttl, time.Now())
	if err != nil {
		return err
	}
	var method jwt.SigningMethod
	var key any
	switch {
	case *secret != "" && *keyFile != "":
		return errors.New("--secret and --key: give one")
	case *secret != "":
		if len(*secret) < auth.MinSecret {
			return fmt.Errorf("--secret has %d bytes; HS256 needs at least %d", len(*secret), auth.MinSecret)
		}
		method, key = jwt.SigningMethodHS256, []byte(*secret)
	case *keyFile != "":
		pemData, err := os.ReadFile(*keyFile)
		if err != nil {
			return err
		}
		rk, err := jwt.ParseRSAPrivateKeyFromPEM(pemData)
		if err != nil {
			return fmt.Errorf("--key %s: %w", *keyFile, err)
		}
		if bits := rk.N.BitLen(); bits < auth.MinRSABits {
			return fmt.Errorf("--key %s has %d bits; the server takes RSA keys of at least %d", *keyFile, bits, auth.MinRSABits)
		}
		method, key = jwt.SigningMethodRS256, rk
	default:
		return errors.New("--secret (HS256) or --key (RS256) is needed to sign")
	}
	tok := jwt.NewWithClaims(method, claims)
	if *kid != "" {
		tok.Header["kid"] = *kid
	}
	signed, err := tok.SignedString(key)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintln(stdout, signed)
	return err
}

// tokenClaims decodes --claims, keeping integers exact, and fills in iat
// and exp where it does not set them.
func tokenClaims(src string, ttl time.Duration, now time.Time) (jwt.MapClaims, error) {
	d := json.NewDecoder(strings.NewReader(src))
	d.UseNumber()
	var claims jwt.MapClaims
	if err := d.Decode(&claims); err != nil {
		return nil, fmt.Errorf("--claims must be a JSON object: %v", err)
	}
	if claims == nil {
		return nil, errors.New("--claims must be a JSON object, not null")
	}
	if d.More() {
		return nil, errors.New("--claims must be one JSON object")
	}
	if _, ok := claims["iat"]; !ok {
		claims["iat"] = now.Unix()
	}
	if _, ok := claims["exp"]; !ok {
		if ttl <= 0 {
			return nil, fmt.Errorf("--ttl %v: want a positive duration; the server refuses tokens without exp", ttl)
		}
		claims["exp"] = now.Add(ttl).Unix()
	}
	return claims, nil
}
