//! The tools stage: runs what models ask for and sends the results back to the llm stage.
//! Consumes `{ns}.tools`. At start it publishes its built-ins to the shared registry at
//! once, removes the toolsets no longer configured, and publishes each MCP server's tools as
//! the server connects; a server's tool-list change is published again, and `hermes tools
//! reload` makes it re-read the configuration file. Holding the Forge's MCP session, it also
//! does a Forge run's preflight and keeps the agent's presence towards the Forge.

pub mod approval;
mod approval_watch;
pub mod builtin;
mod delegate;
mod forge;
mod forge_answer;
mod forge_presence;
mod handler;
pub mod mcp;
pub mod policy;
pub mod registry;
pub mod reload;
mod spans;

use std::collections::BTreeMap;
use std::sync::{Arc, RwLock};

use hermes_config::{FileConfig, McpServerSettings, ToolsSettings};
use hermes_db::tool_registry;
use hermes_runtime::{Ctx, stage};
use hermes_types::sync;
use tokio::sync::mpsc;

pub use handler::{Executed, Outcome, ToolStage, execute};

/// The start-up step a process running the tools stage announces to its readiness: the
/// first publication of the registry (docs/tools-and-mcp.md, "The registry").
pub const REGISTRY_PUBLISHED: &str = "tool_registry";

/// The start-up step after it: every enabled MCP server's first discovery published (or
/// failed), bounded by `HERMES_TOOLS_READY_TIMEOUT` (docs/tools-and-mcp.md, "The registry").
/// A message routed before would be offered none of those servers' tools.
pub const MCP_DISCOVERED: &str = "mcp_servers";
pub use registry::{Registry, Tool, ToolError};

use mcp::{Complete, GatewaySampling, McpHub, ToolsetChanged};

/// The built-in tools every replica runs, with the limits of `[tools]` in the configuration.
pub fn default_registry(settings: &ToolsSettings) -> Registry {
    Registry::default()
        .with(builtin::CurrentTime)
        .with(builtin::DelegateTask)
        .with(builtin::HttpFetch::new(&settings.http_fetch))
}

/// The approval rules of `tools` and `servers` over the built-ins of `builtins`; a rule
/// naming no tool or toolset is a configuration problem, reported as one line.
pub fn approval_rules(
    tools: &ToolsSettings,
    servers: &BTreeMap<String, McpServerSettings>,
    builtins: &Registry,
) -> Result<approval::ApprovalRules, String> {
    approval::ApprovalRules::new(tools, servers, &builtins.builtin_names())
}

/// Start the MCP servers of `file` and build the registry over them and the built-ins.
async fn assemble(
    ctx: &Ctx,
    file: &FileConfig,
    changes: &mpsc::UnboundedSender<ToolsetChanged>,
    llm: &Option<Arc<dyn Complete>>,
    rules: approval::ApprovalRules,
) -> (Arc<McpHub>, Registry) {
    let hub = Arc::new(
        McpHub::start(
            &file.mcp_servers,
            &ctx.metrics.tools,
            changes.clone(),
            llm.clone(),
            Arc::new(rules.clone()),
        )
        .await,
    );
    let registry = default_registry(&file.tools)
        .with_mcp(hub.clone())
        .with_approvals(rules);
    (hub, registry)
}

/// Replace the registry entries of the built-in toolset and of every MCP server of
/// `servers` (and of `gone`, servers no longer configured) with what `registry` holds.
async fn publish_all(
    ctx: &Ctx,
    registry: &Registry,
    servers: &BTreeMap<String, McpServerSettings>,
    gone: &[String],
) -> anyhow::Result<()> {
    let mut toolsets = vec![builtin::TOOLSET.to_owned()];
    toolsets.extend(McpHub::toolsets(servers));
    toolsets.extend(gone.iter().map(|s| mcp::naming::toolset(s)));
    let toolsets: Vec<&str> = toolsets.iter().map(String::as_str).collect();
    let mut client = ctx.db.get().await?;
    tool_registry::publish(&mut client, &toolsets, &registry.specs()).await?;
    tracing::info!(
        tools = registry.specs().len(),
        "tools published to the registry"
    );
    Ok(())
}

