//! The chat platforms, one folder each (docs/development.md, "Adding a chat platform").
//!
//! Everything a platform does differently lives in its folder: how its webhooks are
//! verified and parsed, how a reply is sent and split to its limits, where its files are
//! fetched from, how it shows presence, what its statuses and error codes mean, and its
//! configuration section. Ingest, delivery, media and presence stay generic: they call a
//! platform only through the traits in this crate's root, and find it by [`Platform`].
//!
//! [`Platform`]: hermes_types::model::Platform

pub mod instagram;
pub mod rest;
pub mod telegram;
pub mod whatsapp;
