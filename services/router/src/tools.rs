//! The tools the router may offer a model, read from the registry the tools service
//! publishes and kept in memory for a short while (the registry changes rarely).

use std::time::{Duration, Instant};

use hermes_shared::db::{Db, DbError, tool_registry};
use hermes_shared::model::ToolSpec;
use tokio::sync::Mutex;

const TTL: Duration = Duration::from_secs(30);

/// A short-lived in-memory copy of the tool registry.
pub struct ToolCatalog {
    db: Db,
    cached: Mutex<Option<(Instant, Vec<ToolSpec>)>>,
}

impl ToolCatalog {
    pub fn new(db: Db) -> Self {
        Self {
            db,
            cached: Mutex::new(None),
        }
    }

    pub async fn tools(&self) -> Result<Vec<ToolSpec>, DbError> {
        let mut cached = self.cached.lock().await;
        if let Some((at, tools)) = cached.as_ref()
            && at.elapsed() < TTL
        {
            return Ok(tools.clone());
        }
        let tools = tool_registry::list(&self.db.get().await?).await?;
        *cached = Some((Instant::now(), tools.clone()));
        Ok(tools)
    }
}
