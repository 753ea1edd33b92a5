//! Tools built into Hermes.

mod current_time;

pub use current_time::CurrentTime;

/// The toolset name of the built-in tools.
pub const TOOLSET: &str = "builtin";
