//! Tools built into Hermes.

mod current_time;
pub mod delegate_task;
mod http_fetch;

pub use current_time::CurrentTime;
pub use delegate_task::DelegateTask;
pub use http_fetch::HttpFetch;

/// The toolset name of the built-in tools.
pub const TOOLSET: &str = "builtin";
