//! The durable record of a chat reply's sends (`delivery_sends`, docs/channels.md, sending a
//! reply): which copy of the reply may send now (a lease with a bound, so a copy killed
//! mid-send holds back the next one only that long) and which of its parts the platform
//! already accepted. The commit that records the reply as processed marks its row done
//! ([`finish`]), so a later copy learns it under the row's lock, with no window between the
//! commit and its own look; [`prune`] removes old rows.

use std::time::Duration;

use hermes_types::ids::MessageId;

use super::{DbError, GenericClient, stmt};

/// How long a row of a reply that never committed (parked and never replayed) is kept:
/// beyond the parking queues' seven days.
pub const KEEP: &str = "8 days";

/// How long a finished reply's row is kept: as long as the processed-message records.
pub const KEEP_DONE: &str = "3 days";

/// What [`take_lease`] found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Take {
    /// This copy holds the lease; the parts already sent.
    Taken(Vec<usize>),
    /// Another live copy holds it.
    Held,
    /// The reply is finished: send nothing.
    Done,
    /// This copy holds the lease of a reply queued only to be parked (a part its platform
    /// reported failed after accepting it, docs/channels.md, statuses): send nothing, park it.
    Park {
        reason: String,
        detail: Option<String>,
    },
}

/// Who holds a reply's send lease: one per copy at work.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Holder(uuid::Uuid);

impl Holder {
    pub fn new() -> Self {
        Self(uuid::Uuid::now_v7())
    }
}

impl Default for Holder {
    fn default() -> Self {
        Self::new()
    }
}

fn millis(d: Duration) -> i64 {
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX)
}

/// Take message `id`'s send lease for `ttl` if the reply is not finished and nobody holds it,
/// its holder's bound lapsed, or `holder` holds it already (a lease its process could not give
/// back).
pub async fn take_lease(
    c: &impl GenericClient,
    id: MessageId,
    holder: Holder,
    ttl: Duration,
) -> Result<Take, DbError> {
    let row = c
        .query_opt(
            &stmt(
                c,
                "INSERT INTO delivery_sends (message_id, lease_holder, lease_until)
                 VALUES ($1, $2, now() + $3::bigint * interval '1 millisecond')
                 ON CONFLICT (message_id) DO UPDATE
                    SET lease_holder = EXCLUDED.lease_holder,
                        lease_until = EXCLUDED.lease_until,
                        updated_at = now()
                  WHERE NOT delivery_sends.done
                    AND (delivery_sends.lease_until IS NULL OR delivery_sends.lease_until < now()
                         OR delivery_sends.lease_holder = EXCLUDED.lease_holder)
                 RETURNING sent_parts, park_reason, park_detail",
            )
            .await?,
            &[&id.as_uuid(), &holder.0, &millis(ttl)],
        )
        .await?;
    if let Some(r) = row {
        if let Some(reason) = r.get::<_, Option<String>>(1) {
            return Ok(Take::Park {
                reason,
                detail: r.get(2),
            });
        }
        return Ok(Take::Taken(
            r.get::<_, Vec<i32>>(0)
                .into_iter()
                .filter_map(|i| usize::try_from(i).ok())
                .collect(),
        ));
    }
    let done = c
        .query_opt(
            &stmt(c, "SELECT done FROM delivery_sends WHERE message_id = $1").await?,
            &[&id.as_uuid()],
        )
        .await?
        .is_some_and(|r| r.get::<_, bool>(0));
    Ok(if done { Take::Done } else { Take::Held })
}

/// Extend a held lease by `ttl` from now; false when `holder` no longer holds it.
pub async fn renew_lease(
    c: &impl GenericClient,
    id: MessageId,
    holder: Holder,
    ttl: Duration,
) -> Result<bool, DbError> {
    let n = c
        .execute(
            &stmt(
                c,
                "UPDATE delivery_sends
                    SET lease_until = now() + $3::bigint * interval '1 millisecond', updated_at = now()
                  WHERE message_id = $1 AND lease_holder = $2",
            )
            .await?,
            &[&id.as_uuid(), &holder.0, &millis(ttl)],
        )
        .await?;
    Ok(n == 1)
}

/// Record that part `index` of message `id` reached the platform.
pub async fn mark_sent(c: &impl GenericClient, id: MessageId, index: usize) -> Result<(), DbError> {
    let index =
        i32::try_from(index).map_err(|_| DbError::Refused("part index too large".into()))?;
    c.execute(
        &stmt(
            c,
            "INSERT INTO delivery_sends (message_id, sent_parts) VALUES ($1, ARRAY[$2::integer])
             ON CONFLICT (message_id) DO UPDATE
                SET sent_parts = CASE WHEN $2 = ANY(delivery_sends.sent_parts)
                                      THEN delivery_sends.sent_parts
                                      ELSE delivery_sends.sent_parts || $2 END,
                    updated_at = now()",
        )
        .await?,
        &[&id.as_uuid(), &index],
    )
    .await?;
    Ok(())
}

