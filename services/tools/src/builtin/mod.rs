//! Tools built into Hermes.

mod current_time;
mod http_fetch;

pub use current_time::CurrentTime;
pub use http_fetch::HttpFetch;

/// The toolset name of the built-in tools.
pub const TOOLSET: &str = "builtin";
