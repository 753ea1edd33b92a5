//! The tools the router may offer a model, read from the registry the tools service
//! publishes and kept in memory for a short while (the registry changes rarely).

use std::time::{Duration, Instant};

use hermes_db::{Client, DbError, tool_registry};
use hermes_types::model::ToolSpec;
use tokio::sync::Mutex;

const TTL: Duration = Duration::from_secs(30);

/// A short-lived in-memory copy of the tool registry.
pub struct ToolCatalog {
    cached: Mutex<Option<(Instant, Vec<ToolSpec>)>>,
}

impl ToolCatalog {
    pub fn new() -> Self {
        Self {
            cached: Mutex::new(None),
        }
    }

    /// The registry, read through `client` when the copy is stale: the caller's connection,
    /// so a message never holds one pooled connection while waiting for a second.
    pub async fn tools(&self, client: &Client) -> Result<Vec<ToolSpec>, DbError> {
        let mut cached = self.cached.lock().await;
        if let Some((at, tools)) = cached.as_ref()
            && at.elapsed() < TTL
        {
            return Ok(tools.clone());
        }
        let tools = tool_registry::list(client).await?;
        *cached = Some((Instant::now(), tools.clone()));
        Ok(tools)
    }
}
