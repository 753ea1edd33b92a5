//! Where each platform's delivery breaker is kept (docs/channels.md, "Circuit breakers"):
//! the two keys delivery's breakers write, and the read of whether one is open, which the
//! delivery stage and the console's overview both make.

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
