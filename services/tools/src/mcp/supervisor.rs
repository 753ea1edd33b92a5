//! Keeps one server connected for this replica: connects (bounded by `connect_timeout`),
//! discovers its tools, refreshes them on `notifications/tools/list_changed`, notices when
//! the session ends (a stdio child dying) and reconnects with exponential backoff.

use std::sync::Arc;
use std::time::Duration;

use backon::{BackoffBuilder, ExponentialBuilder};
use hermes_types::model::ToolSpec;
use tokio::sync::{mpsc, watch};
use tokio_util::sync::CancellationToken;

use super::client::{self, McpConnection};
use super::server::McpServer;

/// How often a live session is checked for having ended.
const LIVENESS_POLL: Duration = Duration::from_millis(200);

/// A server's tools changed: publish `specs` as its toolset.
#[derive(Debug)]
pub struct ToolsetChanged {
    pub toolset: String,
    pub specs: Vec<ToolSpec>,
    /// The server's first discovery carries its readiness flag: the publisher turns it true
    /// once the list is in the registry (tried, whatever the outcome). A change dropped
    /// unpublished drops the flag, which counts as done.
    pub published: Option<watch::Sender<bool>>,
}

fn backoff() -> impl Iterator<Item = Duration> {
    ExponentialBuilder::default()
        .with_min_delay(Duration::from_millis(250))
        .with_max_delay(Duration::from_secs(30))
        .with_jitter()
        .without_max_times()
        .build()
}

/// Supervise `server` until `stop`. `first_attempt` turns true once the first connection
/// attempt (and its discovery) is over, successful or not; `discovered` once that discovery
/// is also published to the registry, or the attempt failed (the readiness of the tools
/// stage, docs/tools-and-mcp.md, "The registry").
pub async fn supervise(
    server: Arc<McpServer>,
    changes: mpsc::UnboundedSender<ToolsetChanged>,
    first_attempt: watch::Sender<bool>,
    discovered: watch::Sender<bool>,
    stop: CancellationToken,
) {
    let mut discovered = Some(discovered);
    let mut delays = backoff();
    loop {
        let (tx, mut tools_changed) = mpsc::unbounded_channel();
        let attempt = tokio::time::timeout(
            server.settings.connect_deadline(),
            client::connect(&server.name, &server.settings, tx, server.sampler.clone()),
        );
        let session = tokio::select! {
            _ = stop.cancelled() => return,
            r = attempt => r,
        };
        match session {
            Ok(Ok(session)) => {
                let session = Arc::new(session);
                server.attach(session.clone());
                tracing::info!(server = server.name, "MCP server connected");
                refresh(&server, &session, &changes, discovered.take()).await;
                first_attempt.send_replace(true);
                delays = backoff();
                loop {
                    tokio::select! {
                        _ = stop.cancelled() => {
                            if let Some(s) = server.detach() {
                                drop(session);
                                if let Ok(s) = Arc::try_unwrap(s) {
                                    s.close().await;
                                }
                            }
                            return;
                        }
                        Some(()) = tools_changed.recv() => {
                            // A burst of notifications needs one refresh.
                            while tools_changed.try_recv().is_ok() {}
                            refresh(&server, &session, &changes, None).await;
                        }
                        _ = tokio::time::sleep(LIVENESS_POLL) => {
                            if session.is_closed() {
                                break;
                            }
                        }
                    }
                }
                server.detach();
                tracing::warn!(server = server.name, "MCP server session ended; restarting");
            }
            Ok(Err(e)) => {
                tracing::warn!(server = server.name, error = %e, "MCP server connection failed");
                first_attempt.send_replace(true);
                settle(&mut discovered);
            }
            Err(_) => {
                tracing::warn!(
                    server = server.name,
                    timeout = ?server.settings.connect_deadline(),
                    "MCP server did not connect in time"
                );
                first_attempt.send_replace(true);
                settle(&mut discovered);
            }
        }
        let delay = delays.next().unwrap_or(Duration::from_secs(30));
        tokio::select! {
            _ = stop.cancelled() => return,
            _ = tokio::time::sleep(delay) => {}
        }
    }
}

/// The first attempt is over without a list to publish: the server is done with readiness.
fn settle(discovered: &mut Option<watch::Sender<bool>>) {
    if let Some(flag) = discovered.take() {
        flag.send_replace(true);
    }
}

/// List the server's tools and hand a changed list to the publisher, with `discovered`
/// (the first discovery's readiness flag) for it to settle once published.
async fn refresh(
    server: &McpServer,
    session: &McpConnection,
    changes: &mpsc::UnboundedSender<ToolsetChanged>,
    mut discovered: Option<watch::Sender<bool>>,
) {
    match server.refresh(session).await {
        Ok(Some(specs)) => {
            tracing::info!(
                server = server.name,
                tools = specs.len(),
                "MCP tools discovered"
            );
            let _ = changes.send(ToolsetChanged {
                toolset: server.toolset(),
                specs,
                published: discovered,
            });
        }
        Ok(None) => settle(&mut discovered),
        Err(e) => {
            tracing::warn!(server = server.name, error = %e, "MCP tool discovery failed");
            settle(&mut discovered);
        }
    }
}
