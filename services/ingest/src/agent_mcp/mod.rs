//! The agent MCP surface (docs/agents.md, "The agent's side"): how an external agent, woken
//! by a signed webhook, pulls its inbox and answers through Hermes. Two transports over the
//! same tools, both Bearer-authenticated with a key linked to the agent (or a short-lived JWT
//! naming it, [`jwt`]): JSON-RPC 2.0
//! speaking MCP over streamable HTTP (`POST /api/mcp/rpc`, [`rpc`]) and a REST alias
//! (`POST /api/mcp/{tool}`, [`rest`]). Nothing is kept between requests, so any ingest
//! replica serves any call.

mod auth;
mod errors;
pub mod jwt;
mod rest;
mod rpc;
mod tools;

use crate::routes::{Surface, Verb};

/// The surface's routes.
pub fn surface() -> Surface {
    Surface::default()
        .route(Verb::Post, "/api/mcp/rpc", rpc::handle)
        .route(Verb::Get, "/api/mcp/rpc", rpc::not_allowed)
        .route(Verb::Delete, "/api/mcp/rpc", rpc::not_allowed)
        .route(Verb::Post, "/api/mcp/{tool}", rest::handle)
}
