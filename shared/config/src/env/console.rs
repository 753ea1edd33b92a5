//! The operator console (docs/console.md): whether ingest serves it, and how long a login
//! lasts.

use std::time::Duration;

use super::Unset::Value;
use super::{kinds, settings};

settings! {
    /// The operator console.
    SETTINGS = [
        HERMES_CONSOLE: bool {
            kind: kinds::BOOL,
            unset: Value("false"),
            secret: false,
            help: "serve the operator console at `/console` (off: the path answers 404)",
        },
        HERMES_CONSOLE_SESSION_SECS: Duration {
            kind: kinds::SECS_POSITIVE,
            unset: Value("28800"),
            secret: false,
            help: "how long a console login lasts before the operator logs in again",
        },
    ]
}
