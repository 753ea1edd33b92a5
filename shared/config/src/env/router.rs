//! The router: the embeddings endpoint of semantic recall and the Fernet keyrings of the
//! session-history cache and of agent webhook secrets; the bound of the stuck-run sweeper;
//! how external agents' runs are woken again and when a silent agent counts as offline; the
//! quiet window that coalesces a burst of chat messages into one turn; the weekly dreaming
//! engine.

use std::time::Duration;

use hermes_types::model::Tier;
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
            help: "a run still open this long after it was created (an external agent's run: this long after its reply deadline) is ended by the router's sweeper: failed, refunded, its chat told",
        },
        HERMES_AGENT_REWAKE_DELAYS: Vec<Duration> {
            kind: kinds::DURATION_LIST,
            unset: Value("1m,5m"),
            secret: false,
            help: "an external agent's run it has not acknowledged is woken again after each of these delays (each counted from the previous wake, one re-wake per entry, e.g. 1m,5m; `none`: never), while its reply deadline is ahead",
        },
        HERMES_AGENT_PRESENCE_SECS: Duration {
            kind: kinds::SECS_ABOVE_ZERO,
            unset: Value("900"),
            secret: false,
            help: "an external agent with no 2xx to a wake and no heartbeat for this long is OFFLINE: dispatch passes it over and the router marks it so",
        },
        HERMES_BURST_QUIET_MS: Duration {
            kind: kinds::MILLIS,
            unset: Value("0"),
            secret: false,
            help: "bursts: a chat message is held until its conversation (one sender in one chat) has been quiet this long, then every held message is answered as one turn; 0 turns bursts off (docs/channels.md, bursts)",
        },
        HERMES_BURST_MAX_WAIT_MS: Duration {
            kind: kinds::MILLIS,
            unset: Value("10000"),
            secret: false,
            help: "bursts: the longest the first held message of a conversation waits, however the messages keep coming",
        },
        HERMES_DREAMING: bool {
            kind: kinds::BOOL,
            unset: Value("true"),
            secret: false,
            help: "the dreaming engine: once an ISO week is over, each user who talked in it gets one model call, metered against them, that writes a weekly insight and up to 3 knowledge gaps for the soul (docs/models-and-budgets.md, the dreaming engine); false: no dreams",
        },
        HERMES_DREAMING_TIER: Tier {
            kind: kinds::TIER,
            unset: Means("(the user's own tier)"),
            secret: false,
            help: "dreaming: the tier whose model chain dreams (free, starter, pro or venue-growth), e.g. a cheap one for every user",
        },
        HERMES_DREAMING_CHECK_SECS: Duration {
            kind: kinds::SECS_ABOVE_ZERO,
            unset: Value("3600"),
            secret: false,
            help: "dreaming: how often each router replica looks for users of the week just over who have not dreamt yet (so a dream comes at most this long after Monday 00:00 UTC)",
        },
        HERMES_DREAMING_TIMEOUT_SECS: Duration {
            kind: kinds::SECS_ABOVE_ZERO,
            unset: Value("120"),
            secret: false,
            help: "dreaming: bound of one user's dream call; past it the week is given up as failed",
        },
        HERMES_DREAMING_MAX_TURNS: usize {
            kind: kinds::COUNT_POSITIVE,
            unset: Value("200"),
            secret: false,
            help: "dreaming: most messages of the week (the newest) a dream reads",
        },
        HERMES_DREAMING_MAX_CHARS: usize {
            kind: kinds::COUNT_POSITIVE,
            unset: Value("24000"),
            secret: false,
            help: "dreaming: most characters of the week's messages a dream reads (the newest kept; one long message is cut)",
        },
    ]
}
