//! The user's memory (`user_memory`): structural keys, one value each, that the soul shows
//! in full, and free facts, several per key, with embeddings as `real[]` that semantic
//! recall ranks in the router (stock PostgreSQL has no pgvector, docs/architecture.md#9-postgresql).
//!
//! Whether a key is structural is decided here, from [`STRUCTURAL_KEYS`] and
//! [`FITNESS_KEYS`], never by the caller, so a key cannot be both a structural value and
//! a fact (the soul would show it twice).

use deadpool_postgres::GenericClient;
use hermes_types::ids::UserId;

use super::DbError;

/// The user id type of this module, re-exported so callers need no `uuid` dependency.
pub use uuid::Uuid;

/// The structural keys of the soul's user-facts layer (docs/models-and-budgets.md): one value per user each,
/// replaced rather than accumulated.
pub const STRUCTURAL_KEYS: [&str; 16] = [
    "name",
    "home_city",
    "language",
    "timezone",
    "occupation",
    "birthday",
    "budget_range",
    "diet",
    "interests",
    "favorite_areas",
    "favorite_venue",
    "favorite_category",
    "typical_party_size",
    "preferred_booking_day",
    "preferred_booking_hour",
    "last_booking",
];

/// Structural keys of the soul's fitness block, kept apart because the soul renders them
/// in their own section.
pub const FITNESS_KEYS: [&str; 3] = ["calorie_target", "dietary_restrictions", "fitness_goal"];

/// Most facts [`facts_with_embeddings`] loads (the newest): a user's memory is small, and
/// this bound keeps one runaway extractor from making every message of that user slow.
pub const MAX_RECALL_FACTS: i64 = 1000;

/// Is `key` structural (one value, shown in the soul) rather than a free fact?
pub fn is_structural(key: &str) -> bool {
    STRUCTURAL_KEYS.contains(&key) || FITNESS_KEYS.contains(&key)
}

/// Who wrote a memory row.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Source {
    /// An operator, through the CLI or the admin API.
    Operator,
    /// Extracted from the user's own messages.
    Extracted,
    /// Remembered by an external agent (`memory.remember`, docs/agents.md): capped per user
    /// ([`remember_as_agent`]), and its facts expire under retention like extracted ones.
    Agent,
}

impl Source {
    /// The value stored in `user_memory.source`.
    pub fn as_str(self) -> &'static str {
        match self {
            Source::Operator => "operator",
            Source::Extracted => "extracted",
            Source::Agent => "agent",
        }
    }
}

/// A structural key and its value.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MemoryEntry {
    /// One of [`STRUCTURAL_KEYS`] or [`FITNESS_KEYS`].
    pub key: String,
    /// As stored: sanitize before putting it in a prompt.
    pub value: String,
}

/// A free fact with its embedding, as recall ranks it.
#[derive(Clone, Debug, PartialEq)]
pub struct Fact {
    /// Row id; higher is newer.
    pub id: i64,
    /// As stored: sanitize before putting it in a prompt.
    pub key: String,
    /// As stored: sanitize before putting it in a prompt.
    pub value: String,
    /// Never empty; its length is the dimension of the model that embedded it.
    pub embedding: Vec<f32>,
}

/// The user's structural values, ordered by key.
pub async fn structural(
    client: &impl GenericClient,
    user_id: UserId,
) -> Result<Vec<MemoryEntry>, DbError> {
    let rows = client
        .query(
            &crate::stmt(
                client,
                "SELECT key, value FROM user_memory WHERE user_id = $1 AND structural ORDER BY key",
            )
            .await?,
            &[&user_id],
        )
        .await?;
    Ok(rows
        .iter()
        .map(|r| MemoryEntry {
            key: r.get(0),
            value: r.get(1),
        })
        .collect())
}

/// Remember `key = value`: a structural key replaces its previous value (last write wins,
/// whoever wrote it: the user's latest word is the truth), any other key adds a fact
/// without an embedding (recall cannot see it; use [`add_fact`] to make it recallable).
pub async fn set(
    client: &impl GenericClient,
    user_id: UserId,
    key: &str,
    value: &str,
    source: Source,
) -> Result<(), DbError> {
    if is_structural(key) {
        upsert_structural(client, user_id, key, value, source).await?;
    } else {
        insert_fact(client, user_id, key, value, None, source).await?;
    }
    Ok(())
}

