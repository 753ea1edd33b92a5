//! What ingest remembers of Bearer keys (docs/security.md, "The front door under slow or
//! hostile clients"): live keys for 30 s (a revoked key stops working within that), and,
//! apart, a small cache of keys that name nothing. Kept apart, a flood of made-up keys can
//! only churn the cache of misses: the live keys' cache, which would otherwise fill and be
//! cleared, keeps every known caller off PostgreSQL. Unknown keys are limited per client
//! address ([`MissLimiter`]): beyond `HERMES_KEY_MISSES_PER_MINUTE`, a client's unknown keys
//! are refused before any look-up, while keys already known as live are never held back:
//! not while cached, nor for an hour after they were last found live ([`VOUCHED_TTL`]), so a
//! live key behind the same address as a flood (one NAT, one proxy) is still looked up when
//! its 30 s entry expires instead of being refused with the flood.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use hermes_db::api_keys::ApiKey;
use hermes_types::sync;
use hermes_types::ttl_cache::TtlCache;

/// Key lookups are cached briefly: a revoked key stops working within this long, and a key
/// created after a miss is taken within this long.
pub const KEY_CACHE_TTL: Duration = Duration::from_secs(30);

/// Live keys remembered at once.
const LIVE_KEYS: usize = 10_000;

/// How long a key found live stays exempt from its address's limit of unknown keys. It is
/// still looked up after [`KEY_CACHE_TTL`] (a revoked key stops within that); only its
/// hash is kept, and only a real key's hash ever gets here.
pub const VOUCHED_TTL: Duration = Duration::from_secs(3600);

/// Unknown keys remembered at once (a flood of them churns this cache only).
const MISSES: usize = 4_096;

/// Client addresses whose unknown keys are counted at once.
const CLIENTS: usize = 10_000;

/// The caches of key hash → key, and of key hashes that name nothing.
pub struct Keys {
    live: TtlCache<String, ApiKey>,
    /// Hashes of keys found live within [`VOUCHED_TTL`].
    vouched: TtlCache<String, ()>,
    misses: TtlCache<String, ()>,
    /// Unknown keys per client address.
    pub limiter: MissLimiter,
}

impl Keys {
    /// Caches for keys and a limit of `misses_per_minute` unknown keys per client.
    pub fn new(misses_per_minute: u32) -> Self {
        Self::with_ttl(KEY_CACHE_TTL, misses_per_minute)
    }

    /// As [`Keys::new`], with live keys cached for `live_ttl`.
    fn with_ttl(live_ttl: Duration, misses_per_minute: u32) -> Self {
        Self {
            live: TtlCache::new(live_ttl, LIVE_KEYS),
            vouched: TtlCache::new(VOUCHED_TTL, LIVE_KEYS),
            misses: TtlCache::new(KEY_CACHE_TTL, MISSES),
            limiter: MissLimiter::new(misses_per_minute, CLIENTS),
        }
    }

    /// How long `client` must wait before `hash`, not cached as live, may be looked up
    /// (`None`: now). A key found live within [`VOUCHED_TTL`] never waits for its address.
    pub fn wait(&self, hash: &str, client: IpAddr) -> Option<Duration> {
        if self.vouched.get(&hash.to_string()).is_some() {
            return None;
        }
        self.limiter.wait(client)
    }

    /// The live key of `hash`, if it was seen lately.
    pub fn live(&self, hash: &str) -> Option<ApiKey> {
        self.live.get(&hash.to_string())
    }

    /// Whether `hash` was looked up lately and named nothing.
    pub fn known_miss(&self, hash: &str) -> bool {
        self.misses.get(&hash.to_string()).is_some()
    }

    /// Remember what a look-up of `hash` found.
    pub fn remember(&self, hash: String, found: Option<&ApiKey>) {
        match found {
            Some(key) => {
                self.vouched.insert(hash.clone(), ());
                self.live.insert(hash, key.clone());
            }
            None => self.misses.insert(hash, ()),
        }
    }
}

/// A token bucket per client address: `per_minute` unknown keys, as many at once.
pub struct MissLimiter {
    per_minute: u32,
    capacity: usize,
    buckets: Mutex<HashMap<IpAddr, Bucket>>,
}

#[derive(Clone, Copy, Debug)]
struct Bucket {
    tokens: f64,
    at: Instant,
}

impl MissLimiter {
    /// At most `capacity` clients are tracked: when full, those whose bucket has refilled
    /// are forgotten first (they lose nothing), and if none has, all are.
    pub fn new(per_minute: u32, capacity: usize) -> Self {
        Self {
            per_minute: per_minute.max(1),
            capacity: capacity.max(1),
            buckets: Mutex::new(HashMap::new()),
        }
    }

