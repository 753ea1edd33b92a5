"""Mint a JWT bearer for the agent MCP surface with PyJWT, an implementation independent of
Hermes (docs/agents.md, "JWT bearers"): the conformance tests sign with it, so what Hermes
accepts and refuses is decided against a library written from RFC 7519, not against itself.

Microsoft Teams' tokens (RS256, tests/e2e/teams.rs) are signed with it the same way, with an
RSA key read from a DER file, whose public half it also writes as a JWKS document.

Reads one JSON object on stdin and prints one line:
  {"public": "<seed>"}                      -> the Ed25519 public key of a 32-byte base64url seed,
                                               as a JWK's "x"
  {"jwks": "<RSA key file, DER>", "kid": "...", "endorsements": [...]}
                                            -> a JWKS document holding its public key
  {"alg": "HS256"|"EdDSA"|"none", "key": "<secret or seed>", "kid": "...", "claims": {...}}
  {"alg": "RS256", "key_file": "<RSA key file, DER>", "kid": "...", "claims": {...}}
                                            -> the token
"""

import base64
import json
import sys

import jwt
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey


def b64url_decode(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def ed25519(seed: str) -> Ed25519PrivateKey:
    return Ed25519PrivateKey.from_private_bytes(b64url_decode(seed))


def rsa(path: str):
    with open(path, "rb") as f:
        return serialization.load_der_private_key(f.read(), password=None)


def main() -> None:
    ask = json.load(sys.stdin)
    if "jwks" in ask:
        jwk = json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(rsa(ask["jwks"]).public_key()))
        jwk.update({"kid": ask["kid"], "use": "sig", "endorsements": ask.get("endorsements", [])})
        print(json.dumps({"keys": [jwk]}))
        return
    if "public" in ask:
        raw = ed25519(ask["public"]).public_key().public_bytes(
            serialization.Encoding.Raw, serialization.PublicFormat.Raw
        )
        print(base64.urlsafe_b64encode(raw).rstrip(b"=").decode())
        return
    alg = ask["alg"]
    headers = {"kid": ask["kid"]} if ask.get("kid") else None
    if alg == "none":
        key = None
    elif alg == "EdDSA":
        key = ed25519(ask["key"])
    elif alg == "RS256":
        key = rsa(ask["key_file"])
    else:
        key = ask["key"]
    print(jwt.encode(ask["claims"], key, algorithm=alg, headers=headers))


if __name__ == "__main__":
    main()
