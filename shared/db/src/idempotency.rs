//! `Idempotency-Key` records of the HTTP API (docs/api.md, idempotency), in PostgreSQL
//! (`idempotency_records`): one row per (calling key, hash of the idempotency key) holds
//! first a pending marker, taken by the request that runs, then the answer that request
//! gave, kept 24 hours. Every replica reads the same rows, so a retry reaching another
//! replica is answered the same way. They live here rather than in Redis because Redis may
//! evict keys that have a TTL under memory pressure, and a record lost that way lets a
//! retried request run twice; nothing evicts a row.

use hermes_types::ids::ApiKeyId;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::{Db, DbError, GenericClient};

/// How long an answer is kept for replays.
pub const WINDOW_SECS: u64 = 24 * 3600;

/// Expired rows deleted per statement of [`prune`].
const PRUNE_BATCH: i64 = 5000;

/// What a request's answer was, as kept for replays.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct StoredAnswer {
    /// The HTTP status.
    pub status: u16,
    /// The answer's `Content-Type`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content_type: Option<String>,
    /// The run the answer named (`x-hermes-run-id`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_id: Option<String>,
    /// The body; `None` when it was not kept whole (an event stream, or a body over the
    /// size kept), and a replay names the run instead.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub body: Option<String>,
}

/// One idempotency record.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Record {
    /// A request with this key is running; `token` names it.
    Pending { hash: String, token: uuid::Uuid },
    /// A request with this key was answered.
    Done { hash: String, answer: StoredAnswer },
}

impl Record {
    /// The hash of the request the record belongs to (its route and body).
    pub fn hash(&self) -> &str {
        match self {
            Record::Pending { hash, .. } | Record::Done { hash, .. } => hash,
        }
    }
}

/// What taking a key found.
#[derive(Debug, PartialEq, Eq)]
pub enum Begin {
    /// The key is this request's; finish it with this marker.
    Taken(Record),
    /// Another request holds or answered it.
    Found(Record),
}

/// Whose records these are: two calling keys never share one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scope {
    /// `API_SERVER_KEY`.
    Operator,
    /// A key made with `hermes api-keys create`.
    Key(ApiKeyId),
    /// A request that reached the middleware without a caller (none today).
    Anonymous,
}

impl Scope {
    fn as_text(self) -> String {
        match self {
            Scope::Operator => "operator".into(),
            Scope::Key(k) => k.to_string(),
            Scope::Anonymous => "anonymous".into(),
        }
    }
}

/// One record's address: the calling key and the SHA-256 of the caller's idempotency key
/// (the key is the caller's text and is not stored).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RecordKey {
    scope: String,
    key_hash: String,
}

impl RecordKey {
    pub fn new(scope: Scope, key: &str) -> Self {
        Self {
            scope: scope.as_text(),
            key_hash: hex::encode(Sha256::digest(key.as_bytes())),
        }
    }
}

/// Read a row's `(request_hash, token, answer)` as a record.
fn record(row: &tokio_postgres::Row) -> Result<Record, DbError> {
    let hash: String = row.get(0);
    let token: Option<uuid::Uuid> = row.get(1);
    let answer: Option<serde_json::Value> = row.get(2);
    match (token, answer) {
        (Some(token), _) => Ok(Record::Pending { hash, token }),
        (None, Some(answer)) => Ok(Record::Done {
            hash,
            answer: serde_json::from_value(answer)
                .map_err(|e| DbError::Invalid(format!("stored idempotent answer: {e}")))?,
        }),
        (None, None) => Err(DbError::Invalid("idempotency record without state".into())),
    }
}

/// The records, in PostgreSQL.
#[derive(Clone)]
pub struct Idempotency {
    db: Db,
}

impl Idempotency {
    pub fn new(db: Db) -> Self {
        Self { db }
    }

