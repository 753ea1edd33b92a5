//! Credits: the balance on `users.credits` and every movement as a `credit_ledger` row, in
//! the same transaction. Concurrent messages of one user serialize on the user row
//! (`SELECT … FOR UPDATE`), so the balance never goes below zero and never double-spends;
//! a run is charged once and refunded once (unique index `credit_ledger_once`).

use hermes_types::ids::{RunId, UserId};

use super::{DbError, Transaction};

/// Why a balance moved.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reason {
    Grant,
    Charge,
    Refund,
    Adjust,
    /// Stands for older rows the retention sweeper folded into it (`docs/security.md`).
    Summary,
}

impl Reason {
    pub fn as_str(self) -> &'static str {
        match self {
            Reason::Grant => "grant",
            Reason::Charge => "charge",
            Reason::Refund => "refund",
            Reason::Adjust => "adjust",
            Reason::Summary => "summary",
        }
    }
}

/// The result of charging for a run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Charge {
    /// Deducted; the balance left.
    Charged { balance: i64 },
    /// Not enough credit; nothing changed.
    Insufficient { balance: i64 },
    /// This run was charged before (a redelivered message): nothing changed.
    AlreadyCharged,
}

async fn lock_balance(tx: &Transaction<'_>, user_id: UserId) -> Result<i64, DbError> {
    tx.query_opt(
        &crate::stmt(tx, "SELECT credits FROM users WHERE id = $1 FOR UPDATE").await?,
        &[&user_id],
    )
    .await?
    .map(|r| r.get(0))
    .ok_or_else(|| DbError::NotFound(format!("no user {user_id}")))
}

async fn record(
    tx: &Transaction<'_>,
    user_id: UserId,
    run_id: Option<RunId>,
    reason: Reason,
    delta: i64,
    note: Option<&str>,
) -> Result<i64, DbError> {
    let balance: i64 = tx
        .query_one(
            &crate::stmt(
                tx,
                "UPDATE users SET credits = credits + $2, updated_at = now() WHERE id = $1
             RETURNING credits",
            )
            .await?,
            &[&user_id, &delta],
        )
        .await?
        .get(0);
    tx.execute(
        &crate::stmt(
            tx,
            "INSERT INTO credit_ledger (user_id, run_id, reason, delta, balance_after, note)
         VALUES ($1, $2, $3, $4, $5, $6)",
        )
        .await?,
        &[&user_id, &run_id, &reason.as_str(), &delta, &balance, &note],
    )
    .await?;
    Ok(balance)
}

/// Charge `amount` for `run_id` if the balance allows it: the lock, the check, the
/// deduction and its ledger row in one statement (one round trip on the hot path).
pub async fn charge(
    tx: &Transaction<'_>,
    user_id: UserId,
    run_id: RunId,
    amount: i64,
) -> Result<Charge, DbError> {
    let row = tx
        .query_opt(
            &crate::stmt(
                tx,
                "WITH u AS (SELECT id, credits FROM users WHERE id = $1 FOR UPDATE),
                      done AS (SELECT 1 FROM credit_ledger WHERE run_id = $2 AND reason = 'charge'),
                      upd AS (UPDATE users SET credits = users.credits - $3, updated_at = now()
                              FROM u WHERE users.id = u.id AND u.credits >= $3
                                AND NOT EXISTS (SELECT 1 FROM done)
                              RETURNING users.credits),
                      led AS (INSERT INTO credit_ledger (user_id, run_id, reason, delta, balance_after)
                              SELECT $1, $2, 'charge', -$3, credits FROM upd
                              RETURNING balance_after)
                 SELECT u.credits, (SELECT balance_after FROM led), EXISTS (SELECT 1 FROM done)
                 FROM u",
            )
            .await?,
            &[&user_id, &run_id, &amount],
        )
        .await?
        .ok_or_else(|| DbError::NotFound(format!("no user {user_id}")))?;
    let (before, after, already): (i64, Option<i64>, bool) = (row.get(0), row.get(1), row.get(2));
    Ok(match after {
        Some(balance) => Charge::Charged { balance },
        None if already => Charge::AlreadyCharged,
        None => Charge::Insufficient { balance: before },
    })
}

