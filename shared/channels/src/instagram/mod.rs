//! Instagram, through Meta's Instagram Messaging API
//! (<https://developers.facebook.com/docs/messenger-platform/instagram>).
//!
//! The outbound side: [`send`] and [`limits`]. Its files come as URLs, fetched as they are
//! (no credential, [`crate::media`]); it has no typing indicator Hermes uses, and its error
//! codes are Meta's ([`crate::meta::errors`]).

pub mod limits;
pub mod send;

pub use limits::LIMITS;
pub use send::Instagram;
