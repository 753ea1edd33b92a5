//! Which parts of a chat reply already reached the platform, and which copy of the reply may
//! send now, kept in PostgreSQL (`delivery_sends`, docs/channels.md, delivery). A reply
//! split into parts that fails half-way, or whose run could not be closed after it was sent,
//! comes back (queued retry, redelivery, a replica killed after the send) with the same id:
//! the parts already sent are skipped instead of reaching the user twice. This is money-like
//! truth, not a cache: with the record in Redis, a Redis restart during load doubled sends.
//!
//! Two copies of one reply can also be at work at the same moment (the outbox relay and an
//! eager publish both placed it, or the broker redelivered it while the first copy was still
//! sending): both would read "nothing sent" and both send. So a copy first takes the reply's
//! send lease (a bound, renewed while it sends); a copy that finds it taken waits for it, then
//! reads the sent parts. The commit that closes the reply's run marks its row done, so a copy
//! coming after it (a redelivery whose acknowledgement was lost, a second publish) sends
//! nothing, however late it looks.
//!
//! A part sent just before PostgreSQL went away cannot be recorded at once: its record is
//! written as soon as PostgreSQL is back (the copy waits for that, within a bound, before it
//! goes on), because the reply, held meanwhile, may be handed to another process by a stop.
//! This process also remembers what it sent (an hour, in memory) for when the bound passes,
//! and the lease it could not give back, so its own next attempt does not wait for it to lapse.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use hermes_db::delivery_sends::{self, Holder, Take};
use hermes_db::platform_sends::{self, NewSend};
use hermes_db::{Db, DbError};
use hermes_types::ids::MessageId;
use hermes_types::ttl_cache::TtlCache;

/// How long a send lease lives unless its holder renews it: a copy killed mid-send holds back
/// the next copy this long at most.
pub const LEASE_TTL: Duration = Duration::from_secs(10);

/// How often a copy waiting for a send lease looks again.
const LEASE_POLL: Duration = Duration::from_millis(100);

/// How many replies' sent parts this process remembers in memory.
const LOCAL_REPLIES: usize = 100_000;

/// How long a copy waits for PostgreSQL to record a part it sent before going on without
/// the record (within the stop grace, so a stop waits for it).
const RECORD_PATIENCE: Duration = Duration::from_secs(30);

/// How often a part's record is tried again while PostgreSQL is away.
const RECORD_RETRY: Duration = Duration::from_millis(250);

/// The task renewing a held lease; it stops when dropped, so a copy whose work is dropped (a
/// stop, a cancelled future) lets its lease lapse instead of holding it for ever.
struct Renewal(tokio::task::JoinHandle<()>);

impl Drop for Renewal {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// The right to send a reply's parts, held by one copy at a time until [`SentParts::release`].
pub struct Lease {
    id: MessageId,
    holder: Holder,
    _renewal: Option<Renewal>,
    /// The parts already sent, by an earlier attempt or another copy.
    pub sent: HashSet<usize>,
    /// Another copy already finished this reply and recorded it: send nothing.
    pub finished: bool,
    /// The reply was queued only to be parked, with this reason and detail (a part its
    /// platform reported failed after accepting it): send nothing.
    pub park: Option<(String, Option<String>)>,
}

/// The record of sent parts.
#[derive(Clone)]
pub struct SentParts {
    db: Db,
    local: Arc<TtlCache<MessageId, Vec<usize>>>,
    /// Leases this process could not give back: its next attempt takes them over.
    unreleased: Arc<TtlCache<MessageId, Holder>>,
    /// How long a part's record waits for PostgreSQL ([`RECORD_PATIENCE`]).
    patience: Duration,
}

impl SentParts {
    pub fn new(db: Db) -> Self {
        Self {
            db,
            local: Arc::new(TtlCache::new(Duration::from_secs(3600), LOCAL_REPLIES)),
            unreleased: Arc::new(TtlCache::new(LEASE_TTL, LOCAL_REPLIES)),
            patience: RECORD_PATIENCE,
        }
    }

    /// Take message `id`'s send lease, waiting while another live copy holds it. An error
    /// means PostgreSQL cannot say: the reply is held, not sent blind.
    pub async fn lease(&self, id: MessageId) -> Result<Lease, DbError> {
        let holder = self.unreleased.remove(&id).unwrap_or_default();
        let mut poll = tokio::time::interval(LEASE_POLL);
        let mut waited = false;
        let (recorded, finished, park) = loop {
            let c = self.db.get().await?;
            match delivery_sends::take_lease(&c, id, holder, LEASE_TTL).await? {
                Take::Taken(parts) => break (parts, false, None),
                Take::Done => break (Vec::new(), true, None),
                Take::Park { reason, detail } => break (Vec::new(), false, Some((reason, detail))),
                Take::Held => {}
            }
            drop(c);
            waited = true;
            poll.tick().await;
        };
        if waited || finished {
            tracing::info!(message_id = %id, finished, "another copy of this reply was at work; going on from what it sent");
        }
        let mut sent: HashSet<usize> = recorded.into_iter().collect();
        sent.extend(self.local.get(&id).unwrap_or_default());
        Ok(Lease {
            id,
            holder,
            _renewal: (!finished).then(|| self.renew_while_held(id, holder)),
            sent,
            finished,
            park,
        })
    }

