//! Which parts of a chat reply already reached the platform, remembered in Redis for a day
//! by message id (`{ns}:delivery:sent:{message_id}`). A reply split into parts that fails
//! half-way, or whose run could not be closed after it was sent, comes back (queued retry,
//! redelivery) with the same id: the parts already sent are skipped instead of reaching the
//! user twice. This process also remembers what it sent (an hour, in memory), so a reply it
//! holds while PostgreSQL is away and then processes again does not go out twice because
//! Redis is away or lost its keys meanwhile. A copy in another process with Redis down knows
//! nothing and sends every part again (at-least-once, never lost).
//!
//! Two copies of one reply can also be at work at the same moment (the outbox relay and an
//! eager publish both placed it, or the broker redelivered it while the first copy was still
//! sending): both would read "nothing sent" and both send. So a copy first takes the
//! reply's send lease (`{ns}:delivery:lease:{message_id}`, `SET NX` with a bound); a copy that
//! finds it taken waits for it, then reads the sent parts and skips them.

use std::collections::HashSet;
use std::time::Duration;

use hermes_cache::Cache;
use hermes_types::ids::MessageId;
use redis::AsyncCommands;

/// How long the record of a reply's sent parts is kept (beyond the whole retry schedule).
const KEEP: Duration = Duration::from_secs(24 * 3600);

/// How often a copy waiting for a send lease looks again.
const LEASE_POLL: Duration = Duration::from_millis(100);

/// Compare-and-delete: only the holder's token releases a lease.
const RELEASE: &str = r"
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
";

/// Compare-and-extend: only the holder's token keeps a lease alive.
const RENEW: &str = r"
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('PEXPIRE', KEYS[1], ARGV[2]) end
return 0
";

/// How long a send lease lives unless its holder renews it: a copy killed mid-send holds
/// back the next copy this long at most.
pub const LEASE_TTL: Duration = Duration::from_secs(5);

/// The task renewing a held lease; it stops when dropped, so a copy whose work is dropped
/// (a stop, a cancelled future) lets its lease lapse instead of holding it for ever.
pub struct Renewal(tokio::task::JoinHandle<()>);

impl Drop for Renewal {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// The right to send a reply's parts, held by one copy at a time.
pub enum Lease {
    /// This copy holds it until [`SentParts::release`]; a task renews it meanwhile (the
    /// rate gate may hold a send for longer than [`LEASE_TTL`]).
    Held {
        key: String,
        token: String,
        renewal: Renewal,
    },
    /// Redis cannot say: the copy sends anyway (at-least-once), and this is counted.
    Unknown,
}

/// How many replies' sent parts this process remembers in memory.
const LOCAL_REPLIES: usize = 100_000;

/// The record of sent parts.
#[derive(Clone)]
pub struct SentParts {
    cache: Cache,
    local: std::sync::Arc<hermes_types::ttl_cache::TtlCache<MessageId, Vec<usize>>>,
}

impl SentParts {
    pub fn new(cache: Cache) -> Self {
        Self {
            cache,
            local: std::sync::Arc::new(hermes_types::ttl_cache::TtlCache::new(
                Duration::from_secs(3600),
                LOCAL_REPLIES,
            )),
        }
    }

    fn key(&self, id: MessageId) -> String {
        self.cache.key(format!("delivery:sent:{id}"))
    }

    /// The indices of the parts of message `id` already sent, as Redis and this process
    /// remember them.
    pub async fn sent(&self, id: MessageId) -> HashSet<usize> {
        let mut sent: HashSet<usize> = self
            .local
            .get(&id)
            .unwrap_or_default()
            .into_iter()
            .collect();
        let mut c = self.cache.conn();
        match c.smembers::<_, Vec<usize>>(self.key(id)).await {
            Ok(v) => sent.extend(v),
            Err(e) => {
                let e = self.cache.failed("delivery_sent_read", e);
                tracing::warn!(error = %e, known = sent.len(), "cannot read which parts were sent; going by this process's memory");
            }
        }
        sent
    }