/// The registry at start: every toolset but the built-ins and the enabled servers' removed
/// (a server dropped from the configuration leaves nothing behind), the built-ins
/// published. The servers' own entries stay until each server connects and replaces them:
/// another replica may be serving them right now.
async fn publish_at_start(
    ctx: &Ctx,
    builtins: &Registry,
    servers: &BTreeMap<String, McpServerSettings>,
) -> anyhow::Result<()> {
    let mut keep = vec![builtin::TOOLSET.to_owned()];
    keep.extend(McpHub::enabled_toolsets(servers));
    let keep: Vec<&str> = keep.iter().map(String::as_str).collect();
    let mut client = ctx.db.get().await?;
    let removed = tool_registry::retain(&mut client, &keep).await?;
    if removed > 0 {
        tracing::info!(
            removed,
            "tools of servers no longer configured removed from the registry"
        );
    }
    let specs = builtins.builtin_specs();
    tool_registry::publish(&mut client, &[builtin::TOOLSET], &specs).await?;
    tracing::info!(
        tools = specs.len(),
        "built-in tools published to the registry"
    );
    Ok(())
}

/// Run the tools stage until `ctx.stop`.
pub async fn run(ctx: Ctx) -> anyhow::Result<()> {
    // Every refusal reason's series starts at 0, so alerts see it before the first refusal.
    for reason in policy::RefusalReason::ALL {
        ctx.metrics
            .tools
            .refusals
            .with_label_values(&[reason.as_str()]);
    }
    let operator = &ctx.metrics.operator;
    operator.approvals.with_label_values(&["requested"]);
    for verdict in hermes_types::model::Verdict::ALL {
        operator.approvals.with_label_values(&[verdict.as_str()]);
    }
    for outcome in RELOAD_OUTCOMES {
        ctx.metrics.tools.reloads.with_label_values(&[outcome]);
    }
    let (changes_tx, changes) = mpsc::unbounded_channel();
    let tools = ctx.config.tools.clone();
    let servers = ctx.config.mcp_servers.clone();
    // MCP sampling goes through the same gateway as every model call; without a usable
    // provider the servers are told this client cannot sample.
    let llm: Option<Arc<dyn Complete>> = match hermes_gateway::Gateway::new(&ctx) {
        Ok(gateway) => Some(Arc::new(GatewaySampling::new(gateway, ctx.config.clone()))),
        Err(e) => {
            tracing::warn!(error = %e, "MCP sampling is off: no model provider is usable");
            None
        }
    };
    // Built-ins at once; each MCP server publishes its tools when it connects, through
    // `changes`, so a slow or absent server delays nothing.
    let builtins = default_registry(&tools);
    // A gate that names nothing would leave the tool it meant ungated: refuse to start.
    let rules = approval_rules(&tools, &servers, &builtins).map_err(|e| anyhow::anyhow!(e))?;
    let builtins = builtins.with_approvals(rules.clone());
    publish_at_start(&ctx, &builtins, &servers).await?;
    ctx.readiness.done(REGISTRY_PUBLISHED);
    let publisher = tokio::spawn(publish_changes(ctx.clone(), changes));
    let hub = Arc::new(McpHub::spawn(
        &servers,
        &ctx.metrics.tools,
        changes_tx.clone(),
        llm.clone(),
        Arc::new(rules),
    ));
    let registry = Arc::new(RwLock::new(builtins.with_mcp(hub.clone())));
    let discovery = tokio::spawn(announce_discovery(ctx.clone(), hub.clone()));

    let (reload_tx, reload_rx) = mpsc::channel(1);
    reload::spawn_listener(
        &ctx.db,
        ctx.config.namespace.as_str().to_owned(),
        reload_tx,
        ctx.stop.clone(),
    );
    let reloader = tokio::spawn(reload_loop(
        ctx.clone(),
        registry.clone(),
        hub,
        servers,
        changes_tx,
        llm,
        reload_rx,
    ));
    let watch = tokio::spawn(approval_watch::run(ctx.clone()));
    let presence = tokio::spawn(forge_presence::run(ctx.clone(), registry.clone()));
    stage::run(ctx.clone(), ToolStage::new(ctx, registry.clone())?).await;
    // Presence sends OFFLINE on the Forge's session, so it ends before the sessions do.
    if let Err(e) = presence.await {
        tracing::warn!(error = %e, "Forge presence ended abnormally");
    }
    watch.abort();
    discovery.abort();
    reloader.abort();
    publisher.abort();
    sync::read(&registry).shutdown();
    Ok(())
}

