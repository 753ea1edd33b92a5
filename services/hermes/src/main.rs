//! `hermes`: run any Hermes service, all of them at once, or an operator command.

use std::ffi::OsString;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::{Parser, Subcommand};
use hermes::{Listeners, Service};
use hermes_config::Config;
use hermes_db::{Db, migrate};
use hermes_runtime::shutdown;
use hermes_telemetry::{init_tracing, trace};

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
        command: Option<hermes::cli::tools::ToolsCommand>,
    },
    /// Deliver answers and close runs.
    Delivery,
    /// Hold the Discord Gateway sessions of the shards this replica leases and hand each
    /// message that addresses the bot to the router (docs/channels.md, "Discord").
    DiscordGateway,
    /// Run all five services in one process (development and small installs).
    All {
        /// Also hold the Discord Gateway sessions in this process, as `hermes discord-gateway`
        /// does (needs DISCORD_BOT_TOKEN; a small install's only replica holds every shard).
        #[arg(long)]
        discord_gateway: bool,
    },
    /// Apply pending database migrations (creates the database when missing).
    Migrate,
    /// Show the effective configuration and check PostgreSQL, RabbitMQ, Redis and the schema.
    Doctor,
    /// Benchmarks that print figures, run by `hermes-bench` (installed next to `hermes`).
    ///
    /// The benches: abuse, ingest, router, jobs, llm, faults, fleet, floor, events. They are
    /// the separate `hermes-bench` binary, so none of them is in this one; this runs it with
    /// the same arguments (`hermes bench fleet --help` for one bench's flags).
    Bench {
        /// The bench and its flags, passed to `hermes-bench` as they are.
        #[arg(
            required = true,
            trailing_var_arg = true,
            allow_hyphen_values = true,
            value_name = "BENCH [ARGS]"
        )]
        args: Vec<OsString>,
    },
    /// Manage users: create, show, credit, set, remember.
    #[command(subcommand)]
    Users(hermes::cli::users::UsersCommand),
    /// Link platform senders to users.
    #[command(subcommand)]
    Channels(hermes::cli::channels::ChannelsCommand),
    /// Manage agents: internal personas and external runtimes woken by signed webhooks.
    #[command(subcommand)]
    Agents(hermes::cli::agents::AgentsCommand),
    /// Block or resume every model call of the fleet; show today's spend.
    #[command(subcommand)]
    Killswitch(hermes::cli::killswitch::KillswitchCommand),
    /// Workspace settings: provider keys that override the global ones.
    #[command(subcommand)]
    Workspaces(hermes::cli::workspaces::WorkspacesCommand),
    /// Tool calls waiting for an operator's approval: list, show, allow or deny them.
    #[command(subcommand)]
    Approvals(hermes::cli::approvals::ApprovalsCommand),
    /// Parked messages of every stage: list, show, replay (same id) or purge them.
    #[command(subcommand)]
    Dlq(hermes::cli::dlq::DlqCommand),
    /// Scheduled jobs: list every key's and the operator's; create, pause, resume, run and
    /// delete through a running ingest's /api/jobs. Also spelled `hermes cron`.
    #[command(subcommand, visible_alias = "cron")]
    Jobs(hermes::cli::jobs::JobsCommand),
    /// Runs: `hermes runs show <id>`, with what the user's phone reported about each send.
    #[command(subcommand)]
    Runs(hermes::cli::runs::RunsCommand),
    /// Manage keys of the REST channel (POST /v1/messages).
    #[command(name = "api-keys", subcommand)]
    ApiKeys(hermes::cli::api_keys::KeysCommand),
    /// Hermes as an MCP server for operators: `hermes mcp serve` speaks it on stdio.
    #[command(subcommand)]
    Mcp(hermes::cli::mcp::McpCommand),
    /// Probe this process's /readyz on the admin port; exit 0 when ready (for container health checks).
    Health {
        /// Address of the admin server to probe.
        #[arg(long, default_value = "127.0.0.1:9090", env = "HERMES_HEALTH_ADDR")]
        addr: String,
    },
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

/// What `hermes all` runs: the five stages, and the Discord connector when asked.
fn all_services(discord_gateway: bool) -> Vec<Service> {
    let mut services = Service::ALL.to_vec();
    if discord_gateway {
        services.push(Service::DiscordGateway);
    }
    services
}

