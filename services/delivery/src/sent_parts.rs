//! Which parts of a chat reply already reached the platform, remembered in Redis for a day
//! by message id (`{ns}:delivery:sent:{message_id}`). A reply split into parts that fails
//! half-way, or whose run could not be closed after it was sent, comes back (queued retry,
//! redelivery) with the same id: the parts already sent are skipped instead of reaching the
//! user twice. Redis down means nothing is known and every part is sent again
//! (at-least-once, never lost).

use std::collections::HashSet;
use std::time::Duration;

use hermes_cache::Cache;
use hermes_types::ids::MessageId;
use redis::AsyncCommands;

/// How long the record of a reply's sent parts is kept (beyond the whole retry schedule).
const KEEP: Duration = Duration::from_secs(24 * 3600);

/// The record of sent parts.
#[derive(Clone)]
pub struct SentParts {
    cache: Cache,
}

impl SentParts {
    pub fn new(cache: Cache) -> Self {
        Self { cache }
    }

    fn key(&self, id: MessageId) -> String {
        self.cache.key(format!("delivery:sent:{id}"))
    }

    /// The indices of the parts of message `id` already sent (empty when Redis cannot say).
    pub async fn sent(&self, id: MessageId) -> HashSet<usize> {
        let mut c = self.cache.conn();
        match c.smembers::<_, Vec<usize>>(self.key(id)).await {
            Ok(v) => v.into_iter().collect(),
            Err(e) => {
                let e = self.cache.failed("delivery_sent_read", e);
                tracing::warn!(error = %e, "cannot read which parts were sent; sending all");
                HashSet::new()
            }
        }
    }

    /// Remember that part `index` of message `id` was sent.
    pub async fn mark(&self, id: MessageId, index: usize) {
        let key = self.key(id);
        let mut c = self.cache.conn();
        let r: Result<(), _> = redis::pipe()
            .sadd(&key, index)
            .ignore()
            .expire(&key, KEEP.as_secs() as i64)
            .ignore()
            .query_async(&mut c)
            .await;
        if let Err(e) = r {
            let _ = self.cache.failed("delivery_sent_write", e);
        }
    }
}

#[cfg(test)]
mod tests {
    use hermes_config::Namespace;
    use hermes_telemetry::Metrics;
    use secrecy::SecretString;

    use super::*;

    fn parts(redis: &str) -> SentParts {
        let ns = Namespace::parse(&format!("sent{:016x}", rand::random::<u64>())).unwrap();
        SentParts::new(
            Cache::new(&SecretString::from(redis.to_string()), ns, Metrics::new()).unwrap(),
        )
    }

    #[tokio::test]
    async fn sent_parts_are_remembered_per_message() {
        let url = std::env::var("REDIS_URL").unwrap_or_else(|_| "redis://127.0.0.1:6379".into());
        let p = parts(&url);
        let (a, b) = (MessageId::new(), MessageId::new());
        assert!(p.sent(a).await.is_empty());
        p.mark(a, 0).await;
        p.mark(a, 2).await;
        assert_eq!(p.sent(a).await, HashSet::from([0, 2]));
        assert!(p.sent(b).await.is_empty());
    }

    #[tokio::test]
    async fn redis_down_knows_nothing() {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let p = parts(&format!("redis://127.0.0.1:{port}"));
        let id = MessageId::new();
        p.mark(id, 0).await;
        assert!(p.sent(id).await.is_empty());
    }
}
