//! `hermes users erase`: remove a person's data everywhere, for privacy requests
//! (`docs/security.md`, "Erasing a person"): every PostgreSQL row about the user and the
//! senders linked to them (`hermes_db::erase`), then every Redis key that names them (soul
//! cache, history cache, rate-limit buckets, budget counters) and the event streams of
//! their runs. Without `--yes` it only counts what would go.

use std::io::Write;

use anyhow::{Context, bail};
use hermes_cache::Cache;
use hermes_cache::run_events::RunEvents;
use hermes_config::Config;
use hermes_db::{Db, erase};
use hermes_telemetry::Metrics;
use hermes_types::ids::UserId;
use redis::AsyncCommands;

/// Keys deleted per `DEL`.
const DEL_CHUNK: usize = 100;

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

/// Every key matching any of `patterns`.
async fn keys(cache: &Cache, patterns: &[String]) -> anyhow::Result<Vec<String>> {
    let mut found = Vec::new();
    let mut conn = cache.conn();
    for pattern in patterns {
        let mut iter = conn
            .scan_match::<_, String>(pattern)
            .await
            .with_context(|| format!("cannot scan Redis for {pattern}"))?;
        while let Some(key) = futures_util::StreamExt::next(&mut iter).await {
            found.push(key?);
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
) -> anyhow::Result<usize> {
    let events = RunEvents::new(cache.clone(), config);
    let mut conn = cache.conn();
    let mut n = 0;
    for chunk in subject.runs.chunks(DEL_CHUNK / 2) {
        let keys: Vec<String> = chunk.iter().flat_map(|r| events.keys_of(*r)).collect();
        n += conn
            .exists::<_, usize>(keys)
            .await
            .context("cannot count the runs' event streams in Redis")?;
    }
    Ok(n)
}

/// Erase (or with `yes` false, count) user `id`, writing progress to `out`.
pub async fn run(
    config: &Config,
    id: UserId,
    yes: bool,
    out: &mut impl Write,
) -> anyhow::Result<()> {
    let db = Db::new(&config.database_url, 2)?;
    let cache = Cache::new(&config.redis_url, config.namespace.clone(), Metrics::new())?;
    let client = db.get().await.context("cannot reach PostgreSQL")?;
    let Some(subject) = erase::subject(&client, id).await? else {
        bail!("no user {id} (already erased?)");
    };
    let patterns = patterns(&cache, &subject);
    if !yes {
        writeln!(out, "user {id} would be erased:")?;
        for (table, n) in erase::count(&client, id).await? {
            writeln!(out, "  postgres {table}: {n} rows")?;
        }
        let found = keys(&cache, &patterns).await?;
        let streams = run_keys(&cache, config, &subject).await?;
        writeln!(out, "  redis: {} keys", found.len() + streams)?;
        writeln!(out, "nothing was removed: run again with --yes to erase")?;
        return Ok(());
    }
    writeln!(out, "erasing user {id}")?;
    // The runs' event streams first: they are found by the run ids, which go with the rows.
    let events = RunEvents::new(cache.clone(), config);
    let mut removed = events
        .remove(&subject.runs)
        .await
        .context("cannot delete the runs' event streams (run the command again)")?;
    // Then PostgreSQL, before the other keys: once the user is gone there, no cache can be
    // rebuilt from it.
    erase::erase(&client, id, |table, n| {
        let _ = writeln!(out, "  postgres {table}: {n} rows removed");
    })
    .await?;
    // A run that was still open may have written to its stream meanwhile.
    removed += events
        .remove(&subject.runs)
        .await
        .context("cannot delete the runs' event streams (run the command again)")?;
    let found = keys(&cache, &patterns).await?;
    let mut conn = cache.conn();
    for chunk in found.chunks(DEL_CHUNK) {
        let n: usize = conn
            .del(chunk)
            .await
            .context("cannot delete Redis keys (run the command again)")?;
        removed += n;
    }
    writeln!(out, "  redis: {removed} keys removed")?;
    writeln!(out, "user {id} erased")?;
    Ok(())
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
