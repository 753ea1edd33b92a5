//! End-to-end tests of the fleet through its public surfaces, against the real servers.

mod bus;
mod channels;
mod ingest;
mod lifecycle;
mod llm;
mod outbox;
mod rest;
mod router;
mod streaming;
mod thin_path;
mod tools;
