//! `hermes`: run any Hermes service, all of them at once, or an operator command.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::{Parser, Subcommand};
use hermes::{Listeners, Service};
use hermes_config::Config;
use hermes_db::{Db, migrate};
use hermes_runtime::shutdown;
use hermes_telemetry::init_tracing;

#[derive(Parser)]
#[command(
    name = "hermes",
    version,
    about = "Hermes: a message router and agent runtime, run as a queue-driven worker fleet",
    long_about = None,
    after_long_help = hermes_config::env::cli_help(),
    after_help = "Run `hermes help <command>` for a command, `hermes --help` for every environment variable."
)]
struct Cli {
    /// TOML file with tiers, model chains and API settings.
    #[arg(long, global = true, env = "HERMES_CONFIG", value_name = "FILE")]
    config: Option<PathBuf>,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Serve the HTTP API: verify, accept and hand messages to the router.
    Ingest,
    /// Route inbound messages: user, credits, soul, history, tool gating, model chain, agent dispatch.
    Router,
    /// Call the models: budgets, cache, call slots, native Anthropic/Gemini/OpenAI-compatible backends, failover, streaming.
    Llm,
    /// Run the tools models ask for (built-ins and MCP servers); `hermes tools reload` makes
    /// every running tools replica re-read its configuration.
    Tools {
        #[command(subcommand)]
        command: Option<hermes::tools_admin::ToolsCommand>,
    },
    /// Deliver answers and close runs.
    Delivery,
    /// Run all five services in one process (development and small installs).
    All,
    /// Apply pending database migrations (creates the database when missing).
    Migrate,
    /// Show the effective configuration and check PostgreSQL, RabbitMQ, Redis and the schema.
    Doctor,
    /// Benchmarks that print figures (`ingest` against a fleet you started; `router` and `llm` in-process).
    #[command(subcommand)]
    Bench(BenchCommand),
    /// Manage users: create, show, credit, set, remember.
    #[command(subcommand)]
    Users(hermes::users::UsersCommand),
    /// Link platform senders to users.
    #[command(subcommand)]
    Channels(hermes::users::ChannelsCommand),
    /// Manage agents: internal personas and external runtimes woken by signed webhooks.
    #[command(subcommand)]
    Agents(hermes::agents::AgentsCommand),
    /// Block or resume every model call of the fleet; show today's spend.
    #[command(subcommand)]
    Killswitch(hermes::llm_admin::KillswitchCommand),
    /// Workspace settings: provider keys that override the global ones.
    #[command(subcommand)]
    Workspaces(hermes::llm_admin::WorkspacesCommand),
    /// Tool calls waiting for an operator's approval: list, show, allow or deny them.
    #[command(subcommand)]
    Approvals(hermes::approvals::ApprovalsCommand),
    /// Parked messages of every stage: list, show, replay (same id) or purge them.
    #[command(subcommand)]
    Dlq(hermes::dlq::DlqCommand),
    /// Scheduled jobs of every key and of the operator (made through /api/jobs).
    #[command(subcommand)]
    Jobs(hermes::jobs_admin::JobsCommand),
    /// Runs: `hermes runs show <id>`, with what the user's phone reported about each send.
    #[command(subcommand)]
    Runs(hermes::runs_admin::RunsCommand),
    /// Manage keys of the REST channel (POST /v1/messages).
    #[command(name = "api-keys", subcommand)]
    ApiKeys(hermes::keys::KeysCommand),
    /// Hermes as an MCP server for operators: `hermes mcp serve` speaks it on stdio.
    #[command(subcommand)]
    Mcp(hermes::mcp::McpCommand),
    /// Probe this process's /readyz on the admin port; exit 0 when ready (for container health checks).
    Health {
        /// Address of the admin server to probe.
        #[arg(long, default_value = "127.0.0.1:9090", env = "HERMES_HEALTH_ADDR")]
        addr: String,
    },
}

