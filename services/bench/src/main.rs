//! `hermes-bench <name>`: the benchmarks that print figures, as a binary of their own so that
//! none of them is linked into the production `hermes` (docs/development.md#benchmarks).
//! `hermes bench <name>` execs this binary with the same arguments, so both spellings work.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use hermes_bench::{abuse, console, events, faults, fleet, floor, ingest, jobs, llm, router};
use hermes_config::Config;

#[derive(Parser)]
#[command(
    name = "hermes-bench",
    version,
    about = "Benchmarks of the Hermes fleet that print figures (also run as `hermes bench <name>`)",
    long_about = None,
    after_long_help = hermes_config::env::cli_help(),
    after_help = "Run `hermes-bench help <bench>` for a bench's flags."
)]
struct Cli {
    /// TOML file with tiers, model chains and API settings.
    #[arg(long, global = true, env = "HERMES_CONFIG", value_name = "FILE")]
    config: Option<PathBuf>,
    #[command(subcommand)]
    bench: Bench,
}

#[derive(Subcommand)]
enum Bench {
    /// What each attack of docs/security.md does to a normal caller's p99 and error rate,
    /// against quiet phases in the same run, and Redis bytes of run events per chat run
    Abuse(abuse::AbuseBench),
    /// Signed WhatsApp webhooks at a fixed rate against a running ingest: accepted/s, p50/p99/max.
    Ingest(ingest::IngestBench),
    /// The router stage alone in this process, warm caches and fake embeddings: messages/s, p50/p99 stage time.
    Router(router::RouterBench),
    /// The job scheduler's claim alone: jobs due at once, several schedulers, jobs/s, each run once.
    Jobs(jobs::JobsBench),
    /// The llm gateway alone at a fixed call rate against a zero-latency fake provider: overhead p50/p99, memory.
    Llm(llm::LlmBench),
    /// The fleet as separate processes under kills, stops and server outages, with a ledger
    /// that must add up (docs/faults.md).
    Faults(faults::FaultsBench),
    /// The whole path (API call in, answer out) through the fleet as separate processes
    /// against a zero-latency fake model: throughput frontier, p50/p99/p99.9 at half of it,
    /// CPU and memory per process, with a ledger (docs/performance.md).
    Fleet(fleet::FleetBench),
    /// The infrastructure's floor for one API chat completion: the same publishes, consumes,
    /// transactions and statements with no Hermes logic, measured like `bench fleet`
    /// (docs/performance.md, "The floor").
    Floor(floor::FloorBench),
    /// Operator events: from a Telegram webhook to `events_wait` returning its message, p50/p99,
    /// against the webhook's own answer, ingest and the router in this process.
    Events(events::EventsBench),
    /// Each console page's server time against the same database statements alone, over a
    /// seeded database of 100,000 runs and 10,000 users (docs/performance.md, "The console").
    Console(console::ConsoleBench),
    /// Not a bench: started by a bench to stop what the run left when the bench ends
    /// however it ends (see `reaper.rs`).
    #[command(hide = true)]
    Reap {
        /// The run's directory: servers running under it are stopped.
        #[arg(long)]
        dir: PathBuf,
        /// Folders under it removed once its servers are stopped (repeatable).
        #[arg(long)]
        remove: Vec<PathBuf>,
    },
}

/// Run a bench that needs the configuration: load it as `hermes` does (exit 2 when it is
/// bad), run, and print its error on one line.
async fn with_config<F, Fut>(name: &str, path: Option<&std::path::Path>, f: F) -> ExitCode
where
    F: FnOnce(Config) -> Fut,
    Fut: Future<Output = anyhow::Result<()>>,
{
    let config = match Config::from_env(path) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("hermes-bench: {e}");
            return ExitCode::from(2);
        }
    };
    exit(name, f(config).await)
}

/// The exit of a bench: its error on one line, named after the bench.
fn exit(name: &str, result: anyhow::Result<()>) -> ExitCode {
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("hermes-bench {name}: {e:#}");
            ExitCode::FAILURE
        }
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    if let Bench::Reap { dir, remove } = &cli.bench {
        hermes_bench::reaper::reap(dir, remove);
        return ExitCode::SUCCESS;
    }
    hermes_net::install_crypto_provider();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => {
            eprintln!("hermes-bench: cannot start the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    runtime.block_on(run(cli))
}

// Several benches are boxed: their futures are large, and this one would carry them inline.
async fn run(cli: Cli) -> ExitCode {
    let path = cli.config.as_deref();
    match cli.bench {
        Bench::Abuse(args) => {
            with_config("abuse", path, |c| async move {
                Box::pin(abuse::abuse(c, args)).await
            })
            .await
        }
        // The ingest bench loads no configuration: it drives an ingest someone else started.
        Bench::Ingest(args) => exit("ingest", ingest::ingest(args).await),
        Bench::Router(args) => {
            with_config("router", path, |c| async move {
                Box::pin(router::router(c, args)).await
            })
            .await
        }
        Bench::Jobs(args) => {
            with_config("jobs", path, |c| async move {
                Box::pin(jobs::jobs(c, args)).await
            })
            .await
        }
        Bench::Llm(args) => {
            with_config(
                "llm",
                path,
                |c| async move { Box::pin(llm::llm(c, args)).await },
            )
            .await
        }
        Bench::Faults(args) => {
            with_config("faults", path, |c| async move {
                Box::pin(faults::faults(c, args)).await
            })
            .await
        }
        Bench::Fleet(args) => {
            with_config("fleet", path, |c| async move {
                Box::pin(fleet::fleet(c, args)).await
            })
            .await
        }
        Bench::Floor(args) => {
            with_config("floor", path, |c| async move {
                Box::pin(floor::floor(c, args)).await
            })
            .await
        }
        Bench::Events(args) => {
            with_config("events", path, |c| async move {
                Box::pin(events::events(c, args)).await
            })
            .await
        }
        Bench::Console(args) => {
            with_config("console", path, |c| async move {
                Box::pin(console::console(c, args)).await
            })
            .await
        }
        // Handled in `main`, before a runtime exists.
        Bench::Reap { .. } => ExitCode::SUCCESS,
    }
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    use super::Cli;

    #[test]
    fn the_command_line_is_consistent() {
        Cli::command().debug_assert();
    }
}
