"""Sign a Slack Events API body with the official Slack SDK, as Slack does.

Reads the body from stdin and the signing secret from SLACK_SIGNING_SECRET; prints the
timestamp and the X-Slack-Signature the SDK's SignatureVerifier generates for it, one per
line. It also checks that the SDK itself accepts that pair and refuses it for another
body, so a mismatch between the SDK and Hermes can only be Hermes's (tests/e2e/slack.rs).
"""

import os
import sys
import time

from slack_sdk.signature import SignatureVerifier

body = sys.stdin.buffer.read().decode("utf-8")
verifier = SignatureVerifier(signing_secret=os.environ["SLACK_SIGNING_SECRET"])
timestamp = str(int(time.time()))
signature = verifier.generate_signature(timestamp=timestamp, body=body)
assert verifier.is_valid(body=body, timestamp=timestamp, signature=signature)
assert not verifier.is_valid(body=body + " ", timestamp=timestamp, signature=signature)
print(timestamp)
print(signature)
