//! The `hermes` binary's library half: starting any set of services in one process with
//! the shared infrastructure (admin server, bus supervisor, outbox relay), and stopping
//! them in order on shutdown (docs/architecture.md#7-graceful-shutdown). `hermes all`, the tests and the
//! in-process benches (`hermes-bench`) use it directly.

pub mod cli;

use std::future::Future;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use hermes_config::Config;
use hermes_runtime::Ctx;
use hermes_runtime::admin;
use hermes_runtime::relay::Relay;
use hermes_telemetry::Metrics;
use tokio::net::TcpListener;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

/// A service the binary can run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Service {
    Ingest,
    Router,
    Llm,
    Tools,
    Delivery,
    /// The Discord Gateway connector (`hermes discord-gateway`); not part of [`Service::ALL`]:
    /// it needs a bot token and holds Discord's connections.
    DiscordGateway,
}

impl Service {
    pub const ALL: [Service; 5] = [
        Service::Ingest,
        Service::Router,
        Service::Llm,
        Service::Tools,
        Service::Delivery,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Service::Ingest => "ingest",
            Service::Router => "router",
            Service::Llm => "llm",
            Service::Tools => "tools",
            Service::Delivery => "delivery",
            Service::DiscordGateway => "discord-gateway",
        }
    }
}

/// Pre-bound sockets (tests bind port 0); `None` binds the configured address.
#[derive(Default)]
pub struct Listeners {
    pub http: Option<TcpListener>,
    pub admin: Option<TcpListener>,
}

fn spawn_service(
    service: Service,
    ctx: Ctx,
    http: Option<TcpListener>,
) -> JoinHandle<anyhow::Result<()>> {
    tokio::spawn(async move {
        match service {
            Service::Ingest => match http {
                Some(l) => hermes_ingest::serve(ctx, l).await,
                None => hermes_ingest::run(ctx).await,
            },
            Service::Router => hermes_router::run(ctx).await,
            Service::Llm => hermes_llm::run(ctx).await,
            Service::Tools => hermes_tools::run(ctx).await,
            Service::Delivery => hermes_delivery::run(ctx).await,
            Service::DiscordGateway => hermes_discord_gateway::run(ctx).await,
        }
    })
}

/// Check what the chosen services need from the configuration, before connecting anywhere.
pub fn preflight(config: &Config, services: &[Service]) -> anyhow::Result<()> {
    if services.contains(&Service::Ingest) {
        config.ingest.check()?;
    }
    if services.contains(&Service::Llm) {
        config.check_llm()?;
    }
    if services.contains(&Service::DiscordGateway) && config.delivery.discord.bot_token.is_none() {
        anyhow::bail!("DISCORD_BOT_TOKEN is not set: `hermes discord-gateway` connects as the bot");
    }
    Ok(())
}

/// Run `services` until `shutdown` resolves (or a component raises a fatal error), then stop:
/// readiness off → ingest stops accepting and finishes its requests → stages stop consuming
/// and finish their messages → the relay publishes what is left → connections close.
pub async fn run(
    config: Config,
    services: &[Service],
    listeners: Listeners,
    shutdown: impl Future<Output = ()>,
) -> anyhow::Result<()> {
    // Every service's state lives in this future: on the heap, so a caller's stays small.
    Box::pin(run_fleet(config, services, listeners, shutdown)).await
}

