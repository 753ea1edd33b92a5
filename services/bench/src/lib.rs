//! The benchmarks of the Hermes fleet, which print figures (no test asserts a timing:
//! docs/development.md#benchmarks). They live in this crate, with a binary of their own
//! (`hermes-bench`, which `hermes bench` execs), so that none of them is linked into the
//! production `hermes` binary. Benches that run the fleet in this process call the `hermes`
//! library (`hermes::run`); those that run it as separate processes start the `hermes` binary
//! (`fleet_process::hermes_binary`).
//!
//! What several benches share sits at this level rather than inside one of them: `stats`
//! (medians, frontiers, ratios), `procstat` (CPU and memory from `/proc`), `fleet_process`
//! (the fleet as child processes) and `interrupted`.

pub mod abuse;
pub mod console;
pub mod events;
pub mod faults;
pub mod fleet;
mod fleet_process;
pub mod floor;
mod in_process;
pub mod ingest;
pub mod jobs;
pub mod llm;
mod platforms;
mod procstat;
pub mod reaper;
pub mod router;
mod seed;
mod stats;

/// The first of SIGINT and SIGTERM, by name. A bench races its run against it, so a run
/// stopped by hand still drops its scratch database and deletes its queues.
pub(crate) async fn interrupted() -> &'static str {
    use tokio::signal::unix::{SignalKind, signal};
    let (Ok(mut int), Ok(mut term)) = (
        signal(SignalKind::interrupt()),
        signal(SignalKind::terminate()),
    ) else {
        return std::future::pending().await;
    };
    tokio::select! {
        _ = int.recv() => "SIGINT",
        _ = term.recv() => "SIGTERM",
    }
}

/// Wait until an in-process fleet answers `ready` (its `/readyz`), at most 30 s; a fleet that
/// stops while starting is awaited for its error.
pub(crate) async fn wait_ready(
    client: &reqwest::Client,
    ready: &str,
    fleet: &mut tokio::task::JoinHandle<anyhow::Result<()>>,
) -> anyhow::Result<()> {
    let started = std::time::Instant::now();
    while !client
        .get(ready)
        .send()
        .await
        .is_ok_and(|r| r.status().is_success())
    {
        if fleet.is_finished() {
            fleet.await??;
            anyhow::bail!("the fleet stopped while starting");
        }
        anyhow::ensure!(
            started.elapsed() < std::time::Duration::from_secs(30),
            "not ready in 30 s"
        );
        // A bench's own start, not a test: a short poll of a local port.
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    Ok(())
}

/// Delete namespace `ns` at the end of a run: its queues and exchanges, declared with
/// `settings` (the broker refuses a queue declared otherwise), and its Redis keys (dedupe
/// marks, caches, run streams). Those would expire, but until then they weigh on the shared
/// Redis: every erase scans past them, and a suite run right after a bench ran slower for them.
/// Best effort: what cannot be deleted expires by itself; `bench` names the bench in what is
/// printed.
pub(crate) async fn delete_namespace(
    bench: &str,
    config: &hermes_config::Config,
    ns: &str,
    settings: hermes_config::BusSettings,
) -> anyhow::Result<()> {
    let names =
        hermes_bus::Names::new(hermes_config::Namespace::parse(ns).map_err(anyhow::Error::msg)?);
    let metrics = hermes_telemetry::Metrics::new();
    match hermes_bus::Bus::connect(config.amqp_url.clone(), names, settings, metrics).await {
        Ok(bus) => {
            if let Err(e) = bus.delete_topology().await {
                eprintln!("{bench}: cannot delete the queues of {ns} (they expire): {e}");
            }
            bus.close().await;
        }
        Err(e) => eprintln!("{bench}: cannot reach the broker to delete the queues of {ns}: {e}"),
    }
    if let Err(e) = delete_keys(&config.redis_url, ns).await {
        eprintln!("{bench}: cannot delete the Redis keys of {ns} (they expire): {e}");
    }
    Ok(())
}

/// Unlink every Redis key of namespace `ns` (`{ns}:…`, never another namespace's that only
/// starts the same), 500 a command; returns how many went.
pub(crate) async fn delete_keys(
    redis_url: &secrecy::SecretString,
    ns: &str,
) -> anyhow::Result<usize> {
    use secrecy::ExposeSecret;
    let client = redis::Client::open(redis_url.expose_secret())?;
    let mut conn = client.get_multiplexed_async_connection().await?;
    let mut keys: Vec<String> = Vec::new();
    {
        let mut iter =
            redis::AsyncCommands::scan_match::<_, String>(&mut conn, format!("{ns}:*")).await?;
        while let Some(key) = futures_util::StreamExt::next(&mut iter).await {
            keys.push(key?);
        }
    }
    for batch in keys.chunks(500) {
        redis::cmd("UNLINK")
            .arg(batch)
            .query_async::<usize>(&mut conn)
            .await?;
    }
    Ok(keys.len())
}