    fn refilled(&self, b: Bucket, now: Instant) -> f64 {
        let rate = f64::from(self.per_minute) / 60.0;
        let elapsed = now.saturating_duration_since(b.at).as_secs_f64();
        (b.tokens + elapsed * rate).min(f64::from(self.per_minute))
    }

    /// How long `client` must wait before it may present another unknown key (`None`: it
    /// may now). Takes nothing.
    pub fn wait(&self, client: IpAddr) -> Option<Duration> {
        self.wait_at(client, Instant::now())
    }

    /// Count one unknown key against `client`.
    pub fn take(&self, client: IpAddr) {
        self.take_at(client, Instant::now())
    }

    fn wait_at(&self, client: IpAddr, now: Instant) -> Option<Duration> {
        let buckets = sync::lock(&self.buckets);
        let tokens = self.refilled(*buckets.get(&client)?, now);
        if tokens >= 1.0 {
            return None;
        }
        let rate = f64::from(self.per_minute) / 60.0;
        Some(Duration::from_secs_f64((1.0 - tokens) / rate))
    }

    fn take_at(&self, client: IpAddr, now: Instant) {
        let mut buckets = sync::lock(&self.buckets);
        let full = f64::from(self.per_minute);
        if buckets.len() >= self.capacity && !buckets.contains_key(&client) {
            buckets.retain(|_, b| self.refilled(*b, now) < full);
            if buckets.len() >= self.capacity {
                buckets.clear();
            }
        }
        let bucket = buckets.entry(client).or_insert(Bucket {
            tokens: full,
            at: now,
        });
        let tokens = self.refilled(*bucket, now);
        *bucket = Bucket {
            tokens: (tokens - 1.0).max(0.0),
            at: now,
        };
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hermes_types::ids::ApiKeyId;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn a_client_gets_its_burst_of_unknown_keys_then_waits_for_the_rate() {
        let l = MissLimiter::new(3, 100);
        let (a, b, t0) = (ip("192.0.2.1"), ip("192.0.2.2"), Instant::now());
        for _ in 0..3 {
            assert_eq!(l.wait_at(a, t0), None);
            l.take_at(a, t0);
        }
        let wait = l.wait_at(a, t0).expect("over its misses");
        assert!(wait > Duration::from_secs(19) && wait <= Duration::from_secs(20));
        assert_eq!(l.wait_at(b, t0), None, "another client is not held back");
        assert_eq!(l.wait_at(a, t0 + Duration::from_secs(20)), None, "refilled");
    }

    #[test]
    fn a_full_table_forgets_refilled_clients_first() {
        let l = MissLimiter::new(2, 2);
        let t0 = Instant::now();
        let (a, b, c) = (ip("192.0.2.1"), ip("192.0.2.2"), ip("192.0.2.3"));
        l.take_at(a, t0);
        l.take_at(a, t0);
        l.take_at(b, t0);
        // b refills (30 s per key at 2 a minute) while a stays spent.
        let later = t0 + Duration::from_secs(31);
        l.take_at(a, later - Duration::from_secs(1));
        l.take_at(c, later);
        assert!(l.wait_at(a, later).is_some(), "a is still counted");
        assert!(sync::lock(&l.buckets).get(&b).is_none(), "b was forgotten");
    }

    /// A live key of no consequence.
    fn live_key() -> ApiKey {
        ApiKey {
            id: ApiKeyId::new(),
            name: "app".into(),
            prefix: "hk_1a2b".into(),
            callback_url: None,
            created_at: chrono::Utc::now(),
            revoked: false,
            callback_secret_sealed: None,
            scopes: Vec::new(),
            limits: Default::default(),
            agent_id: None,
            toolsets: Vec::new(),
        }
    }

    #[test]
    fn a_key_found_live_is_looked_up_again_whatever_its_address_sent() {
        // Live entries expire at once: the key must be looked up again.
        let keys = Keys::with_ttl(Duration::ZERO, 1);
        let client = ip("10.0.0.7");
        let live = live_key();
        keys.remember("live".into(), Some(&live));
        assert!(keys.live("live").is_none(), "its cached entry expired");
        // The address's one unknown key a minute is spent by a flood.
        keys.limiter.take(client);
        assert!(
            keys.wait("made-up", client).is_some(),
            "a stranger's key waits"
        );
        assert_eq!(keys.wait("live", client), None, "the live key is looked up");
    }

    #[test]
    fn a_flood_of_unknown_keys_never_evicts_a_live_one() {
        let keys = Keys::new(30);
        let live = live_key();
        keys.remember("live".into(), Some(&live));
        for i in 0..(MISSES * 3) {
            keys.remember(format!("made-up-{i}"), None);
        }
        assert_eq!(keys.live("live").map(|k| k.id), Some(live.id));
        assert!(keys.known_miss(&format!("made-up-{}", MISSES * 3 - 1)));
        assert!(!keys.known_miss("live"));
    }
}