/// [`run`]'s body.
async fn run_fleet(
    config: Config,
    services: &[Service],
    listeners: Listeners,
    shutdown: impl Future<Output = ()>,
) -> anyhow::Result<()> {
    preflight(&config, services)?;
    let grace = config.shutdown_grace;
    let admin_addr = config.admin_addr;
    let ctx = Ctx::connect(config, Metrics::new()).await?;

    let infra = CancellationToken::new();
    let intake = CancellationToken::new();
    let workers = CancellationToken::new();

    let admin_listener = match listeners.admin {
        Some(l) => l,
        None => TcpListener::bind(admin_addr)
            .await
            .with_context(|| format!("cannot listen on HERMES_ADMIN_ADDR={admin_addr}"))?,
    };
    let admin_task = tokio::spawn(admin::serve(
        admin_listener,
        ctx.metrics.clone(),
        ctx.bus.clone(),
        ctx.readiness.clone(),
        infra.clone(),
    ));
    let fatal = ctx.fatal.clone();
    let supervisor = ctx
        .bus
        .spawn_supervisor(infra.clone(), move |reason| fatal.raise(reason));
    let sampler = ctx
        .bus
        .spawn_queue_sampler(Duration::from_secs(15), infra.clone());
    ctx.readiness.spawn_db_probe(ctx.db.clone(), infra.clone());
    // Only the stages write to the outbox; ingest and the Discord connector publish directly.
    let has_stages =
        (services.iter()).any(|s| !matches!(s, Service::Ingest | Service::DiscordGateway));
    let relay = has_stages.then(|| {
        let relay = Relay::new(ctx.db.clone(), ctx.bus.clone(), ctx.metrics.clone())
            .gather(ctx.config.bus.mark_gather);
        tokio::spawn(relay.run(infra.clone()))
    });

    if services.contains(&Service::Tools) {
        // Not ready before the registry holds this build's tools: a message routed earlier
        // would be offered none.
        ctx.readiness.expect(hermes_tools::REGISTRY_PUBLISHED);
        // Nor before its MCP servers' first discovery is in it (or failed, or timed out).
        ctx.readiness.expect(hermes_tools::MCP_DISCOVERED);
    }
    let mut http = listeners.http;
    let mut intakes = Vec::new();
    let mut stages = Vec::new();
    for &service in services {
        // Both intakes stop taking messages first, before the stages drain.
        if matches!(service, Service::Ingest | Service::DiscordGateway) {
            let http = (service == Service::Ingest).then(|| http.take()).flatten();
            intakes.push((
                service,
                spawn_service(service, ctx.with_stop(intake.clone()), http),
            ));
        } else {
            stages.push((
                service,
                spawn_service(service, ctx.with_stop(workers.clone()), None),
            ));
        }
    }
    let names: Vec<&str> = services.iter().map(|s| s.as_str()).collect();
    tracing::info!(services = ?names, namespace = %ctx.config.namespace, "hermes started");

    // Wait for a stop signal, a fatal error, or a service ending on its own (which is a failure).
    let failed = {
        let watch_services = async {
            loop {
                tokio::time::sleep(Duration::from_millis(200)).await;
                let ended = intakes
                    .iter()
                    .chain(stages.iter())
                    .find(|(_, h)| h.is_finished());
                if let Some((s, _)) = ended {
                    return *s;
                }
            }
        };
        tokio::select! {
            _ = shutdown => None,
            _ = ctx.fatal.raised() => None,
            s = watch_services => Some(s),
        }
    };
    let mut error: Option<anyhow::Error> = ctx.fatal.reason().map(anyhow::Error::msg);

    // The drain, in order and bounded (docs/operations.md, stopping): ingest stops taking
    // requests and gets at most a third of the grace for the ones in flight when stages run
    // beside it (their answers come from the stages, which keep working meanwhile), the whole
    // grace when it runs alone; then the stages stop consuming and finish what they hold by
    // the end of the grace. What is still running then is aborted
    // at its next await, before the connections close, so its messages go back to their
    // queues unacked and no half-finished work runs on after the hand-back.
    ctx.readiness.set_stopping();
    let started = Instant::now();
    let deadline = started + grace;
    intake.cancel();
    let drain = if stages.is_empty() { grace } else { grace / 3 };
    for (s, h) in intakes {
        collect(s, h, started + drain, &mut error).await;
    }
    workers.cancel();
    for (s, h) in stages {
        collect(s, h, deadline, &mut error).await;
    }
    infra.cancel();
    if let Some(r) = relay {
        let _ = tokio::time::timeout(Duration::from_secs(5), r).await;
    }
    // The grace is spent: what is left is bounded too, so a stop never hangs on a broker
    // connection in recovery (a SIGKILL from the orchestrator would end it anyway).
    sampler.abort();
    let (supervisor_abort, admin_abort) = (supervisor.abort_handle(), admin_task.abort_handle());
    if tokio::time::timeout(CLEANUP_BOUND, supervisor)
        .await
        .is_err()
    {
        supervisor_abort.abort();
        tracing::warn!("the bus supervisor did not stop in time; left behind");
    }
    if tokio::time::timeout(CLEANUP_BOUND, admin_task)
        .await
        .is_err()
    {
        admin_abort.abort();
    }
    if tokio::time::timeout(CLEANUP_BOUND, ctx.bus.close())
        .await
        .is_err()
    {
        tracing::warn!("the broker connections did not close in time; dropped");
    }
    if let (Some(s), None) = (failed, &error) {
        error = Some(anyhow::anyhow!(
            "the {} service stopped unexpectedly",
            s.as_str()
        ));
    }
    match error {
        Some(e) => Err(e),
        None => {
            tracing::info!("hermes stopped cleanly");
            Ok(())
        }
    }
}

/// How long each piece of cleanup after the stages may take once they have stopped.
const CLEANUP_BOUND: Duration = Duration::from_secs(5);

async fn collect(
    s: Service,
    h: JoinHandle<anyhow::Result<()>>,
    deadline: Instant,
    error: &mut Option<anyhow::Error>,
) {
    let left = deadline.saturating_duration_since(Instant::now());
    let abort = h.abort_handle();
    match tokio::time::timeout(left, h).await {
        Ok(Ok(Ok(()))) => {}
        Ok(Ok(Err(e))) => {
            tracing::error!(service = s.as_str(), error = %format!("{e:#}"), "service failed");
            error.get_or_insert(e.context(format!("{} service", s.as_str())));
        }
        Ok(Err(join)) => {
            error.get_or_insert(anyhow::anyhow!("{} service panicked: {join}", s.as_str()));
        }
        Err(_) => {
            abort.abort();
            tracing::warn!(
                service = s.as_str(),
                "shutdown grace exceeded; in-flight work stopped and handed back to its queue"
            );
        }
    }
}
