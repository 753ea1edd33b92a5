// An agent runtime's verifier, written independently of Hermes from seed 000's TypeScript
// example (X-Forge-Signature over `${timestamp}.${rawBody}`, timestamp tolerance, constant-
// time compare) plus the body-only signature and the Standard Webhooks scheme. Reads
// { body, headers (lower-case names), secret } as JSON on stdin and prints which checks pass.
const crypto = require("node:crypto");

const TOLERANCE_SECONDS = 300;

function safeEqual(a, b) {
  const x = Buffer.from(a);
  const y = Buffer.from(b);
  return x.length === y.length && crypto.timingSafeEqual(x, y);
}

function verifyForgeWebhook(rawBody, headers, secret) {
  const ts = headers["x-forge-timestamp"];
  const sig = headers["x-forge-signature"];
  if (!ts || !sig) return false;
  const skew = Math.abs(Date.now() / 1000 - Number(ts));
  if (Number.isNaN(skew) || skew > TOLERANCE_SECONDS) return false;
  const expected =
    "sha256=" + crypto.createHmac("sha256", secret).update(`${ts}.${rawBody}`).digest("hex");
  return safeEqual(sig, expected);
}

function verifyBodySignature(rawBody, headers, secret) {
  const sig = headers["x-forge-body-signature"];
  if (!sig) return false;
  const expected = "sha256=" + crypto.createHmac("sha256", secret).update(rawBody).digest("hex");
  return safeEqual(sig, expected);
}

function verifyStandardWebhook(rawBody, headers, secret) {
  const id = headers["webhook-id"];
  const ts = headers["webhook-timestamp"];
  const sigs = headers["webhook-signature"];
  if (!id || !ts || !sigs) return false;
  if (Math.abs(Date.now() / 1000 - Number(ts)) > TOLERANCE_SECONDS) return false;
  const key = Buffer.from(secret.replace(/^whsec_/, ""), "base64");
  const expected =
    "v1," + crypto.createHmac("sha256", key).update(`${id}.${ts}.${rawBody}`).digest("base64");
  return sigs.split(" ").some((s) => safeEqual(s, expected));
}

const input = JSON.parse(require("node:fs").readFileSync(0, "utf8"));
const { body, headers, secret } = input;
console.log(
  JSON.stringify({
    forge: verifyForgeWebhook(body, headers, secret),
    body: verifyBodySignature(body, headers, secret),
    standard: verifyStandardWebhook(body, headers, secret),
    tampered: verifyForgeWebhook(body + " ", headers, secret),
    wrongSecret: verifyForgeWebhook(body, headers, secret + "x"),
  }),
);