/// Mark [`MCP_DISCOVERED`] done once every enabled server's first discovery is in the
/// registry or failed, or when `HERMES_TOOLS_READY_TIMEOUT` has passed, naming the servers
/// still missing then (they publish when they connect, as after any restart).
async fn announce_discovery(ctx: Ctx, hub: Arc<McpHub>) {
    let bound = ctx.config.tools.ready_timeout;
    let missing = hub.discovered_within(bound).await;
    if !missing.is_empty() {
        tracing::warn!(
            servers = ?missing,
            timeout = ?bound,
            "ready without these MCP servers' tools: no first discovery within HERMES_TOOLS_READY_TIMEOUT"
        );
    }
    ctx.readiness.done(MCP_DISCOVERED);
}

/// What became of a reload request (the `outcome` of `hermes_tools_reloads_total`).
const RELOAD_OUTCOMES: [&str; 3] = ["applied", "invalid", "no_config_file"];

/// Apply each reload request: re-read the file; when it is valid, start the new servers,
/// publish, swap the registry, then stop the old servers. An invalid file changes nothing.
async fn reload_loop(
    ctx: Ctx,
    registry: Arc<RwLock<Registry>>,
    mut hub: Arc<McpHub>,
    mut servers: BTreeMap<String, McpServerSettings>,
    changes: mpsc::UnboundedSender<ToolsetChanged>,
    llm: Option<Arc<dyn Complete>>,
    mut requests: mpsc::Receiver<()>,
) {
    while requests.recv().await.is_some() {
        let Some(path) = ctx.config.config_path.as_deref() else {
            tracing::warn!(
                "tools reload asked, but this replica was started without a configuration file"
            );
            reloaded(&ctx, "no_config_file");
            continue;
        };
        let file = match FileConfig::reread(path) {
            Ok(file) => file,
            Err(problems) => {
                tracing::warn!(
                    problems = problems.join("; "),
                    "tools reload refused: the configuration is invalid; keeping the current one"
                );
                reloaded(&ctx, "invalid");
                continue;
            }
        };
        let rules = match approval_rules(
            &file.tools,
            &file.mcp_servers,
            &default_registry(&file.tools),
        ) {
            Ok(rules) => rules,
            Err(problem) => {
                tracing::warn!(
                    problems = problem,
                    "tools reload refused: the configuration is invalid; keeping the current one"
                );
                reloaded(&ctx, "invalid");
                continue;
            }
        };
        let (new_hub, new_registry) = assemble(&ctx, &file, &changes, &llm, rules).await;
        let gone: Vec<String> = servers
            .keys()
            .filter(|n| !file.mcp_servers.contains_key(*n))
            .cloned()
            .collect();
        if let Err(e) = publish_all(&ctx, &new_registry, &file.mcp_servers, &gone).await {
            tracing::warn!(error = %e, "reloaded tools not published");
        }
        *sync::write(&registry) = new_registry;
        hub.shutdown();
        hub = new_hub;
        servers = file.mcp_servers;
        tracing::info!(servers = servers.len(), "tools configuration reloaded");
        reloaded(&ctx, "applied");
    }
}

fn reloaded(ctx: &Ctx, outcome: &str) {
    ctx.metrics
        .tools
        .reloads
        .with_label_values(&[outcome])
        .inc();
}

/// Publish each MCP toolset whose tools changed after start (`list_changed`, a restart
/// that found a different list).
async fn publish_changes(ctx: Ctx, mut changes: mpsc::UnboundedReceiver<ToolsetChanged>) {
    while let Some(change) = changes.recv().await {
        let result = async {
            let mut client = ctx.db.get().await?;
            tool_registry::publish(&mut client, &[&change.toolset], &change.specs).await?;
            anyhow::Ok(())
        }
        .await;
        // Tried, whatever the outcome: a first discovery no longer holds readiness.
        if let Some(flag) = &change.published {
            flag.send_replace(true);
        }
        match result {
            Ok(()) => tracing::info!(
                toolset = change.toolset,
                tools = change.specs.len(),
                "toolset republished"
            ),
            Err(e) => {
                tracing::warn!(toolset = change.toolset, error = %e, "toolset not republished")
            }
        }
    }
}
