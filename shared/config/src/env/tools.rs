//! The tools service's start-up (docs/tools-and-mcp.md, "The registry"): how long its
//! readiness waits for the configured MCP servers' first discovery.

use std::time::Duration;

use super::Unset::Value;
use super::{kinds, settings};

settings! {
    /// The tools service.
    SETTINGS = [
        HERMES_TOOLS_READY_TIMEOUT: Duration {
            kind: kinds::DURATION,
            unset: Value("30s"),
            secret: false,
            help: "how long a process running the tools stage stays unready while its enabled MCP servers make their first discovery (tools listed and published to the registry, or the attempt failed); past it, it turns ready with the servers still missing and says which (`10s`, `1m`)",
        },
    ]
}