async fn dispatch(cli: Cli) -> ExitCode {
    let path = cli.config.as_deref();
    let services: Vec<Service> = match cli.command {
        Command::Ingest => vec![Service::Ingest],
        Command::Router => vec![Service::Router],
        Command::Llm => vec![Service::Llm],
        Command::Tools { command: None } => vec![Service::Tools],
        Command::Delivery => vec![Service::Delivery],
        Command::DiscordGateway => vec![Service::DiscordGateway],
        Command::All { discord_gateway } => all_services(discord_gateway),
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
            return if hermes::cli::doctor::run(&config).await == 0 {
                ExitCode::SUCCESS
            } else {
                ExitCode::FAILURE
            };
        }
        Command::Health { addr } => return health(&addr).await,
        Command::Bench { args } => return bench(path, args),
        Command::Jobs(cmd) => {
            return admin("jobs", path, |c| async move {
                hermes::cli::jobs::run(&c, cmd).await
            })
            .await;
        }
        Command::Runs(cmd) => {
            return admin("runs", path, |c| async move {
                hermes::cli::runs::run(&c, cmd).await
            })
            .await;
        }
        Command::ApiKeys(cmd) => {
            return admin("api-keys", path, |c| async move {
                hermes::cli::api_keys::run(&c, cmd).await
            })
            .await;
        }
        Command::Mcp(cmd) => {
            return admin("mcp", path, |c| async move {
                Box::pin(hermes::cli::mcp::run(c, cmd)).await
            })
            .await;
        }
        Command::Users(cmd) => {
            return admin("users", path, |c| async move {
                hermes::cli::users::run(&c, cmd).await
            })
            .await;
        }
        Command::Channels(cmd) => {
            return admin("channels", path, |c| async move {
                hermes::cli::channels::run_channels(&c, cmd).await
            })
            .await;
        }
        Command::Killswitch(cmd) => {
            return admin("killswitch", path, |c| async move {
                hermes::cli::killswitch::killswitch(&c, cmd).await
            })
            .await;
        }
        Command::Workspaces(cmd) => {
            return admin("workspaces", path, |c| async move {
                hermes::cli::workspaces::workspaces_cmd(&c, cmd).await
            })
            .await;
        }
        Command::Dlq(cmd) => {
            return admin("dlq", path, |c| async move {
                hermes::cli::dlq::run(&c, cmd).await
            })
            .await;
        }
        Command::Approvals(cmd) => {
            return admin("approvals", path, |c| async move {
                hermes::cli::approvals::run(&c, cmd).await
            })
            .await;
        }
        Command::Agents(cmd) => {
            return admin("agents", path, |c| async move {
                hermes::cli::agents::run(&c, cmd).await
            })
            .await;
        }
        Command::Tools { command: Some(cmd) } => {
            return admin("tools", path, |c| async move {
                hermes::cli::tools::run(&c, cmd).await
            })
            .await;
        }
    };
    let config = match load(path) {
        Ok(c) => c,
        Err(code) => return code,
    };
    // `hermes-router` for one service, `hermes-all` for the fleet in one process.
    let service = match services.as_slice() {
        [one] => format!("hermes-{}", one.as_str()),
        _ => "hermes-all".to_string(),
    };
    let traces = match trace::init(
        config.log_format,
        trace::DEFAULT_LOG_FILTER,
        &config.traces,
        &service,
    ) {
        Ok(t) => t,
        Err(e) => {
            eprintln!("hermes: {e}");
            return ExitCode::FAILURE;
        }
    };
    // Boxed: the future holds the whole configuration, too large for the stack.
    let run = Box::pin(hermes::run(
        config,
        &services,
        Listeners::default(),
        shutdown::signal(),
    ));
    let code = match run.await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            tracing::error!(error = %format!("{e:#}"), "hermes stopped with an error");
            eprintln!("hermes: {e:#}");
            ExitCode::FAILURE
        }
    };
    // What finished before the stop still reaches the collector.
    traces.shutdown().await;
    code
}

/// `hermes bench …`: exec `hermes-bench …` from beside this binary, so the benchmarks stay out
/// of the production binary (docs/development.md#benchmarks) and operators keep the spelling
/// the docs use. A `--config` given before the bench's name goes along with it.
fn bench(config: Option<&std::path::Path>, args: Vec<OsString>) -> ExitCode {
    use std::os::unix::process::CommandExt as _;
    let bin = match std::env::current_exe() {
        Ok(exe) => exe.with_file_name("hermes-bench"),
        Err(e) => {
            eprintln!("hermes bench: cannot tell where this binary is: {e}");
            return ExitCode::FAILURE;
        }
    };
    if !bin.is_file() {
        eprintln!(
            "hermes bench: hermes-bench is not installed next to hermes ({}): build it with \
             `cargo build -p hermes-bench`",
            bin.display()
        );
        return ExitCode::FAILURE;
    }
    let mut command = std::process::Command::new(&bin);
    if let Some(config) = config {
        // As the variable, not the flag: a `--config` among `args` then wins, as it would here.
        command.env("HERMES_CONFIG", config);
    }
    // Only returns when the exec failed.
    let error = command.args(args).exec();
    eprintln!("hermes bench: cannot run {}: {error}", bin.display());
    ExitCode::FAILURE
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

    #[test]
    fn all_holds_the_discord_gateway_only_when_asked() {
        use clap::Parser;
        for (args, wanted) in [
            (&["hermes", "all"][..], false),
            (&["hermes", "all", "--discord-gateway"][..], true),
        ] {
            let cli = Cli::try_parse_from(args).unwrap();
            let super::Command::All { discord_gateway } = cli.command else {
                panic!("{args:?} is not `all`");
            };
            let services = super::all_services(discord_gateway);
            assert_eq!(services.len(), 5 + usize::from(wanted), "{args:?}");
            assert_eq!(
                services.contains(&hermes::Service::DiscordGateway),
                wanted,
                "{args:?}"
            );
        }
    }
}
