"""Sign a Discord interaction body with PyNaCl, the library Discord's docs verify with.

Reads the body from stdin and the signing key's 32-byte seed (hex) from DISCORD_SIGNING_SEED;
prints the public key, the timestamp and the X-Signature-Ed25519 value, one per line, all hex
but the timestamp. It also checks that PyNaCl's own VerifyKey accepts the signature over
timestamp + body and refuses it for another body, so a mismatch between PyNaCl and Hermes can
only be Hermes's (tests/e2e/discord.rs).
"""

import os
import sys
import time

from nacl.exceptions import BadSignatureError
from nacl.signing import SigningKey

body = sys.stdin.buffer.read()
key = SigningKey(bytes.fromhex(os.environ["DISCORD_SIGNING_SEED"]))
timestamp = str(int(time.time())).encode()
signature = key.sign(timestamp + body).signature
verify_key = key.verify_key
verify_key.verify(timestamp + body, signature)
try:
    verify_key.verify(timestamp + body + b" ", signature)
    sys.exit("PyNaCl accepted a changed body")
except BadSignatureError:
    pass
print(verify_key.encode().hex())
print(timestamp.decode())
print(signature.hex())
