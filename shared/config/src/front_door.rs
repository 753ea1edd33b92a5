//! The front door against strangers (docs/security.md, "The front door under slow or hostile
//! clients"): ingest's bounds on what an unverified request may hold, from the environment.

use std::time::Duration;

use crate::env::{Reader, front_door};

/// How ingest bounds requests whose caller it does not know yet.
#[derive(Clone, Copy, Debug)]
pub struct FrontDoor {
    /// `HERMES_UNVERIFIED_BODIES`: bodies read at once before their signature is checked.
    pub unverified_bodies: usize,
    /// `HERMES_UNVERIFIED_BODY_TIMEOUT_SECS`: how long such a body may take to arrive.
    pub unverified_body_timeout: Duration,
    /// `HERMES_UNVERIFIED_BODY_QUEUE_SECS`: how long such a body waits for a place.
    pub unverified_body_queue: Duration,
    /// `HERMES_KEY_MISSES_PER_MINUTE`: unknown Bearer keys per client address per minute.
    pub key_misses_per_minute: u32,
    /// `HERMES_TRUSTED_PROXY_HOPS`: proxies that append to `X-Forwarded-For`.
    pub trusted_proxy_hops: usize,
}

/// The front door's settings (`None` when one of them left a problem behind).
pub(crate) fn read_front_door(r: &mut Reader<'_>) -> Option<FrontDoor> {
    let unverified_bodies = r.get(&front_door::HERMES_UNVERIFIED_BODIES);
    let unverified_body_timeout = r.get(&front_door::HERMES_UNVERIFIED_BODY_TIMEOUT_SECS);
    let unverified_body_queue = r.get(&front_door::HERMES_UNVERIFIED_BODY_QUEUE_SECS);
    let key_misses_per_minute = r.get(&front_door::HERMES_KEY_MISSES_PER_MINUTE);
    let trusted_proxy_hops = r.get(&front_door::HERMES_TRUSTED_PROXY_HOPS);
    Some(FrontDoor {
        unverified_bodies: unverified_bodies?,
        unverified_body_timeout: unverified_body_timeout?,
        unverified_body_queue: unverified_body_queue?,
        key_misses_per_minute: key_misses_per_minute?,
        trusted_proxy_hops: trusted_proxy_hops?,
    })
}
