package auth

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/fenecdb/fenec/server/clock"
)

// TokenError is why a bearer token was refused: a 401 whose message says
// which check failed.
type TokenError struct{ Msg string }

func (e *TokenError) Error() string { return e.Msg }

func refuse(format string, args ...any) *TokenError {
	return &TokenError{Msg: fmt.Sprintf(format, args...)}
}

// MinSecret is the shortest HS256 secret accepted, --jwt-secret or an
// oct key: RFC 7518 asks for a key at least as long as the hash.
const MinSecret = 32

// key is one verification key and the one algorithm it verifies.
type key struct {
	kid string
	alg string // "HS256" or "RS256"
	pub any    // []byte for HS256, *rsa.PublicKey for RS256
}

func (k *key) name() string {
	if k.kid == "" {
		return "the --jwt-secret key"
	}
	return fmt.Sprintf("key %q", k.kid)
}

// Verifier checks JWTs against --jwt-secret (tokens without a kid) and a
// --jwt-keys key set (tokens with one). The algorithm is the key's: a
// token's alg header must name it, so neither `none` nor an HS256 token
// signed with an RSA key's public half gets through.
type Verifier struct {
	secret *key
	keys   *keyFile
	clk    clock.Clock
}

// NewVerifier returns a verifier for an HS256 secret (nil for none), a
// JWKS file ("" for none), or both. Token times (exp, nbf) are read from
// clk, the server's clock, so a manual clock can expire a test's tokens.
func NewVerifier(secret []byte, jwksPath string, clk clock.Clock) (*Verifier, error) {
	if secret == nil && jwksPath == "" {
		return nil, errors.New("a JWT verifier needs --jwt-secret or --jwt-keys")
	}
	v := &Verifier{clk: clk}
	if secret != nil {
		if len(secret) < MinSecret {
			return nil, fmt.Errorf("--jwt-secret has %d bytes; HS256 needs at least %d", len(secret), MinSecret)
		}
		v.secret = &key{alg: "HS256", pub: secret}
	}
	if jwksPath != "" {
		kf, err := openKeyFile(jwksPath)
		if err != nil {
			return nil, err
		}
		v.keys = kf
	}
	return v, nil
}

// SetLogger names where a key file that fails to re-read is reported;
// the keys read before stay in use.
func (v *Verifier) SetLogger(l *slog.Logger) {
	if v.keys != nil {
		v.keys.log = l
	}
}

var signedWith = map[string]bool{"HS256": true, "RS256": true}

// Verify checks a token's signature, exp and nbf, and returns its claims
// as encoding/json decodes them with UseNumber. The error is a
// *TokenError.
func (v *Verifier) Verify(raw string) (map[string]any, error) {
	claims, _, err := v.verify(raw)
	return claims, err
}

// verified is what a token Verify admitted depends on, to check it again
// without its signature: the key its kid named, and its times.
type verified struct {
	kid      any
	key      *key
	exp, nbf *jwt.NumericDate
}

// still returns whether a token verified as vd would be verified now:
// its kid still names the very key that checked its signature (a key
// file re-read makes new keys, so a key removed or changed in it is no
// longer this one), and now, by the verifier's clock, is before its exp
// and not before its nbf, as golang-jwt holds them (no leeway).
func (v *Verifier) still(vd *verified) bool {
	if k, err := v.key(vd.kid); err != nil || k != vd.key {
		return false
	}
	now := time.UnixMilli(v.clk.NowMS())
	return vd.exp != nil && now.Before(vd.exp.Time) && (vd.nbf == nil || !now.Before(vd.nbf.Time))
}

