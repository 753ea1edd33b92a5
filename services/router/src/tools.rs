//! The tools the router may offer a model, read from the registry the tools service
//! publishes. The copy in memory is kept until the registry changes: every publication sends
//! `NOTIFY hermes_tool_registry`, which this router listens for, so a change is seen by the
//! next message (docs/tools-and-mcp.md, "The registry"). While the `LISTEN` connection is
//! not established the copy is trusted for [`UNLISTENED_TTL`] only.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use hermes_db::{Client, Db, DbError, ListenEvent, tool_registry};
use hermes_types::model::ToolSpec;
use tokio::sync::Mutex;
use tokio_util::sync::CancellationToken;

/// How long the copy is trusted when no notification could tell of a change.
pub const UNLISTENED_TTL: Duration = Duration::from_secs(1);

/// The registry as last read, with the generation of notifications it reflects.
struct Copy {
    generation: u64,
    read_at: Instant,
    tools: Vec<ToolSpec>,
}

/// An in-memory copy of the tool registry, dropped whenever the registry changes.
pub struct ToolCatalog {
    /// Held while the copy is read or refreshed, so concurrent messages that find it stale
    /// wait for one read of the registry instead of each making their own.
    copy: Mutex<Option<Copy>>,
    /// Bumped by every notification (and every (re)connection of the listener, which may
    /// have missed some): a copy of an older generation is stale.
    generation: Arc<AtomicU64>,
    listening: Arc<AtomicBool>,
}

impl ToolCatalog {
    /// A catalog whose copy nothing invalidates but its [`UNLISTENED_TTL`] (see
    /// [`ToolCatalog::listening`]).
    pub fn new() -> Self {
        Self {
            copy: Mutex::new(None),
            generation: Arc::new(AtomicU64::new(0)),
            listening: Arc::new(AtomicBool::new(false)),
        }
    }

    /// A catalog kept current by a `LISTEN` on the registry's channel until `stop`.
    pub fn listening(db: &Db, stop: CancellationToken) -> Self {
        let catalog = Self::new();
        let (generation, listening) = (catalog.generation.clone(), catalog.listening.clone());
        hermes_db::listen(db, tool_registry::CHANNEL, stop, move |event| {
            if let ListenEvent::Listening { .. } = event {
                listening.store(true, Ordering::SeqCst);
            }
            // A change, or a (re)connection after which changes may have been missed.
            generation.fetch_add(1, Ordering::SeqCst);
        });
        catalog
    }

    /// The registry, read through `client` when the copy is stale: the caller's connection,
    /// so a message never holds one pooled connection while waiting for a second.
    pub async fn tools(&self, client: &Client) -> Result<Vec<ToolSpec>, DbError> {
        let mut copy = self.copy.lock().await;
        let generation = self.generation.load(Ordering::SeqCst);
        let trusted = if self.listening.load(Ordering::SeqCst) {
            Duration::MAX
        } else {
            UNLISTENED_TTL
        };
        if let Some(c) = copy.as_ref()
            && c.generation == generation
            && c.read_at.elapsed() < trusted
        {
            return Ok(c.tools.clone());
        }
        // The generation is taken before the read: a change committed during the read
        // bumps it, so this copy is read again next time rather than kept.
        let tools = tool_registry::list(client).await?;
        *copy = Some(Copy {
            generation,
            read_at: Instant::now(),
            tools: tools.clone(),
        });
        Ok(tools)
    }
}