/// Give back what `run_id` was charged. True when this call refunded; false when the run was
/// never charged or was refunded already — so any number of retries refunds once.
pub async fn refund(tx: &Transaction<'_>, run_id: RunId) -> Result<bool, DbError> {
    let Some(row) = tx
        .query_opt(
            &crate::stmt(
                tx,
                "SELECT user_id, -delta FROM credit_ledger WHERE run_id = $1 AND reason = 'charge'",
            )
            .await?,
            &[&run_id],
        )
        .await?
    else {
        return Ok(false);
    };
    let (user_id, amount): (UserId, i64) = (row.get(0), row.get(1));
    // The user lock serializes concurrent refunds of one run; the check after it sees the
    // other's committed row, and the unique index backs it up.
    lock_balance(tx, user_id).await?;
    let refunded = tx
        .query_opt(
            &crate::stmt(
                tx,
                "SELECT 1 FROM credit_ledger WHERE run_id = $1 AND reason = 'refund'",
            )
            .await?,
            &[&run_id],
        )
        .await?;
    if refunded.is_some() {
        return Ok(false);
    }
    record(tx, user_id, Some(run_id), Reason::Refund, amount, None).await?;
    Ok(true)
}

/// An operator's grant or correction (`hermes users credit`). A negative delta that would
/// take the balance below zero is refused.
pub async fn adjust(
    tx: &Transaction<'_>,
    user_id: UserId,
    delta: i64,
    reason: Reason,
    note: Option<&str>,
) -> Result<i64, DbError> {
    let balance = lock_balance(tx, user_id).await?;
    if balance + delta < 0 {
        return Err(DbError::Refused(format!(
            "the balance is {balance}; taking {} would make it negative",
            -delta
        )));
    }
    record(tx, user_id, None, reason, delta, note).await
}

/// The balance and the sum of the user's ledger: equal unless something bypassed the ledger.
pub async fn audit(
    client: &impl super::GenericClient,
    user_id: UserId,
) -> Result<(i64, i64), DbError> {
    let row = client
        .query_one(
            &crate::stmt(
                client,
                "SELECT u.credits, COALESCE((SELECT sum(delta) FROM credit_ledger l
                                         WHERE l.user_id = u.id), 0)::bigint
             FROM users u WHERE u.id = $1",
            )
            .await?,
            &[&user_id],
        )
        .await?;
    Ok((row.get(0), row.get(1)))
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use hermes_types::model::Tier;

    use super::*;
    use crate::Db;
    use crate::scratch::{ScratchDb, server_from_env};
    use crate::users::{self, NewUser};

    /// Two copies of one message charge its run at once: the second waits for the first's
    /// user lock, then meets its committed charge in the unique index. That error says "a
    /// concurrent copy committed first", which the stages treat as a duplicate (acked)
    /// rather than a failure (requeued, spending a delivery).
    #[tokio::test]
    async fn a_second_copy_charging_at_once_is_told_apart_as_a_concurrent_copy() {
        let scratch = ScratchDb::claim(&server_from_env(), "hermes_scratch")
            .await
            .unwrap();
        let db = Db::new(&scratch.url, 3).unwrap();
        let user = {
            let mut c = db.get().await.unwrap();
            let tx = c.transaction().await.unwrap();
            let u = users::create(
                &tx,
                &NewUser {
                    workspace: "default",
                    display_name: None,
                    tier: Tier::Free,
                    credits: 100,
                },
            )
            .await
            .unwrap();
            tx.commit().await.unwrap();
            u.id
        };
        let run = RunId::new();
        let mut first = db.get().await.unwrap();
        let first = first.transaction().await.unwrap();
        assert_eq!(
            charge(&first, user, run, 10).await.unwrap(),
            Charge::Charged { balance: 90 }
        );
        let second = tokio::spawn({
            let db = db.clone();
            async move {
                let mut c = db.get().await.unwrap();
                let tx = c.transaction().await.unwrap();
                charge(&tx, user, run, 10).await
            }
        });
        // The second copy's statement has begun and waits for the first's user lock.
        let watch = db.get().await.unwrap();
        let waits = async {
            let mut tick = tokio::time::interval(Duration::from_millis(20));
            loop {
                tick.tick().await;
                let waiting: i64 = watch
                    .query_one(
                        "SELECT count(*) FROM pg_stat_activity \
                         WHERE datname = current_database() AND wait_event_type = 'Lock'",
                        &[],
                    )
                    .await
                    .unwrap()
                    .get(0);
                if waiting > 0 {
                    break;
                }
            }
        };
        tokio::time::timeout(Duration::from_secs(60), waits)
            .await
            .expect("the second copy waits for the first's lock");
        first.commit().await.unwrap();
        let err = second.await.unwrap().expect_err("the run is charged once");
        assert!(err.is_concurrent_copy(), "{err:?}");
        let balance: i64 = watch
            .query_one("SELECT credits FROM users WHERE id = $1", &[&user])
            .await
            .unwrap()
            .get(0);
        assert_eq!(balance, 90);
        drop((watch, db));
        scratch.drop_now().await.unwrap();
    }
}