#[derive(Subcommand)]
enum BenchCommand {
    /// What each attack of docs/security.md does to a normal caller's p99 and error rate,
    /// against quiet phases in the same run, and Redis bytes of run events per chat run
    Abuse(hermes::bench_abuse::AbuseBench),
    /// Signed WhatsApp webhooks at a fixed rate against a running ingest: accepted/s, p50/p99/max.
    Ingest(hermes::bench_ingest::IngestBench),
    /// The router stage alone in this process, warm caches and fake embeddings: messages/s, p50/p99 stage time.
    Router(hermes::bench_router::RouterBench),
    /// The job scheduler's claim alone: jobs due at once, several schedulers, jobs/s, each run once.
    Jobs(hermes::bench_jobs::JobsBench),
    /// The llm gateway alone at a fixed call rate against a zero-latency fake provider: overhead p50/p99, memory.
    Llm(hermes::bench_llm::LlmBench),
    /// The fleet as separate processes under kills, stops and server outages, with a ledger
    /// that must add up (docs/faults.md).
    Faults(hermes::bench_faults::FaultsBench),
    /// The whole path (API call in, answer out) through the fleet as separate processes
    /// against a zero-latency fake model: throughput frontier, p50/p99/p99.9 at half of it,
    /// CPU and memory per process, with a ledger (docs/performance.md).
    Fleet(hermes::bench_fleet::FleetBench),
    /// The infrastructure's floor for one API chat completion: the same publishes, consumes,
    /// transactions and statements with no Hermes logic, measured like `bench fleet`
    /// (docs/performance.md, "The floor").
    Floor(hermes::bench_floor::FloorBench),
    /// Operator events: from a Telegram webhook to `events_wait` returning its message, p50/p99,
    /// against the webhook's own answer, ingest and the router in this process.
    Events(hermes::bench_events::EventsBench),
}

/// The exit of a bench that needs no configuration of its own.
fn bench_result(result: anyhow::Result<()>) -> ExitCode {
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("hermes bench: {e:#}");
            ExitCode::FAILURE
        }
    }
}

fn load(path: Option<&std::path::Path>) -> Result<Config, ExitCode> {
    Config::from_env(path).map_err(|e| {
        eprintln!("hermes: {e}");
        ExitCode::from(2)
    })
}