/// Add a fact and return its id. A structural key is stored as the structural value
/// instead (the embedding is dropped: the soul shows structural values in full, so recall
/// never needs them). An empty embedding is stored as none.
pub async fn add_fact(
    client: &impl GenericClient,
    user_id: UserId,
    key: &str,
    value: &str,
    embedding: Option<&[f32]>,
    source: Source,
) -> Result<i64, DbError> {
    if is_structural(key) {
        upsert_structural(client, user_id, key, value, source).await
    } else {
        insert_fact(client, user_id, key, value, embedding, source).await
    }
}

async fn upsert_structural(
    client: &impl GenericClient,
    user_id: UserId,
    key: &str,
    value: &str,
    source: Source,
) -> Result<i64, DbError> {
    let row = client
        .query_one(
            &crate::stmt(
                client,
                "INSERT INTO user_memory (user_id, key, value, structural, source)
             VALUES ($1, $2, $3, true, $4)
             ON CONFLICT (user_id, key) WHERE structural DO UPDATE
                SET value = EXCLUDED.value, source = EXCLUDED.source, updated_at = now()
             RETURNING id",
            )
            .await?,
            &[&user_id, &key, &value, &source.as_str()],
        )
        .await?;
    Ok(row.get(0))
}

async fn insert_fact(
    client: &impl GenericClient,
    user_id: UserId,
    key: &str,
    value: &str,
    embedding: Option<&[f32]>,
    source: Source,
) -> Result<i64, DbError> {
    let embedding = embedding.filter(|e| !e.is_empty());
    let row = client
        .query_one(
            &crate::stmt(
                client,
                "INSERT INTO user_memory (user_id, key, value, structural, embedding, source)
             VALUES ($1, $2, $3, false, $4, $5)
             RETURNING id",
            )
            .await?,
            &[&user_id, &key, &value, &embedding, &source.as_str()],
        )
        .await?;
    Ok(row.get(0))
}

/// What [`remember_as_agent`] did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Remembered {
    /// A structural value set, or a new fact added.
    Stored,
    /// The user had that fact already (same key and value): it was refreshed, not repeated.
    Refreshed,
    /// The user holds `held` facts agents remembered, the cap: nothing was written.
    Full { held: i64 },
}

/// Remember `key = value` for `user_id` as an external agent ([`Source::Agent`]): a
/// structural key replaces its value; a fact the user already has is refreshed (its
/// retention counts from now); a new fact is added only while the user holds fewer than
/// `max_facts` facts remembered by agents. Calls for one user are serialized (a
/// transaction-level advisory lock), so concurrent calls cannot pass the cap together; use
/// it inside a transaction.
pub async fn remember_as_agent(
    tx: &crate::Transaction<'_>,
    user_id: UserId,
    key: &str,
    value: &str,
    max_facts: u32,
) -> Result<Remembered, DbError> {
    if is_structural(key) {
        upsert_structural(tx, user_id, key, value, Source::Agent).await?;
        return Ok(Remembered::Stored);
    }
    tx.execute(
        "SELECT pg_advisory_xact_lock(hashtextextended('user_memory:' || $1::uuid::text, 0))",
        &[&user_id],
    )
    .await?;
    let refreshed = tx
        .execute(
            "UPDATE user_memory SET updated_at = now()
             WHERE user_id = $1 AND NOT structural AND key = $2 AND value = $3",
            &[&user_id, &key, &value],
        )
        .await?;
    if refreshed > 0 {
        return Ok(Remembered::Refreshed);
    }
    let held: i64 = tx
        .query_one(
            "SELECT count(*) FROM user_memory
             WHERE user_id = $1 AND NOT structural AND source = 'agent'",
            &[&user_id],
        )
        .await?
        .get(0);
    if held >= i64::from(max_facts) {
        return Ok(Remembered::Full { held });
    }
    insert_fact(tx, user_id, key, value, None, Source::Agent).await?;
    Ok(Remembered::Stored)
}

/// The user's facts that have an embedding, newest first, at most [`MAX_RECALL_FACTS`].
pub async fn facts_with_embeddings(
    client: &impl GenericClient,
    user_id: UserId,
) -> Result<Vec<Fact>, DbError> {
    // Rows written by hand could hold NULL elements or a 2-D array, which do not decode
    // as Vec<f32>; they are skipped here so one bad row cannot switch recall off.
    let rows = client
        .query(
            &crate::stmt(
                client,
                "SELECT id, key, value, embedding FROM user_memory
             WHERE user_id = $1 AND NOT structural AND embedding IS NOT NULL
               AND array_ndims(embedding) = 1 AND array_position(embedding, NULL) IS NULL
             ORDER BY id DESC
             LIMIT $2",
            )
            .await?,
            &[&user_id, &MAX_RECALL_FACTS],
        )
        .await?;
    Ok(rows
        .iter()
        .map(|r| Fact {
            id: r.get(0),
            key: r.get(1),
            value: r.get(2),
            embedding: r.get(3),
        })
        .collect())
}

