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
