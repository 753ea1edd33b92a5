"""Mint a JWT bearer for the agent MCP surface with PyJWT, an implementation independent of
Hermes (docs/agents.md, "JWT bearers"): the conformance tests sign with it, so what Hermes
accepts and refuses is decided against a library written from RFC 7519, not against itself.

Reads one JSON object on stdin and prints one line:
  {"public": "<seed>"}                      -> the Ed25519 public key of a 32-byte base64url seed,
                                               as a JWK's "x"
  {"alg": "HS256"|"EdDSA"|"none", "key": "<secret or seed>", "kid": "...", "claims": {...}}
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


def main() -> None:
    ask = json.load(sys.stdin)
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
    else:
        key = ask["key"]
    print(jwt.encode(ask["claims"], key, algorithm=alg, headers=headers))


if __name__ == "__main__":
    main()
