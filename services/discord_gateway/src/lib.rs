//! placeholder
pub mod protocol;
pub mod session;
