//! Erasing a person (docs/security.md, "Erasing a person"), shared by `hermes users erase`
//! and the console's users page: every PostgreSQL row about the user and the senders linked
//! to them (`hermes_db::erase`), then every Redis key that names them (soul cache, history
//! cache, rate-limit buckets, budget counters) and the event streams of their runs.

use hermes_cache::Cache;
use hermes_cache::run_events::RunEvents;
use hermes_config::Config;
use hermes_db::{Client, erase};
use hermes_types::ids::UserId;
use redis::AsyncCommands;

/// Keys deleted per `DEL`.
const DEL_CHUNK: usize = 100;

/// What an erase found or removed.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Tally {
    /// Rows per PostgreSQL table.
    pub tables: Vec<(&'static str, u64)>,
    /// Redis keys.
    pub redis_keys: usize,
}

/// Why an erase did not happen, or stopped part-way (running it again finishes it).
#[derive(Debug, thiserror::Error)]
pub enum EraseError {
    #[error("no user {0} (already erased?)")]
    NoSuchUser(UserId),
    #[error(transparent)]
    Db(#[from] hermes_db::DbError),
    #[error("Redis: {0} (run the erase again)")]
    Redis(String),
}

/// `s` with Redis glob characters escaped.
fn glob_escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        if matches!(c, '*' | '?' | '[' | ']' | '\\') {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

/// The Redis key patterns that name `subject`: its user id anywhere (soul, budgets, any
/// per-user key), and each sender or chat id as a whole segment after its platform
/// (history, rate-limit buckets).
fn patterns(cache: &Cache, subject: &erase::Subject) -> Vec<String> {
    let mut patterns = vec![cache.key(format_args!("*{}*", subject.user))];
    let mut ids: Vec<&(String, String)> = subject
        .channels
        .iter()
        .chain(subject.scopes.iter())
        .collect();
    ids.sort();
    ids.dedup();
    for (platform, id) in ids {
        let (p, id) = (glob_escape(platform), glob_escape(id));
        for shape in [
            format!("*:{p}:{id}"),
            format!("*:{p}:{id}:*"),
            format!("*:{p}:*:{id}"),
            format!("*:{p}:*:{id}:*"),
        ] {
            patterns.push(cache.key(shape));
        }
    }
    patterns
}

fn redis<E: std::fmt::Display>(what: &str) -> impl Fn(E) -> EraseError + '_ {
    move |e| EraseError::Redis(format!("{what}: {e}"))
}

/// Every key matching any of `patterns`.
async fn keys(cache: &Cache, patterns: &[String]) -> Result<Vec<String>, EraseError> {
    let mut found = Vec::new();
    let mut conn = cache.conn();
    for pattern in patterns {
        let mut iter = conn
            .scan_match::<_, String>(pattern)
            .await
            .map_err(redis("cannot scan for the user's keys"))?;
        while let Some(key) = futures_util::StreamExt::next(&mut iter).await {
            found.push(key.map_err(redis("cannot scan for the user's keys"))?);
        }
    }
    found.sort();
    found.dedup();
    Ok(found)
}

/// How many event streams (and follower markers) of the subject's runs Redis holds.
async fn run_keys(
    cache: &Cache,
    config: &Config,
    subject: &erase::Subject,
) -> Result<usize, EraseError> {
    let events = RunEvents::new(cache.clone(), config);
    let mut conn = cache.conn();
    let mut n = 0;
    for chunk in subject.runs.chunks(DEL_CHUNK / 2) {
        let keys: Vec<String> = chunk.iter().flat_map(|r| events.keys_of(*r)).collect();
        n += conn
            .exists::<_, usize>(keys)
            .await
            .map_err(redis("cannot count the runs' event streams"))?;
    }
    Ok(n)
}

/// What erasing user `id` would remove, removing nothing.
pub async fn count(
    config: &Config,
    client: &Client,
    cache: &Cache,
    id: UserId,
) -> Result<Tally, EraseError> {
    let subject = erase::subject(client, id)
        .await?
        .ok_or(EraseError::NoSuchUser(id))?;
    let tables = erase::count(client, id).await?;
    let found = keys(cache, &patterns(cache, &subject)).await?;
    let streams = run_keys(cache, config, &subject).await?;
    Ok(Tally {
        tables,
        redis_keys: found.len() + streams,
    })
}

/// Erase user `id`, telling `progress` each table's count as it is done.
pub async fn erase(
    config: &Config,
    client: &Client,
    cache: &Cache,
    id: UserId,
    progress: impl FnMut(&'static str, u64),
) -> Result<Tally, EraseError> {
    let subject = erase::subject(client, id)
        .await?
        .ok_or(EraseError::NoSuchUser(id))?;
    let patterns = patterns(cache, &subject);
    // The runs' event streams first: they are found by the run ids, which go with the rows.
    let events = RunEvents::new(cache.clone(), config);
    let streams = redis("cannot delete the runs' event streams");
    let mut removed = events.remove(&subject.runs).await.map_err(&streams)?;
    // Then PostgreSQL, before the other keys: once the user is gone there, no cache can be
    // rebuilt from it.
    let tables = erase::erase(client, id, progress).await?;
    // A run that was still open may have written to its stream meanwhile.
    removed += events.remove(&subject.runs).await.map_err(&streams)?;
    let found = keys(cache, &patterns).await?;
    let mut conn = cache.conn();
    for chunk in found.chunks(DEL_CHUNK) {
        let n: usize = conn
            .del(chunk)
            .await
            .map_err(redis("cannot delete the user's keys"))?;
        removed += n;
    }
    Ok(Tally {
        tables,
        redis_keys: removed,
    })
}

#[cfg(test)]
mod tests {
    use super::glob_escape;

    #[test]
    fn glob_characters_in_ids_are_escaped() {
        assert_eq!(glob_escape("a*b?[c]\\"), "a\\*b\\?\\[c\\]\\\\");
        assert_eq!(glob_escape("+15550001"), "+15550001");
    }
}