    /// Take `key` for a request hashing to `hash` (the marker lives `pending_secs`, so a
    /// replica that dies mid-request does not hold it for ever), or read what holds it. An
    /// expired record is taken over.
    pub async fn begin(
        &self,
        key: &RecordKey,
        hash: &str,
        pending_secs: u64,
    ) -> Result<Begin, DbError> {
        let token = uuid::Uuid::now_v7();
        let secs = pending_secs.max(1) as f64;
        let client = self.db.get().await?;
        // A record deleted between the two statements is taken on the next round.
        for _ in 0..3 {
            let taken = client
                .query_opt(
                    &crate::stmt(
                        &client,
                        "INSERT INTO idempotency_records
                             (scope, key_hash, request_hash, token, expires_at)
                         VALUES ($1, $2, $3, $4, now() + make_interval(secs => $5))
                         ON CONFLICT (scope, key_hash) DO UPDATE
                            SET request_hash = EXCLUDED.request_hash, token = EXCLUDED.token,
                                answer = NULL, created_at = now(),
                                expires_at = EXCLUDED.expires_at
                          WHERE idempotency_records.expires_at <= now()
                         RETURNING 1",
                    )
                    .await?,
                    &[&key.scope, &key.key_hash, &hash, &token, &secs],
                )
                .await?;
            if taken.is_some() {
                return Ok(Begin::Taken(Record::Pending {
                    hash: hash.to_string(),
                    token,
                }));
            }
            if let Some(found) = get_with(&client, key).await? {
                return Ok(Begin::Found(found));
            }
        }
        // Taken and gone again and again between the two statements: run without a
        // marker; finishing finds the marker not ours and stores nothing.
        Ok(Begin::Taken(Record::Pending {
            hash: hash.to_string(),
            token,
        }))
    }

    /// The live record of `key`, if any.
    pub async fn get(&self, key: &RecordKey) -> Result<Option<Record>, DbError> {
        let client = self.db.get().await?;
        get_with(&client, key).await
    }

    /// Replace this request's marker with its answer, kept [`WINDOW_SECS`]; or, without
    /// one, release the key so that a retry runs. False when the marker was no longer ours
    /// (it expired and another request took the key).
    pub async fn finish(
        &self,
        key: &RecordKey,
        marker: &Record,
        answer: Option<StoredAnswer>,
    ) -> Result<bool, DbError> {
        let Record::Pending { token, .. } = marker else {
            return Ok(false);
        };
        let client = self.db.get().await?;
        let n = match answer {
            Some(answer) => {
                let answer = serde_json::to_value(&answer)
                    .map_err(|e| DbError::Invalid(format!("idempotent answer: {e}")))?;
                client
                    .execute(
                        &crate::stmt(
                            &client,
                            "UPDATE idempotency_records
                                SET token = NULL, answer = $4,
                                    expires_at = now() + make_interval(secs => $5)
                              WHERE scope = $1 AND key_hash = $2 AND token = $3",
                        )
                        .await?,
                        &[
                            &key.scope,
                            &key.key_hash,
                            token,
                            &answer,
                            &(WINDOW_SECS as f64),
                        ],
                    )
                    .await?
            }
            None => {
                client
                    .execute(
                        &crate::stmt(
                            &client,
                            "DELETE FROM idempotency_records
                              WHERE scope = $1 AND key_hash = $2 AND token = $3",
                        )
                        .await?,
                        &[&key.scope, &key.key_hash, token],
                    )
                    .await?
            }
        };
        Ok(n == 1)
    }
}

async fn get_with(c: &impl GenericClient, key: &RecordKey) -> Result<Option<Record>, DbError> {
    let row = c
        .query_opt(
            &crate::stmt(
                c,
                "SELECT request_hash, token, answer FROM idempotency_records
                  WHERE scope = $1 AND key_hash = $2 AND expires_at > now()",
            )
            .await?,
            &[&key.scope, &key.key_hash],
        )
        .await?;
    row.as_ref().map(record).transpose()
}