/// Give a held lease back (the sent parts stay recorded for a later attempt).
pub async fn release_lease(
    c: &impl GenericClient,
    id: MessageId,
    holder: Holder,
) -> Result<(), DbError> {
    c.execute(
        &stmt(
            c,
            "UPDATE delivery_sends SET lease_holder = NULL, lease_until = NULL, updated_at = now()
              WHERE message_id = $1 AND lease_holder = $2",
        )
        .await?,
        &[&id.as_uuid(), &holder.0],
    )
    .await?;
    Ok(())
}

/// Mark message `id`'s reply finished, in the transaction that records it as processed; a
/// copy taking the lease after this commit (or waiting on the row's lock meanwhile) finds it
/// done and sends nothing.
pub async fn finish(c: &impl GenericClient, id: MessageId) -> Result<(), DbError> {
    c.execute(
        &stmt(
            c,
            "UPDATE delivery_sends
                SET done = true, lease_holder = NULL, lease_until = NULL, updated_at = now()
              WHERE message_id = $1",
        )
        .await?,
        &[&id.as_uuid()],
    )
    .await?;
    Ok(())
}

/// Why reply `id` was queued only to be parked, with its detail; `None` for any other reply.
pub async fn park_reason(
    c: &impl GenericClient,
    id: MessageId,
) -> Result<Option<(String, Option<String>)>, DbError> {
    let row = c
        .query_opt(
            "SELECT park_reason, park_detail FROM delivery_sends WHERE message_id = $1 AND park_reason IS NOT NULL",
            &[&id.as_uuid()],
        )
        .await?;
    Ok(row.map(|r| (r.get(0), r.get(1))))
}

/// Remove finished rows older than [`KEEP_DONE`] and unfinished ones older than [`KEEP`];
/// returns how many.
pub async fn prune(c: &impl GenericClient) -> Result<u64, DbError> {
    Ok(c.execute(
        &format!(
            "DELETE FROM delivery_sends
              WHERE updated_at < now() - interval '{KEEP_DONE}'
                AND (done OR updated_at < now() - interval '{KEEP}')"
        ),
        &[],
    )
    .await?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scratch::ScratchDb;

    #[tokio::test]
    async fn one_copy_holds_the_lease_and_the_next_sees_what_it_sent() {
        ScratchDb::with(|db| async move {
            let c = db.get().await.unwrap();
            let id = MessageId::new();
            let ttl = Duration::from_secs(30);
            let (a, b) = (Holder::new(), Holder::new());
            assert_eq!(
                take_lease(&c, id, a, ttl).await.unwrap(),
                Take::Taken(vec![])
            );
            assert_eq!(
                take_lease(&c, id, b, ttl).await.unwrap(),
                Take::Held,
                "held by a"
            );
            mark_sent(&c, id, 0).await.unwrap();
            mark_sent(&c, id, 0).await.unwrap();
            mark_sent(&c, id, 1).await.unwrap();
            assert!(renew_lease(&c, id, a, ttl).await.unwrap());
            assert!(!renew_lease(&c, id, b, ttl).await.unwrap());
            release_lease(&c, id, b).await.unwrap();
            assert_eq!(
                take_lease(&c, id, b, ttl).await.unwrap(),
                Take::Held,
                "b cannot release a's"
            );
            assert_eq!(
                take_lease(&c, id, a, ttl).await.unwrap(),
                Take::Taken(vec![0, 1]),
                "a holds it already"
            );
            release_lease(&c, id, a).await.unwrap();
            assert_eq!(
                take_lease(&c, id, b, ttl).await.unwrap(),
                Take::Taken(vec![0, 1])
            );
            finish(&c, id).await.unwrap();
            assert_eq!(take_lease(&c, id, a, ttl).await.unwrap(), Take::Done);
            assert_eq!(prune(&c).await.unwrap(), 0, "kept while recent");
        })
        .await;
    }

    /// A copy killed while holding the lease holds back the next one only until its bound.
    #[tokio::test]
    async fn a_lapsed_lease_is_taken_over() {
        ScratchDb::with(|db| async move {
            let c = db.get().await.unwrap();
            let id = MessageId::new();
            let (dead, next) = (Holder::new(), Holder::new());
            take_lease(&c, id, dead, Duration::from_secs(30))
                .await
                .unwrap();
            mark_sent(&c, id, 0).await.unwrap();
            // The dead holder's bound, moved into the past instead of waited for.
            c.execute(
                "UPDATE delivery_sends SET lease_until = now() - interval '1 second' WHERE message_id = $1",
                &[&id.as_uuid()],
            )
            .await
            .unwrap();
            assert_eq!(
                take_lease(&c, id, next, Duration::from_secs(30))
                    .await
                    .unwrap(),
                Take::Taken(vec![0])
            );
            assert!(!renew_lease(&c, id, dead, Duration::from_secs(30)).await.unwrap());
        })
        .await;
    }
}
