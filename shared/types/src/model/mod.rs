//! The domain payloads that travel between stages, and the small enums they use.
//!
//! These are the contract between services: the router never sees platform fields, the
//! llm stage never sees HTTP, delivery never sees providers.

mod approval;
mod calls;
mod chat;
pub mod delegation;
mod forge;
mod inbound;
mod interaction;
mod jobs;
mod kinds;
mod llm;
pub mod parked;
mod reply;
mod schedule_text;
mod scheduled;

pub use approval::*;
pub use calls::*;
pub use chat::*;
pub use forge::*;
pub use inbound::*;
pub use interaction::*;
pub use jobs::*;
pub use kinds::*;
pub use llm::*;
pub use reply::*;
pub use scheduled::*;