/// Delete expired records, a batch at a time (the relays' periodic cleanup); the rows
/// removed.
pub async fn prune(c: &impl GenericClient) -> Result<u64, DbError> {
    let mut total = 0;
    loop {
        let n = c
            .execute(
                "DELETE FROM idempotency_records WHERE ctid IN
                   (SELECT ctid FROM idempotency_records WHERE expires_at <= now()
                    ORDER BY expires_at LIMIT $1 FOR UPDATE SKIP LOCKED)",
                &[&PRUNE_BATCH],
            )
            .await?;
        total += n;
        if (n as i64) < PRUNE_BATCH {
            return Ok(total);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scratch::ScratchDb;

    fn answer(body: &str) -> StoredAnswer {
        StoredAnswer {
            status: 200,
            content_type: Some("application/json".into()),
            run_id: Some("r".into()),
            body: Some(body.into()),
        }
    }

    #[tokio::test]
    async fn a_key_is_taken_once_answered_and_replayed_per_scope() {
        ScratchDb::with(|db| async move {
            let ids = Idempotency::new(db.clone());
            let key = RecordKey::new(Scope::Operator, "order-42");
            let Begin::Taken(marker) = ids.begin(&key, "h1", 60).await.unwrap() else {
                panic!("the first request takes the key");
            };
            // A second request finds the marker, and the marker is the first one's.
            assert_eq!(
                ids.begin(&key, "h1", 60).await.unwrap(),
                Begin::Found(marker.clone())
            );
            assert!(ids.finish(&key, &marker, Some(answer("{}"))).await.unwrap());
            assert_eq!(
                ids.get(&key).await.unwrap(),
                Some(Record::Done {
                    hash: "h1".into(),
                    answer: answer("{}")
                })
            );
            // Finishing twice does nothing: the marker is gone.
            assert!(!ids.finish(&key, &marker, None).await.unwrap());
            // Another calling key's record of the same text is its own.
            let other = RecordKey::new(Scope::Key(ApiKeyId::new()), "order-42");
            assert!(matches!(
                ids.begin(&other, "h2", 60).await.unwrap(),
                Begin::Taken(_)
            ));
        })
        .await;
    }

    #[tokio::test]
    async fn a_released_or_expired_key_is_taken_again_and_pruned() {
        ScratchDb::with(|db| async move {
            let ids = Idempotency::new(db.clone());
            let key = RecordKey::new(Scope::Operator, "k");
            let Begin::Taken(first) = ids.begin(&key, "h", 60).await.unwrap() else {
                panic!("taken");
            };
            assert!(ids.finish(&key, &first, None).await.unwrap(), "released");
            assert_eq!(ids.get(&key).await.unwrap(), None);
            let Begin::Taken(second) = ids.begin(&key, "h", 60).await.unwrap() else {
                panic!("taken again after the release");
            };
            // The marker expires (a replica died mid-request): the next request takes over,
            // and the dead request's answer is not stored over it.
            let c = db.get().await.unwrap();
            c.execute(
                "UPDATE idempotency_records SET expires_at = now() - interval '1 second'",
                &[],
            )
            .await
            .unwrap();
            assert_eq!(ids.get(&key).await.unwrap(), None, "expired reads as none");
            let Begin::Taken(third) = ids.begin(&key, "h3", 60).await.unwrap() else {
                panic!("an expired marker is taken over");
            };
            assert!(
                !ids.finish(&key, &second, Some(answer("late")))
                    .await
                    .unwrap()
            );
            assert!(ids.finish(&key, &third, Some(answer("ok"))).await.unwrap());
            assert_eq!(prune(&c).await.unwrap(), 0, "a live answer stays");
            c.execute(
                "UPDATE idempotency_records SET expires_at = now() - interval '1 second'",
                &[],
            )
            .await
            .unwrap();
            assert_eq!(prune(&c).await.unwrap(), 1);
        })
        .await;
    }
}