/// Forget every row of `key` (the structural value or all facts of that key); returns how
/// many rows went.
pub async fn delete(
    client: &impl GenericClient,
    user_id: UserId,
    key: &str,
) -> Result<u64, DbError> {
    Ok(client
        .execute(
            &crate::stmt(
                client,
                "DELETE FROM user_memory WHERE user_id = $1 AND key = $2",
            )
            .await?,
            &[&user_id, &key],
        )
        .await?)
}

#[cfg(test)]
mod tests {
    use super::super::Client;
    use super::super::scratch::{ScratchDb, insert_user};
    use super::*;

    /// Run `body` against a fresh migrated database holding one user; the database is
    /// dropped afterwards, also when `body` panics.
    async fn with_user<F, Fut>(body: F)
    where
        F: FnOnce(Client, UserId) -> Fut,
        Fut: Future<Output = ()>,
    {
        ScratchDb::with(|db| async move {
            let user = insert_user(&db).await.unwrap();
            body(db.get().await.unwrap(), user).await;
        })
        .await
    }

    #[test]
    fn structural_keys_cover_the_seed_and_do_not_repeat() {
        for key in [
            "diet",
            "favorite_areas",
            "interests",
            "last_booking",
            "typical_party_size",
            "preferred_booking_hour",
            "preferred_booking_day",
            "favorite_venue",
            "favorite_category",
        ] {
            assert!(STRUCTURAL_KEYS.contains(&key), "{key}");
        }
        let mut all: Vec<&str> = STRUCTURAL_KEYS
            .iter()
            .chain(&FITNESS_KEYS)
            .copied()
            .collect();
        all.sort_unstable();
        all.dedup();
        assert_eq!(all.len(), 19);
        assert!(all.iter().all(|k| is_structural(k)));
        assert!(!is_structural("allergic_to_cats"));
    }

    #[tokio::test]
    async fn structural_keys_are_upserted() {
        with_user(|mut c, user| async move {
            set(&c, user, "diet", "vegetarian", Source::Operator)
                .await
                .unwrap();
            set(&c, user, "home_city", "Lisbon", Source::Operator)
                .await
                .unwrap();
            set(&c, user, "diet", "vegan", Source::Extracted)
                .await
                .unwrap();
            // set works inside the caller's transaction too.
            let tx = c.transaction().await.unwrap();
            set(&tx, user, "fitness_goal", "run 10k", Source::Operator)
                .await
                .unwrap();
            tx.commit().await.unwrap();

            assert_eq!(
                structural(&c, user).await.unwrap(),
                vec![
                    MemoryEntry {
                        key: "diet".into(),
                        value: "vegan".into()
                    },
                    MemoryEntry {
                        key: "fitness_goal".into(),
                        value: "run 10k".into()
                    },
                    MemoryEntry {
                        key: "home_city".into(),
                        value: "Lisbon".into()
                    },
                ]
            );
            let row = c
                .query_one(
                    "SELECT count(*), max(source) FROM user_memory WHERE user_id = $1 AND key = 'diet'",
                    &[&user],
                )
                .await
                .unwrap();
            assert_eq!(row.get::<_, i64>(0), 1);
            assert_eq!(row.get::<_, String>(1), "extracted");

            // A structural key through add_fact is still the one structural value.
            add_fact(&c, user, "diet", "pescatarian", Some(&[1.0, 0.0]), Source::Extracted)
                .await
                .unwrap();
            assert_eq!(structural(&c, user).await.unwrap()[0].value, "pescatarian");
            assert!(facts_with_embeddings(&c, user).await.unwrap().is_empty());
        })
        .await;
    }

