//! Where each platform's delivery breaker is kept (docs/channels.md, "Circuit breakers"):
//! the two keys delivery's breakers write, and the reads of whether they are open: one
//! platform's for the delivery stage, every platform's at once for the console's overview.

use hermes_types::model::Platform;

use crate::{Cache, CacheError};

impl Cache {
    /// The breaker's keys for `platform`: its recent failures (a sorted set of times) and,
    /// while it is open, the unix millisecond it resets at.
    pub fn breaker_keys(&self, platform: Platform) -> [String; 2] {
        [
            self.key(format!("breaker:{}:failures", platform.as_str())),
            self.key(format!("breaker:{}:open", platform.as_str())),
        ]
    }

    /// When each of `platforms`' open breakers resets (unix ms; `None` while closed), in one
    /// round trip.
    pub async fn breakers_open_until_ms(
        &self,
        platforms: &[Platform],
    ) -> Result<Vec<Option<i64>>, CacheError> {
        let keys: Vec<String> = platforms
            .iter()
            .map(|p| self.breaker_keys(*p)[1].clone())
            .collect();
        redis::cmd("MGET")
            .arg(&keys)
            .query_async(&mut self.conn())
            .await
            .map_err(|e| self.failed("breaker_read", e))
    }

    /// When `platform`'s open breaker resets (unix ms); `None` while it is closed.
    pub async fn breaker_open_until_ms(
        &self,
        platform: Platform,
    ) -> Result<Option<i64>, CacheError> {
        let [_, open] = self.breaker_keys(platform);
        redis::cmd("GET")
            .arg(&open)
            .query_async(&mut self.conn())
            .await
            .map_err(|e| self.failed("breaker_read", e))
    }
}
