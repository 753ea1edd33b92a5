//! The router: the embeddings endpoint of semantic recall and the Fernet keyrings of the
//! session-history cache and of agent webhook secrets; the bound of the stuck-run sweeper.

use std::time::Duration;

use secrecy::SecretString;
use url::Url;

use super::Unset::{Means, Value};
use super::{kinds, settings};

settings! {
    /// Recall and encryption keys.
    SETTINGS = [
        HERMES_EMBEDDINGS_URL: Url {
            kind: kinds::HTTP_URL,
            unset: Means("(none: recall off)"),
            secret: false,
            help: "base URL of an OpenAI-compatible embeddings endpoint for semantic recall, e.g. `https://api.openai.com/v1`",
        },
        HERMES_EMBEDDINGS_API_KEY: SecretString {
            kind: kinds::SECRET,
            unset: Means("(none)"),
            secret: true,
            help: "Bearer key of the embeddings endpoint",
        },
        HERMES_SESSION_KEYS: Vec<SecretString> {
            kind: kinds::FERNET_KEYS,
            unset: Means("(none: history from PostgreSQL)"),
            secret: true,
            help: "comma-separated Fernet keys of the session-history cache, newest first (generate one with `python3 -c 'from cryptography.fernet import Fernet; print(Fernet.generate_key().decode())'`)",
        },
        HERMES_SECRET_KEYS: Vec<SecretString> {
            kind: kinds::FERNET_KEYS,
            unset: Means("(none: external agents cannot be created)"),
            secret: true,
            help: "comma-separated Fernet keys that seal agent webhook secrets at rest, newest first; needed to create external agents",
        },
        HERMES_RUN_STUCK_AFTER_SECS: Duration {
            kind: kinds::SECS_ABOVE_ZERO,
            unset: Value("900"),
            secret: false,
            help: "a run still open this long after it was created is ended by the router's sweeper: failed, refunded, its chat told",
        },
    ]
}
