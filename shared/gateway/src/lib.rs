//! hermes-gateway: the one way the fleet calls a model. Provider adapters (one folder each),
//! the backend and failover chain of a tier, budgets and spend, the response cache, and the
//! embeddings client. The llm stage serves runs through it; the tools stage answers MCP
//! sampling requests through it.

pub mod backends;
pub mod budget;
pub mod chain;
pub mod embeddings;
pub mod gateway;
pub mod providers;
pub mod response_cache;
mod spans;

pub use gateway::Gateway;

/// Said to the user when no backend could answer; the credit is not spent.
pub const RETRY_MESSAGE: &str =
    "Sorry, I couldn't get an answer right now. Please try again in a moment.";
