"""Mints tokens with PyJWT, a JWT library independent of the server's, for
auth/interop_test.go: good HS256 and RS256 tokens the server must accept,
and bad ones it must refuse. Prints {"name": "token", ...} as JSON.

Usage: mint_pyjwt.py <params.json>
params: now (seconds), secret, jwks_secret, rsa_pem (a private key file)
"""

import base64
import hashlib
import hmac
import json
import sys

import jwt
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa


def b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def main() -> None:
    with open(sys.argv[1]) as f:
        p = json.load(f)
    now = p["now"]
    claims = {"sub": "w1", "role": "worker", "queue": "mail", "iat": now, "exp": now + 3600}
    secret = p["secret"].encode()
    with open(p["rsa_pem"], "rb") as f:
        private = serialization.load_pem_private_key(f.read(), password=None)
    public_pem = private.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    stranger = rsa.generate_private_key(public_exponent=65537, key_size=2048)

    good = jwt.encode(claims, secret, algorithm="HS256")
    head, _, sig = good.split(".")
    forged = b64(json.dumps(dict(claims, sub="w2")).encode())

    # PyJWT refuses to key HMAC with a PEM public key, as it should; the
    # HS/RS confusion attack signs by hand, the way an attacker would.
    confused_head = b64(json.dumps({"alg": "HS256", "typ": "JWT", "kid": "r1"}).encode())
    confused_body = b64(json.dumps(claims).encode())
    confused_sig = b64(hmac.new(public_pem, f"{confused_head}.{confused_body}".encode(), hashlib.sha256).digest())

    tokens = {
        "hs256": good,
        "hs256 jwks": jwt.encode(claims, p["jwks_secret"].encode(), algorithm="HS256", headers={"kid": "h1"}),
        "rs256": jwt.encode(claims, private, algorithm="RS256", headers={"kid": "r1"}),
        "hs256 nbf": jwt.encode(dict(claims, nbf=now - 5), secret, algorithm="HS256"),
        "tampered": f"{head}.{forged}.{sig}",
        "expired": jwt.encode(dict(claims, exp=now - 60), secret, algorithm="HS256"),
        "not yet valid": jwt.encode(dict(claims, nbf=now + 60), secret, algorithm="HS256"),
        "no exp": jwt.encode({k: v for k, v in claims.items() if k != "exp"}, secret, algorithm="HS256"),
        "wrong secret": jwt.encode(claims, b"x" * 32, algorithm="HS256"),
        "wrong rsa key": jwt.encode(claims, stranger, algorithm="RS256", headers={"kid": "r1"}),
        "alg none": jwt.encode(claims, None, algorithm="none"),
        "hs512": jwt.encode(claims, secret, algorithm="HS512"),
        "hs/rs confusion": f"{confused_head}.{confused_body}.{confused_sig}",
        "unknown kid": jwt.encode(claims, secret, algorithm="HS256", headers={"kid": "k9"}),
    }
    json.dump(tokens, sys.stdout)


if __name__ == "__main__":
    main()