/// Run an operator command: load the configuration, run, and print its error on one line.
async fn admin<F, Fut>(name: &str, path: Option<&std::path::Path>, f: F) -> ExitCode
where
    F: FnOnce(Config) -> Fut,
    Fut: Future<Output = anyhow::Result<()>>,
{
    let config = match load(path) {
        Ok(c) => c,
        Err(code) => return code,
    };
    match f(config).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("hermes {name}: {e:#}");
            ExitCode::FAILURE
        }
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    hermes_net::install_crypto_provider();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => {
            eprintln!("hermes: cannot start the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    runtime.block_on(dispatch(cli))
}

async fn dispatch(cli: Cli) -> ExitCode {
    let path = cli.config.as_deref();
    let services: Vec<Service> = match cli.command {
        Command::Ingest => vec![Service::Ingest],
        Command::Router => vec![Service::Router],
        Command::Llm => vec![Service::Llm],
        Command::Tools { command: None } => vec![Service::Tools],
        Command::Delivery => vec![Service::Delivery],
        Command::All => Service::ALL.to_vec(),
        Command::Migrate => {
            let config = match load(path) {
                Ok(c) => c,
                Err(code) => return code,
            };
            init_tracing(config.log_format);
            return migrate_cmd(&config).await;
        }
        Command::Doctor => {
            let config = match load(path) {
                Ok(c) => c,
                Err(code) => return code,
            };
            return if hermes::doctor::run(&config).await == 0 {
                ExitCode::SUCCESS
            } else {
                ExitCode::FAILURE
            };
        }
        Command::Health { addr } => return health(&addr).await,
        Command::Bench(BenchCommand::Jobs(args)) => {
            return admin("bench jobs", path, |c| async move {
                Box::pin(hermes::bench_jobs::jobs(c, args)).await
            })
            .await;
        }
        Command::Bench(BenchCommand::Abuse(args)) => {
            return admin("bench abuse", path, |c| async move {
                Box::pin(hermes::bench_abuse::abuse(c, args)).await
            })
            .await;
        }
        Command::Bench(BenchCommand::Events(args)) => {
            return admin("bench events", path, |c| async move {
                Box::pin(hermes::bench_events::events(c, args)).await
            })
            .await;
        }
        Command::Bench(BenchCommand::Router(args)) => {
            return admin("bench router", path, |c| async move {
                Box::pin(hermes::bench_router::router(c, args)).await
            })
            .await;
        }
        Command::Bench(BenchCommand::Faults(args)) => {
            return admin("bench faults", path, |c| async move {
                hermes::bench_faults::faults(c, args).await
            })
            .await;
        }
        Command::Bench(BenchCommand::Floor(args)) => {
            return admin("bench floor", path, |c| async move {
                hermes::bench_floor::floor(c, args).await
            })
            .await;
        }
        Command::Bench(BenchCommand::Fleet(args)) => {
            // Boxed: the fleet bench's future is large, and main's would carry it inline.
            return admin("bench fleet", path, |c| async move {
                Box::pin(hermes::bench_fleet::fleet(c, args)).await
            })
            .await;
        }
        Command::Bench(BenchCommand::Llm(args)) => {
            // Boxed: the gateway bench's future is large, and main's would carry it inline.
            return Box::pin(admin("bench llm", path, |c| async move {
                hermes::bench_llm::llm(c, args).await
            }))
            .await;
        }
        Command::Bench(BenchCommand::Ingest(args)) => {
            return bench_result(hermes::bench_ingest::ingest(args).await);
        }
        Command::Jobs(cmd) => {
            return admin("jobs", path, |c| async move {
                hermes::jobs_admin::run(&c, cmd).await
            })
            .await;
        }
        Command::Runs(cmd) => {
            return admin("runs", path, |c| async move {
                hermes::runs_admin::run(&c, cmd).await
            })
            .await;
        }
        Command::ApiKeys(cmd) => {
            return admin("api-keys", path, |c| async move {
                hermes::keys::run(&c, cmd).await
            })
            .await;
        }
        Command::Mcp(cmd) => {
            return admin("mcp", path, |c| async move {
                Box::pin(hermes::mcp::run(c, cmd)).await
            })
            .await;
        }
        Command::Users(cmd) => {
            return admin("users", path, |c| async move {
                hermes::users::run(&c, cmd).await
            })
            .await;
        }
        Command::Channels(cmd) => {
            return admin("channels", path, |c| async move {
                hermes::users::run_channels(&c, cmd).await
            })
            .await;
        }
        Command::Killswitch(cmd) => {
            return admin("killswitch", path, |c| async move {
                hermes::llm_admin::killswitch(&c, cmd).await
            })
            .await;
        }
        Command::Workspaces(cmd) => {
            return admin("workspaces", path, |c| async move {
                hermes::llm_admin::workspaces_cmd(&c, cmd).await
            })
            .await;
        }
        Command::Dlq(cmd) => {
            return admin(
                "dlq",
                path,
                |c| async move { hermes::dlq::run(&c, cmd).await },
            )
            .await;
        }
        Command::Approvals(cmd) => {
            return admin("approvals", path, |c| async move {
                hermes::approvals::run(&c, cmd).await
            })
            .await;
        }
        Command::Agents(cmd) => {
            return admin("agents", path, |c| async move {
                hermes::agents::run(&c, cmd).await
            })
            .await;
        }
        Command::Tools { command: Some(cmd) } => {
            return admin("tools", path, |c| async move {
                hermes::tools_admin::run(&c, cmd).await
            })
            .await;
        }
    };
    let config = match load(path) {
        Ok(c) => c,
        Err(code) => return code,
    };
    init_tracing(config.log_format);
    match hermes::run(config, &services, Listeners::default(), shutdown::signal()).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            tracing::error!(error = %format!("{e:#}"), "hermes stopped with an error");
            eprintln!("hermes: {e:#}");
            ExitCode::FAILURE
        }
    }
}

async fn migrate_cmd(config: &Config) -> ExitCode {
    let result = async {
        let db = Db::new(&config.database_url, 2)?;
        if migrate::ensure_database(&db).await? {
            println!("created the database");
        }
        migrate::run(&db).await
    }
    .await;
    match result {
        Ok(report) => {
            for name in &report.applied {
                println!("applied {name}");
            }
            println!(
                "schema at version {} ({} applied now, {} already)",
                migrate::latest_version(),
                report.applied.len(),
                report.already
            );
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("hermes migrate: {e}");
            ExitCode::FAILURE
        }
    }
}

async fn health(addr: &str) -> ExitCode {
    let url = format!("http://{addr}/readyz");
    let client = match reqwest::Client::builder()
        .timeout(Duration::from_secs(3))
        .build()
    {
        Ok(c) => c,
        Err(e) => {
            eprintln!("hermes health: {e}");
            return ExitCode::FAILURE;
        }
    };
    match client.get(&url).send().await {
        Ok(r) if r.status().is_success() => ExitCode::SUCCESS,
        Ok(r) => {
            eprintln!("hermes health: {url} answered {}", r.status());
            ExitCode::FAILURE
        }
        Err(e) => {
            eprintln!("hermes health: {url}: {}", e.without_url());
            ExitCode::FAILURE
        }
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