    fn renew_while_held(&self, id: MessageId, holder: Holder) -> Renewal {
        let db = self.db.clone();
        Renewal(tokio::spawn(async move {
            let mut every = tokio::time::interval(LEASE_TTL / 3);
            every.tick().await;
            loop {
                every.tick().await;
                let renewed = match db.get().await {
                    Ok(c) => delivery_sends::renew_lease(&c, id, holder, LEASE_TTL).await,
                    Err(e) => Err(e),
                };
                match renewed {
                    Ok(true) => {}
                    Ok(false) => {
                        tracing::warn!(message_id = %id, "this copy's send lease lapsed while it was sending; another copy may send too");
                        return;
                    }
                    Err(e) => {
                        tracing::warn!(error = %e, message_id = %id, "cannot renew the send lease")
                    }
                }
            }
        }))
    }

    /// Give the lease back; the sent parts stay recorded for a later attempt.
    pub async fn release(&self, lease: Lease) {
        let Lease { id, holder, .. } = lease;
        let released = match self.db.get().await {
            Ok(c) => delivery_sends::release_lease(&c, id, holder).await,
            Err(e) => Err(e),
        };
        if let Err(e) = released {
            // It lapses by itself, and this process's next attempt takes it over.
            self.unreleased.insert(id, holder);
            tracing::warn!(error = %e, message_id = %id, "cannot release the send lease; it lapses within {LEASE_TTL:?}");
        }
    }

    /// Remember that part `index` of message `id` was sent (as `send`, when the platform named
    /// the message it became): here at once, then in PostgreSQL, waiting up to
    /// [`RECORD_PATIENCE`] for it to be reachable.
    pub async fn mark(&self, id: MessageId, index: usize, send: Option<NewSend<'_>>) {
        let mut here = self.local.get(&id).unwrap_or_default();
        here.push(index);
        self.local.insert(id, here);
        let deadline = tokio::time::Instant::now() + self.patience;
        let mut warned = false;
        loop {
            let marked = match (self.db.get().await, &send) {
                (Ok(c), Some(send)) => platform_sends::mark_sent(&c, id, index, send).await,
                (Ok(c), None) => delivery_sends::mark_sent(&c, id, index).await,
                (Err(e), _) => Err(e),
            };
            let e = match marked {
                Ok(()) => return,
                Err(e) => e,
            };
            if !e.is_unavailable() || tokio::time::Instant::now() >= deadline {
                tracing::warn!(error = %e, message_id = %id, part = index, "cannot record a sent part; only this process remembers it");
                return;
            }
            if !warned {
                tracing::warn!(error = %e, message_id = %id, part = index, "cannot record a sent part yet; trying until PostgreSQL is back");
                warned = true;
            }
            tokio::time::sleep(RECORD_RETRY).await;
        }
    }
}

#[cfg(test)]
mod tests {
    use hermes_db::scratch::ScratchDb;
    use secrecy::SecretString;

    use super::*;

    /// A part sent just before PostgreSQL went away is known to the process that sent it, so
    /// the reply held through the outage does not send it again once PostgreSQL is back.
    #[tokio::test]
    async fn a_part_that_could_not_be_recorded_is_remembered_by_its_sender() {
        ScratchDb::with(|db| async move {
            let port = std::net::TcpListener::bind("127.0.0.1:0")
                .unwrap()
                .local_addr()
                .unwrap()
                .port();
            let away = Db::new(
                &SecretString::from(format!("postgres://nobody@127.0.0.1:{port}/none")),
                1,
            )
            .unwrap();
            let during = SentParts {
                patience: Duration::ZERO,
                ..SentParts::new(away)
            };
            let id = MessageId::new();
            during.mark(id, 0, None).await;
            assert!(
                during.lease(id).await.is_err(),
                "no lease without PostgreSQL"
            );
            let after = SentParts {
                db: db.clone(),
                local: during.local.clone(),
                unreleased: during.unreleased.clone(),
                patience: Duration::ZERO,
            };
            let lease = after.lease(id).await.unwrap();
            assert_eq!(lease.sent, HashSet::from([0]));
            assert!(!lease.finished);
            after.release(lease).await;
            let elsewhere = SentParts::new(db);
            assert!(
                elsewhere.lease(id).await.unwrap().sent.is_empty(),
                "another process"
            );
        })
        .await;
    }

    /// A lease this process could not give back (PostgreSQL away) is taken over by its own
    /// next attempt instead of holding that attempt back until it lapses.
    #[tokio::test]
    async fn a_lease_not_given_back_is_taken_over_by_the_same_process() {
        ScratchDb::with(|db| async move {
            let port = std::net::TcpListener::bind("127.0.0.1:0")
                .unwrap()
                .local_addr()
                .unwrap()
                .port();
            let away = Db::new(
                &SecretString::from(format!("postgres://nobody@127.0.0.1:{port}/none")),
                1,
            )
            .unwrap();
            let here = SentParts::new(db.clone());
            let id = MessageId::new();
            let lease = here.lease(id).await.unwrap();
            let cut_off = SentParts {
                db: away,
                ..here.clone()
            };
            cut_off.release(lease).await;
            // Held for an hour as far as anyone else can tell: only a takeover gets it.
            db.get()
                .await
                .unwrap()
                .execute(
                    "UPDATE delivery_sends SET lease_until = now() + interval '1 hour'",
                    &[],
                )
                .await
                .unwrap();
            let again = tokio::time::timeout(Duration::from_secs(60), here.lease(id))
                .await
                .expect("the lease is taken over, not waited for")
                .unwrap();
            here.release(again).await;
        })
        .await;
    }
}