    #[tokio::test]
    async fn facts_with_and_without_embeddings() {
        with_user(|c, user| async move {
            let a = add_fact(
                &c,
                user,
                "pet",
                "a cat named Miso",
                Some(&[0.1, 0.2, 0.3]),
                Source::Extracted,
            )
            .await
            .unwrap();
            let b = add_fact(
                &c,
                user,
                "pet",
                "a dog named Rex",
                Some(&[0.3, 0.2, 0.1]),
                Source::Operator,
            )
            .await
            .unwrap();
            add_fact(&c, user, "allergy", "peanuts", None, Source::Extracted)
                .await
                .unwrap();
            add_fact(&c, user, "empty", "no vector", Some(&[]), Source::Extracted)
                .await
                .unwrap();
            set(&c, user, "sibling", "has a sister", Source::Operator)
                .await
                .unwrap();
            set(&c, user, "diet", "vegan", Source::Operator)
                .await
                .unwrap();
            assert!(b > a);

            let facts = facts_with_embeddings(&c, user).await.unwrap();
            assert_eq!(
                facts,
                vec![
                    Fact {
                        id: b,
                        key: "pet".into(),
                        value: "a dog named Rex".into(),
                        embedding: vec![0.3, 0.2, 0.1]
                    },
                    Fact {
                        id: a,
                        key: "pet".into(),
                        value: "a cat named Miso".into(),
                        embedding: vec![0.1, 0.2, 0.3]
                    },
                ]
            );
            let stored: i64 = c
                .query_one(
                    "SELECT count(*) FROM user_memory WHERE user_id = $1 AND NOT structural",
                    &[&user],
                )
                .await
                .unwrap()
                .get(0);
            assert_eq!(stored, 5);

            // A hand-written row with a NULL element is skipped, not an error.
            c.execute(
                "INSERT INTO user_memory (user_id, key, value, structural, embedding)
                 VALUES ($1, 'broken', 'x', false, ARRAY[1.0, NULL]::real[])",
                &[&user],
            )
            .await
            .unwrap();
            assert_eq!(facts_with_embeddings(&c, user).await.unwrap().len(), 2);
        })
        .await;
    }

    #[tokio::test]
    async fn agents_facts_are_capped_per_user_even_when_remembered_at_once() {
        ScratchDb::with(|db| async move {
            let user = insert_user(&db).await.unwrap();
            // Ten agents' calls at once, three facts allowed: three are stored.
            let calls = (0..10).map(|i| {
                let db = db.clone();
                tokio::spawn(async move {
                    let mut c = db.get().await.unwrap();
                    let tx = c.transaction().await.unwrap();
                    let got = remember_as_agent(&tx, user, "fact", &format!("v{i}"), 3)
                        .await
                        .unwrap();
                    tx.commit().await.unwrap();
                    got
                })
            });
            let mut stored = 0;
            for call in calls {
                match call.await.unwrap() {
                    Remembered::Stored => stored += 1,
                    Remembered::Full { held } => assert_eq!(held, 3),
                    Remembered::Refreshed => panic!("every value differs"),
                }
            }
            assert_eq!(stored, 3);
            let c = db.get().await.unwrap();
            let remember = |k: String, v: String| {
                let db = db.clone();
                async move {
                    let mut c = db.get().await.unwrap();
                    let tx = c.transaction().await.unwrap();
                    let got = remember_as_agent(&tx, user, &k, &v, 3).await.unwrap();
                    tx.commit().await.unwrap();
                    got
                }
            };
            // Past the cap, a fact the user has is refreshed and a structural value replaced;
            // a new fact is not stored.
            let kept: String = c
                .query_one(
                    "SELECT value FROM user_memory WHERE user_id = $1 AND NOT structural LIMIT 1",
                    &[&user],
                )
                .await
                .unwrap()
                .get(0);
            assert_eq!(
                remember("fact".into(), kept).await,
                Remembered::Refreshed
            );
            assert_eq!(
                remember("fact".into(), "new".into()).await,
                Remembered::Full { held: 3 }
            );
            assert_eq!(
                remember("diet".into(), "vegan".into()).await,
                Remembered::Stored
            );
            let row = c
                .query_one(
                    "SELECT count(*) FILTER (WHERE NOT structural), count(*) FILTER (WHERE structural),
                            bool_and(source = 'agent')
                     FROM user_memory WHERE user_id = $1",
                    &[&user],
                )
                .await
                .unwrap();
            assert_eq!(
                (row.get::<_, i64>(0), row.get::<_, i64>(1), row.get::<_, bool>(2)),
                (3, 1, true)
            );
        })
        .await;
    }

    #[tokio::test]
    async fn delete_removes_every_row_of_the_key() {
        with_user(|c, user| async move {
            add_fact(&c, user, "pet", "a cat", Some(&[1.0]), Source::Extracted)
                .await
                .unwrap();
            add_fact(&c, user, "pet", "a dog", None, Source::Extracted)
                .await
                .unwrap();
            set(&c, user, "diet", "vegan", Source::Operator)
                .await
                .unwrap();

            assert_eq!(delete(&c, user, "pet").await.unwrap(), 2);
            assert_eq!(delete(&c, user, "pet").await.unwrap(), 0);
            assert!(facts_with_embeddings(&c, user).await.unwrap().is_empty());
            assert_eq!(delete(&c, user, "diet").await.unwrap(), 1);
            assert!(structural(&c, user).await.unwrap().is_empty());
        })
        .await;
    }
}
