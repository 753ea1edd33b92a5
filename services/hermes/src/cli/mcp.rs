//! `hermes mcp serve`: Hermes as an MCP server for operators over stdio
//! (docs/operator-mcp.md, "Connecting"). The MCP client starts this process and owns it:
//! JSON-RPC on stdin and stdout, nothing else on stdout, logs on stderr (warnings only
//! unless `--verbose`), and a clean exit when stdin ends. The process connects with the
//! usual configuration (DATABASE_URL, REDIS_URL, AMQP_URL, …) and checks the schema
//! version; whoever can start it holds the database credentials, so its caller is the
//! operator (`stdio`), with no key.

use clap::{Args, Subcommand};
use hermes_config::Config;
use hermes_operator::{Caller, Operator, Transport};
use hermes_runtime::Ctx;
use hermes_telemetry::{Metrics, init_tracing, init_tracing_at};

/// `hermes mcp …`
#[derive(Subcommand)]
pub enum McpCommand {
    /// Serve the operator MCP server on stdin/stdout (for an MCP client to start).
    Serve(ServeArgs),
}

/// `hermes mcp serve` options.
#[derive(Args)]
pub struct ServeArgs {
    /// Log at info level to stderr (otherwise only warnings and errors).
    #[arg(long)]
    pub verbose: bool,
}

/// Run an `mcp` command.
pub async fn run(config: Config, cmd: McpCommand) -> anyhow::Result<()> {
    match cmd {
        McpCommand::Serve(args) => Box::pin(serve(config, args)).await,
    }
}

async fn serve(config: Config, args: ServeArgs) -> anyhow::Result<()> {
    if args.verbose {
        init_tracing(config.log_format);
    } else {
        init_tracing_at(config.log_format, "warn");
    }
    let ctx = Ctx::connect(config, Metrics::new()).await?;
    tracing::info!("operator MCP server on stdio");
    let op = Operator::new(ctx, Caller::Stdio, Transport::Stdio);
    hermes_operator::stdio::serve(op, tokio::io::stdin(), tokio::io::stdout()).await?;
    tracing::info!("stdin ended; stopping");
    Ok(())
}
