//! The tools the router may offer a model, read from the registry the tools service
//! publishes and kept in memory for a short while (the registry changes rarely).

use std::time::Duration;

use hermes_db::{Client, DbError, tool_registry};
use hermes_types::model::ToolSpec;
use hermes_types::ttl_cache::TtlCache;
use tokio::sync::Mutex;

const TTL: Duration = Duration::from_secs(30);

/// A short-lived in-memory copy of the tool registry.
pub struct ToolCatalog {
    cached: TtlCache<(), Vec<ToolSpec>>,
    /// Held while the copy is refreshed, so concurrent messages that find it stale wait for
    /// one read of the registry instead of each making their own.
    loading: Mutex<()>,
}

impl ToolCatalog {
    pub fn new() -> Self {
        Self {
            cached: TtlCache::new(TTL, 1),
            loading: Mutex::new(()),
        }
    }

    /// The registry, read through `client` when the copy is stale: the caller's connection,
    /// so a message never holds one pooled connection while waiting for a second.
    pub async fn tools(&self, client: &Client) -> Result<Vec<ToolSpec>, DbError> {
        let _loading = self.loading.lock().await;
        if let Some(tools) = self.cached.get(&()) {
            return Ok(tools);
        }
        let tools = tool_registry::list(client).await?;
        self.cached.insert((), tools.clone());
        Ok(tools)
    }
}
