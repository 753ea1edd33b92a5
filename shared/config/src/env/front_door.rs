//! The front door against strangers (docs/security.md, "The front door under slow or hostile
//! clients"): the small pool in which bodies are read before their signature is checked,
//! its deadline, how many unknown Bearer keys one client address may try, and how the
//! client address is found behind proxies.

use std::time::Duration;

use super::Unset::Value;
use super::{kinds, settings};

settings! {
    /// Strangers at the front door.
    SETTINGS = [
        HERMES_UNVERIFIED_BODIES: usize {
            kind: kinds::COUNT_POSITIVE,
            unset: Value("32"),
            secret: false,
            help: "bodies read at once, before their signature is checked, on the routes whose signature covers the body (WhatsApp Cloud API, Instagram, the Forge route); beyond, 503 with `Retry-After` at once. These never take one of `HERMES_MAX_IN_FLIGHT` until their signature holds",
        },
        HERMES_UNVERIFIED_BODY_TIMEOUT_SECS: Duration {
            kind: kinds::SECS_POSITIVE,
            unset: Value("5"),
            secret: false,
            help: "how long a body not yet verified (see `HERMES_UNVERIFIED_BODIES`) may take to arrive, counted from its headers; beyond, 408 and the connection is closed",
        },
        HERMES_UNVERIFIED_BODY_QUEUE_SECS: Duration {
            kind: kinds::SECS,
            unset: Value("10"),
            secret: false,
            help: "how long a body not yet verified waits for a place in `HERMES_UNVERIFIED_BODIES` before it is answered 503 with `Retry-After`; waiting holds only its connection, so a flood of slow bodies waits instead of reconnecting at once; a genuine webhook waits this long only while the pool is full (0: answer at once)",
        },
        HERMES_KEY_MISSES_PER_MINUTE: u32 {
            kind: kinds::U32_POSITIVE,
            unset: Value("30"),
            secret: false,
            help: "unknown Bearer keys one client address (an IPv6 /64) may present per minute, as many at once; beyond, 429 with `Retry-After` and no look-up. Known keys are never held back",
        },
        HERMES_TRUSTED_PROXY_HOPS: usize {
            kind: kinds::COUNT,
            unset: Value("0"),
            secret: false,
            help: "proxies in front of ingest that append to `X-Forwarded-For` (e.g. 1 behind one ingress); the client address is the entry that many from the right. 0: the connection's peer, the header ignored",
        },
    ]
}
