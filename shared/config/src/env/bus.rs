//! The bus: consumer concurrency, group commit, the outbox marker's window, the delivery
//! limit that parks poison, publisher confirms, frame size, reconnects, queue expiry and the
//! queued retries.

use std::time::Duration;

use super::Unset::{Means, Value};
use super::{kinds, settings};

settings! {
    /// RabbitMQ and the stage loop.
    SETTINGS = [
        HERMES_PREFETCH: u16 {
            kind: kinds::U16_POSITIVE,
            unset: Value("32"),
            secret: false,
            help: "unacknowledged messages per consumer (its concurrency)",
        },
        HERMES_COMMIT_GROUP: usize {
            kind: kinds::COUNT_POSITIVE,
            unset: Value("16"),
            secret: false,
            help: "most messages the router commits in one PostgreSQL transaction (group commit); `1` commits each alone",
        },
        HERMES_OUTBOX_MARK_GATHER_MS: Duration {
            kind: kinds::MILLIS,
            unset: Value("50"),
            secret: false,
            help: "how long the outbox marker lets the rows a process's stages published gather before marking them in one statement. Nobody waits for a mark, so a longer window costs nothing but memory and saves statements under load; a process killed meanwhile leaves its rows to the relay, which publishes them again after their hold (consumers skip the copies)",
        },
        HERMES_DELIVERY_LIMIT: u32 {
            kind: kinds::U32_POSITIVE,
            unset: Value("5"),
            secret: false,
            help: "deliveries of one message before it is parked in its `.dead` queue",
        },
        HERMES_PUBLISH_WINDOW: usize {
            kind: kinds::COUNT_POSITIVE,
            unset: Value("512"),
            secret: false,
            help: "publishes awaiting broker confirms at once",
        },
        HERMES_AMQP_FRAME_MAX: u32 {
            kind: kinds::AMQP_FRAME,
            unset: Value("16384"),
            secret: false,
            help: "largest AMQP frame, in bytes (at least 4096), each connection asks the broker for; a larger message travels in several frames. The client keeps two buffers of 32 frames per connection and a process has two connections, so this sets most of an idle process's memory: the broker's default of 131072 costs 16 MiB. A `frame_max` in AMQP_URL wins",
        },
        HERMES_BUS_RECONNECT_SECS: Duration {
            kind: kinds::SECS,
            unset: Value("60"),
            secret: false,
            help: "how long to try to reconnect to RabbitMQ before exiting non-zero",
        },
        HERMES_QUEUE_EXPIRES_SECS: Duration {
            kind: kinds::SECS_ABOVE_ZERO,
            unset: Means("(never)"),
            secret: false,
            help: "delete queues unused this long (for throw-away namespaces such as tests)",
        },
        HERMES_DELIVERY_RETRY_DELAYS: Vec<Duration> {
            kind: kinds::SECS_LIST,
            unset: Value("60,300,1500"),
            secret: false,
            help: "seconds a failed delivery or agent webhook waits before each queued retry (one wait queue per delay); after the last it is parked. Also how many times a part WhatsApp reports failed after accepting it is sent again before its reply is parked",
        },
        HERMES_WAIT_QUEUE_MAX_LENGTH: u32 {
            kind: kinds::U32_POSITIVE,
            unset: Value("100000"),
            secret: false,
            help: "most messages one retry wait queue holds; beyond it the broker refuses and the failing message stays in its work queue (a flood cannot fill the broker's disk)",
        },
        HERMES_PUBLISH_TIMEOUT_SECS: Duration {
            kind: kinds::SECS_ABOVE_ZERO,
            unset: Value("10"),
            secret: false,
            help: "bound of one publish, from handing the message to the broker to its confirm: a broker that blocks publishers (memory or disk alarm) makes it fail instead of hanging ingest and the relay",
        },
        HERMES_INBOUND_DELAY_SECS: Duration {
            kind: kinds::SECS_ABOVE_ZERO,
            unset: Value("30"),
            secret: false,
            help: "how long a chat message over its sender's inbound rate waits (in the router's slow lane) before it is routed; it is delayed, never dropped",
        },
    ]
}
