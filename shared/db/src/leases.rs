//! Named leases (`leases`, docs/agents.md, "Presence towards the Forge"): one holder at a
//! time does a fleet-wide chore. A holder renews its lease before it expires; anyone takes
//! an expired one; the holder deletes its lease on a graceful stop, so the next replica
//! need not wait out the expiry.

use std::time::Duration;

use super::{DbError, GenericClient, stmt};

/// Take or renew the lease `name` for `holder` until `ttl` from now: whether `holder` holds
/// it now (false: another holder's lease has not expired).
pub async fn acquire(
    c: &impl GenericClient,
    name: &str,
    holder: &str,
    ttl: Duration,
) -> Result<bool, DbError> {
    let sql = "INSERT INTO leases AS l (name, holder, expires_at)
               VALUES ($1, $2, now() + make_interval(secs => $3))
               ON CONFLICT (name) DO UPDATE
                  SET holder = EXCLUDED.holder, expires_at = EXCLUDED.expires_at
                  WHERE l.holder = EXCLUDED.holder OR l.expires_at < now()
               RETURNING holder";
    let row = c
        .query_opt(&stmt(c, sql).await?, &[&name, &holder, &ttl.as_secs_f64()])
        .await?;
    Ok(row.is_some())
}

/// Give up the lease `name` if `holder` holds it: whether it did.
pub async fn release(c: &impl GenericClient, name: &str, holder: &str) -> Result<bool, DbError> {
    let sql = "DELETE FROM leases WHERE name = $1 AND holder = $2";
    Ok(c.execute(&stmt(c, sql).await?, &[&name, &holder]).await? > 0)
}

/// Who holds the lease `name`, expired or not, and how long it has left by PostgreSQL's
/// clock (zero once expired); `None`: nobody holds it, or it was released.
pub async fn holder(
    c: &impl GenericClient,
    name: &str,
) -> Result<Option<(String, Duration)>, DbError> {
    let sql = "SELECT holder, GREATEST(extract(epoch FROM expires_at - now()), 0)::float8
               FROM leases WHERE name = $1";
    let row = c.query_opt(&stmt(c, sql).await?, &[&name]).await?;
    Ok(row.map(|r| {
        let left: f64 = r.get(1);
        (r.get(0), Duration::from_secs_f64(left.max(0.0)))
    }))
}

/// How many of the leases `names` are held and not expired, by PostgreSQL's clock.
pub async fn live(c: &impl GenericClient, names: &[String]) -> Result<usize, DbError> {
    let sql = "SELECT count(*) FROM leases WHERE name = ANY($1) AND expires_at > now()";
    let n: i64 = c.query_one(&stmt(c, sql).await?, &[&names]).await?.get(0);
    Ok(usize::try_from(n).unwrap_or(0))
}
