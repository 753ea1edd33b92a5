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
pub mod events;
pub mod faults;
pub mod fleet;
mod fleet_process;
pub mod floor;
pub mod ingest;
pub mod jobs;
pub mod llm;
mod procstat;
pub mod reaper;
pub mod router;
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

/// Delete namespace `ns`'s queues and exchanges at the end of a run, declared with
/// `settings` (the broker refuses a queue declared otherwise). Best effort: what cannot be
/// deleted expires by itself; `bench` names the bench in what is printed.
pub(crate) async fn delete_namespace(
    bench: &str,
    amqp_url: &secrecy::SecretString,
    ns: &str,
    settings: hermes_config::BusSettings,
) -> anyhow::Result<()> {
    let names =
        hermes_bus::Names::new(hermes_config::Namespace::parse(ns).map_err(anyhow::Error::msg)?);
    let metrics = hermes_telemetry::Metrics::new();
    match hermes_bus::Bus::connect(amqp_url.clone(), names, settings, metrics).await {
        Ok(bus) => {
            if let Err(e) = bus.delete_topology().await {
                eprintln!("{bench}: cannot delete the namespace's queues (they expire): {e}");
            }
            bus.close().await;
        }
        Err(e) => eprintln!("{bench}: cannot reach the broker to delete the queues: {e}"),
    }
    Ok(())
}