func (v *Verifier) verify(raw string) (map[string]any, *verified, error) {
	// The header is read unverified only to pick the key; nothing of it is
	// trusted until the signature is checked with that key.
	tok, _, perr := jwt.NewParser().ParseUnverified(raw, jwt.MapClaims{})
	if tok == nil || tok.Header == nil {
		return nil, nil, refuse("%v", perr) // "token is malformed: …"
	}
	alg, _ := tok.Header["alg"].(string)
	if !signedWith[alg] {
		if alg == "none" || alg == "" {
			return nil, nil, refuse("token alg %q is not allowed: tokens must be signed (HS256 or RS256)", alg)
		}
		return nil, nil, refuse("token alg %q is not allowed (HS256 or RS256)", alg)
	}
	// RFC 7515 §4.1.11: a header naming critical extensions must be
	// refused by a recipient that does not understand them, and this
	// server understands none.
	if crit, ok := tok.Header["crit"]; ok {
		return nil, nil, refuse("token header crit %v names extensions this server does not understand", crit)
	}
	kid := tok.Header["kid"]
	k, err := v.key(kid)
	if err != nil {
		return nil, nil, err
	}
	if alg != k.alg {
		return nil, nil, refuse("token alg %q is not allowed: %s is %s", alg, k.name(), k.alg)
	}
	claims := jwt.MapClaims{}
	_, err = jwt.ParseWithClaims(raw, claims, func(*jwt.Token) (any, error) { return k.pub, nil },
		jwt.WithValidMethods([]string{k.alg}),
		jwt.WithExpirationRequired(),
		jwt.WithJSONNumber(),
		jwt.WithStrictDecoding(),
		jwt.WithTimeFunc(func() time.Time { return time.UnixMilli(v.clk.NowMS()) }))
	if err != nil {
		return nil, nil, explain(err, claims)
	}
	vd := &verified{kid: kid, key: k}
	// Both parsed already: ParseWithClaims validated them.
	vd.exp, _ = claims.GetExpirationTime()
	vd.nbf, _ = claims.GetNotBefore()
	return claims, vd, nil
}

// key picks the key a token's kid names: a kid picks from the key set,
// no kid means the secret. With only a secret, a kid is ignored: there
// is one key to pick.
func (v *Verifier) key(kid any) (*key, error) {
	if kid == nil || v.keys == nil {
		if v.secret == nil {
			return nil, refuse("token has no kid; this server picks its key by kid")
		}
		return v.secret, nil
	}
	s, ok := kid.(string)
	if !ok {
		return nil, refuse("token kid is not a string")
	}
	k := v.keys.lookup(s)
	if k == nil {
		return nil, refuse("token kid %q is not a known key", s)
	}
	return k, nil
}

// explain turns golang-jwt's error into one that says which check failed.
func explain(err error, claims jwt.MapClaims) *TokenError {
	at := func(name string) string {
		var t *jwt.NumericDate
		if name == "exp" {
			t, _ = claims.GetExpirationTime()
		} else {
			t, _ = claims.GetNotBefore()
		}
		if t == nil {
			return ""
		}
		return fmt.Sprintf(" (%s %s)", name, t.UTC().Format(time.RFC3339))
	}
	switch {
	case errors.Is(err, jwt.ErrTokenMalformed):
		return refuse("%v", err) // "token is malformed: …"
	case errors.Is(err, jwt.ErrTokenSignatureInvalid):
		return refuse("token signature is invalid")
	}
	// The signature held, so the times are the signer's: one that is no
	// time at all (1e30 seconds) is said to be invalid, not "expired".
	for _, name := range []string{"exp", "nbf", "iat"} {
		if bad := notATime(claims[name]); bad != "" {
			return refuse("token %s %s is invalid: a time is seconds since 1970, up to the year 9999", name, bad)
		}
	}
	switch {
	case errors.Is(err, jwt.ErrTokenRequiredClaimMissing):
		return refuse("token has no exp; tokens must expire")
	case errors.Is(err, jwt.ErrTokenExpired):
		return refuse("token expired%s", at("exp"))
	case errors.Is(err, jwt.ErrTokenNotValidYet):
		return refuse("token is not valid yet%s", at("nbf"))
	}
	return refuse("%v", err) // "token has invalid claims: …" and the like
}

// maxTime is 9999-12-31T23:59:59Z in seconds since 1970, the last time
// FenecQL can write.
const maxTime = 253402300799

// notATime returns a time claim's text when it is a number no time can
// be (negative, past the year 9999, not finite), and "" otherwise —
// absent and non-number claims included, which golang-jwt reports itself.
func notATime(v any) string {
	n, ok := v.(json.Number)
	if !ok {
		return ""
	}
	f, err := n.Float64()
	if err == nil && f >= 0 && f <= maxTime {
		return ""
	}
	return n.String()
}
