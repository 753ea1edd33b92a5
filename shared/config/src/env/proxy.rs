//! Proxy mode (docs/api.md, "Proxy mode"): an edge install that forwards every accepted
//! message to another Hermes's REST channel instead of routing it, and delivers the answers
//! that come back.

use secrecy::SecretString;
use url::Url;

use super::Unset::Means;
use super::{kinds, settings};

settings! {
    /// Proxy mode: where an edge install forwards its messages.
    SETTINGS = [
        GATEWAY_PROXY_URL: Url {
            kind: kinds::HTTP_URL,
            unset: Means("(none: this install routes its own messages)"),
            secret: false,
            help: "base URL of the Hermes API this install forwards every accepted message to (its `POST /v1/messages`), instead of routing it; needs GATEWAY_PROXY_KEY and GATEWAY_PROXY_SECRET",
        },
        GATEWAY_PROXY_KEY: SecretString {
            kind: kinds::SECRET,
            unset: Means("(none)"),
            secret: true,
            help: "the upstream's API key this install forwards with: a REST key whose callback URL is this install's `/proxy/replies`",
        },
        GATEWAY_PROXY_SECRET: SecretString {
            kind: kinds::SECRET,
            unset: Means("(none)"),
            secret: true,
            help: "that key's callback signing secret (`whsec_…`), which verifies the answers the upstream posts to `/proxy/replies`",
        },
    ]
}
