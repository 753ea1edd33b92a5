//! A small in-process cache whose entries expire a fixed time after they were stored.
//!
//! The fleet keeps several short-lived copies of rarely changing rows in memory (API keys,
//! a user's facts, whether a workspace has agents, the tool catalog, workspace secrets) so
//! that a message does not ask PostgreSQL the same question again. They all want the same
//! thing: a lookup that misses once the entry is older than the TTL, a hard bound on the
//! number of entries, and a lock a panic elsewhere cannot turn into a second panic. Nothing
//! here does I/O; a caller loads on a miss and stores what it loaded.

use std::collections::HashMap;
use std::hash::Hash;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::sync;

/// A bounded map of values that expire `ttl` after they were inserted.
///
/// When an insert finds the cache full, expired entries are dropped first; if every entry is
/// still fresh, the whole cache is cleared rather than tracking an LRU order (a miss only
/// costs one load, and a full cache of fresh entries is rare).
#[derive(Debug)]
pub struct TtlCache<K, V> {
    ttl: Duration,
    capacity: usize,
    entries: Mutex<HashMap<K, (Instant, V)>>,
}

impl<K: Eq + Hash, V: Clone> TtlCache<K, V> {
    /// A cache keeping each entry for `ttl` and at most `capacity` entries (at least one).
    pub fn new(ttl: Duration, capacity: usize) -> Self {
        Self {
            ttl,
            capacity: capacity.max(1),
            entries: Mutex::new(HashMap::new()),
        }
    }

    /// How long an entry is trusted.
    pub fn ttl(&self) -> Duration {
        self.ttl
    }

    /// The value stored for `key`, unless it has expired.
    pub fn get(&self, key: &K) -> Option<V> {
        self.get_at(key, Instant::now())
    }

    /// Store `value` for `key`, fresh from now.
    pub fn insert(&self, key: K, value: V) {
        self.insert_at(key, value, Instant::now())
    }

    /// Take the value stored for `key` out of the cache, unless it has expired.
    pub fn remove(&self, key: &K) -> Option<V> {
        let now = Instant::now();
        sync::lock(&self.entries)
            .remove(key)
            .filter(|(at, _)| now.saturating_duration_since(*at) < self.ttl)
            .map(|(_, v)| v)
    }

    /// How many entries are held, expired ones included.
    pub fn len(&self) -> usize {
        sync::lock(&self.entries).len()
    }

    /// Whether nothing is held.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// [`TtlCache::get`] as seen at `now` (the clock is a parameter so tests need no sleep).
    fn get_at(&self, key: &K, now: Instant) -> Option<V> {
        sync::lock(&self.entries)
            .get(key)
            .filter(|(at, _)| now.saturating_duration_since(*at) < self.ttl)
            .map(|(_, v)| v.clone())
    }

    /// [`TtlCache::insert`] as done at `now`.
    fn insert_at(&self, key: K, value: V, now: Instant) {
        let mut entries = sync::lock(&self.entries);
        if entries.len() >= self.capacity && !entries.contains_key(&key) {
            entries.retain(|_, (at, _)| now.saturating_duration_since(*at) < self.ttl);
            if entries.len() >= self.capacity {
                entries.clear();
            }
        }
        entries.insert(key, (now, value));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TTL: Duration = Duration::from_secs(30);

    #[test]
    fn an_entry_is_served_until_its_ttl_and_not_after() {
        let cache = TtlCache::new(TTL, 10);
        let t0 = Instant::now();
        cache.insert_at("k", 1, t0);
        assert_eq!(cache.get_at(&"k", t0), Some(1));
        assert_eq!(
            cache.get_at(&"k", t0 + TTL - Duration::from_millis(1)),
            Some(1)
        );
        assert_eq!(
            cache.get_at(&"k", t0 + TTL),
            None,
            "expired at exactly the TTL"
        );
        assert_eq!(cache.get_at(&"other", t0), None);
    }

    #[test]
    fn inserting_again_refreshes_the_entry() {
        let cache = TtlCache::new(TTL, 10);
        let t0 = Instant::now();
        cache.insert_at("k", 1, t0);
        cache.insert_at("k", 2, t0 + Duration::from_secs(20));
        assert_eq!(cache.get_at(&"k", t0 + Duration::from_secs(40)), Some(2));
    }

    #[test]
    fn a_full_cache_drops_expired_entries_first() {
        let cache = TtlCache::new(TTL, 2);
        let t0 = Instant::now();
        cache.insert_at(1, "old", t0);
        cache.insert_at(2, "fresh", t0 + Duration::from_secs(20));
        let t1 = t0 + Duration::from_secs(35);
        cache.insert_at(3, "new", t1);
        assert_eq!(cache.len(), 2, "only the expired entry went");
        assert_eq!(cache.get_at(&2, t1), Some("fresh"));
        assert_eq!(cache.get_at(&3, t1), Some("new"));
    }

    #[test]
    fn a_cache_full_of_fresh_entries_starts_over_and_stays_bounded() {
        let cache = TtlCache::new(TTL, 3);
        let t0 = Instant::now();
        for k in 0..100 {
            cache.insert_at(k, k, t0);
            assert!(cache.len() <= 3, "{} held", cache.len());
        }
        assert_eq!(cache.get_at(&99, t0), Some(99));

        // Replacing a key of a full cache keeps the others.
        let full = TtlCache::new(TTL, 3);
        for k in 0..3 {
            full.insert_at(k, k, t0);
        }
        full.insert_at(2, 20, t0);
        assert_eq!(full.get_at(&0, t0), Some(0));
        assert_eq!(full.get_at(&2, t0), Some(20));
    }

    #[test]
    fn the_public_clock_is_now() {
        let cache = TtlCache::new(TTL, 1);
        assert!(cache.is_empty());
        cache.insert("k", 1);
        assert_eq!(cache.get(&"k"), Some(1));
        let zero = TtlCache::new(Duration::ZERO, 1);
        zero.insert("k", 1);
        assert_eq!(zero.get(&"k"), None, "a zero TTL caches nothing");
    }
}