    /// Take message `id`'s send lease, waiting while another live copy holds it.
    pub async fn lease(&self, id: MessageId) -> Lease {
        let ttl = LEASE_TTL;
        let key = self.cache.key(format!("delivery:lease:{id}"));
        let token = uuid::Uuid::now_v7().to_string();
        let mut c = self.cache.conn();
        let mut poll = tokio::time::interval(LEASE_POLL);
        let mut waited = false;
        let mut last_seen = tokio::time::Instant::now();
        loop {
            let taken: Result<Option<String>, _> = redis::cmd("SET")
                .arg(&key)
                .arg(&token)
                .arg("NX")
                .arg("PX")
                .arg(ttl.as_millis() as u64)
                .query_async(&mut c)
                .await;
            match taken {
                Ok(Some(_)) => {
                    if waited {
                        tracing::info!(message_id = %id, "another copy of this reply was sending; going on from what it sent");
                    }
                    let renewal = self.renew_while_held(key.clone(), token.clone(), ttl);
                    return Lease::Held {
                        key,
                        token,
                        renewal,
                    };
                }
                Ok(None) => {
                    waited = true;
                    last_seen = tokio::time::Instant::now();
                    poll.tick().await;
                }
                // Another copy held the lease a moment ago: it may still be sending, so keep
                // waiting until its lease would have lapsed before sending blind.
                Err(e) if waited && last_seen.elapsed() < ttl => {
                    let _ = self.cache.failed("delivery_lease", e);
                    poll.tick().await;
                }
                Err(e) => {
                    let e = self.cache.failed("delivery_lease", e);
                    tracing::warn!(error = %e, "cannot take the send lease; sending without it");
                    return Lease::Unknown;
                }
            }
        }
    }

    fn renew_while_held(&self, key: String, token: String, ttl: Duration) -> Renewal {
        let cache = self.cache.clone();
        Renewal(tokio::spawn(async move {
            let mut every = tokio::time::interval(ttl / 3);
            every.tick().await;
            let script = redis::Script::new(RENEW);
            loop {
                every.tick().await;
                let mut c = cache.conn();
                let r: Result<i64, _> = script
                    .key(&key)
                    .arg(&token)
                    .arg(ttl.as_millis() as u64)
                    .invoke_async(&mut c)
                    .await;
                if let Err(e) = r {
                    let _ = cache.failed("delivery_lease", e);
                }
            }
        }))
    }

    /// Give the lease back once this copy's sends are recorded.
    pub async fn release(&self, lease: Lease) {
        let Lease::Held {
            key,
            token,
            renewal,
        } = lease
        else {
            return;
        };
        drop(renewal);
        let mut c = self.cache.conn();
        let r: Result<i64, _> = redis::Script::new(RELEASE)
            .key(&key)
            .arg(&token)
            .invoke_async(&mut c)
            .await;
        if let Err(e) = r {
            // It expires by itself.
            let _ = self.cache.failed("delivery_lease", e);
        }
    }

    /// Remember that part `index` of message `id` was sent.
    pub async fn mark(&self, id: MessageId, index: usize) {
        let mut here = self.local.get(&id).unwrap_or_default();
        here.push(index);
        self.local.insert(id, here);
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

    /// A reply held while PostgreSQL was away and processed again while Redis is away (or
    /// after it lost its keys) must not go out twice from the process that sent it.
    #[tokio::test]
    async fn with_redis_down_the_sending_process_still_knows_and_another_does_not() {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let redis = format!("redis://127.0.0.1:{port}");
        let p = parts(&redis);
        let id = MessageId::new();
        p.mark(id, 0).await;
        assert_eq!(p.sent(id).await, HashSet::from([0]));
        assert!(parts(&redis).sent(id).await.is_empty(), "another process");
    }
}
