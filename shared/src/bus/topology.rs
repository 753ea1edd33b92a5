//! Queue and exchange names under the namespace, and their declaration (DESIGN §4).
//!
//! One direct work exchange `{ns}.work` routes by stage name to the quorum work queues
//! `{ns}.<stage>`; each work queue dead-letters (at-least-once) through `{ns}.dead` into
//! its parking queue `{ns}.<stage>.dead`. Declarations are idempotent and run at start and
//! after every reconnect.

use std::fmt;
use std::time::Duration;

use lapin::options::{ExchangeDeclareOptions, QueueBindOptions, QueueDeclareOptions};
use lapin::types::{AMQPValue, FieldTable, LongString, ShortString};
use lapin::{Channel, ExchangeKind};

use crate::config::{BusSettings, Namespace};

/// A stage of the pipeline, each with its own work queue.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Stage {
    Router,
    Llm,
    Tools,
    Delivery,
    Webhooks,
}

impl Stage {
    pub const ALL: [Stage; 5] = [
        Stage::Router,
        Stage::Llm,
        Stage::Tools,
        Stage::Delivery,
        Stage::Webhooks,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Stage::Router => "router",
            Stage::Llm => "llm",
            Stage::Tools => "tools",
            Stage::Delivery => "delivery",
            Stage::Webhooks => "webhooks",
        }
    }

    pub fn parse(s: &str) -> Option<Stage> {
        Stage::ALL.into_iter().find(|st| st.as_str() == s)
    }
}

impl fmt::Display for Stage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Parking queues keep a message 7 days.
pub const PARKING_TTL: Duration = Duration::from_secs(7 * 24 * 3600);
/// Parking queues hold at most this many messages; beyond, publishes are rejected (never dropped).
pub const PARKING_MAX_LENGTH: i64 = 5000;

/// The names of one installation's bus objects.
#[derive(Clone, Debug)]
pub struct Names {
    ns: Namespace,
}

impl Names {
    pub fn new(ns: Namespace) -> Self {
        Self { ns }
    }

    pub fn namespace(&self) -> &Namespace {
        &self.ns
    }

    /// The direct exchange every stage publishes to, routed by stage name.
    pub fn work_exchange(&self) -> String {
        format!("{}.work", self.ns)
    }

    /// The dead-letter exchange feeding the parking queues.
    pub fn dead_exchange(&self) -> String {
        format!("{}.dead", self.ns)
    }

    pub fn queue(&self, stage: Stage) -> String {
        format!("{}.{}", self.ns, stage)
    }

    pub fn parking(&self, stage: Stage) -> String {
        format!("{}.{}.dead", self.ns, stage)
    }
}

fn long_string(s: &str) -> AMQPValue {
    AMQPValue::LongString(LongString::from(s.as_bytes().to_vec()))
}

fn short(s: &str) -> ShortString {
    ShortString::from(s.to_string())
}

/// Arguments of a work queue: quorum, delivery limit, at-least-once dead-lettering.
pub fn work_queue_args(names: &Names, settings: &BusSettings) -> FieldTable {
    let mut t = FieldTable::default();
    t.insert(short("x-queue-type"), long_string("quorum"));
    t.insert(
        short("x-delivery-limit"),
        AMQPValue::LongLongInt(i64::from(settings.delivery_limit)),
    );
    t.insert(
        short("x-dead-letter-exchange"),
        long_string(&names.dead_exchange()),
    );
    t.insert(
        short("x-dead-letter-strategy"),
        long_string("at-least-once"),
    );
    // at-least-once dead-lettering requires reject-publish overflow on the source queue.
    t.insert(short("x-overflow"), long_string("reject-publish"));
    if let Some(expires) = settings.queue_expires {
        t.insert(
            short("x-expires"),
            AMQPValue::LongLongInt(expires.as_millis() as i64),
        );
    }
    t
}

/// Arguments of a parking queue: quorum, 7-day TTL, 5000 messages, reject-publish when full.
pub fn parking_queue_args(settings: &BusSettings) -> FieldTable {
    let mut t = FieldTable::default();
    t.insert(short("x-queue-type"), long_string("quorum"));
    t.insert(
        short("x-message-ttl"),
        AMQPValue::LongLongInt(PARKING_TTL.as_millis() as i64),
    );
    t.insert(
        short("x-max-length"),
        AMQPValue::LongLongInt(PARKING_MAX_LENGTH),
    );
    t.insert(short("x-overflow"), long_string("reject-publish"));
    if let Some(expires) = settings.queue_expires {
        t.insert(
            short("x-expires"),
            AMQPValue::LongLongInt(expires.as_millis() as i64),
        );
    }
    t
}

/// Declare every exchange, queue and binding of the installation (idempotent).
pub async fn declare(
    channel: &Channel,
    names: &Names,
    settings: &BusSettings,
) -> lapin::Result<()> {
    let durable = ExchangeDeclareOptions {
        durable: true,
        ..Default::default()
    };
    channel
        .exchange_declare(
            short(&names.work_exchange()),
            ExchangeKind::Direct,
            durable,
            FieldTable::default(),
        )
        .await?;
    channel
        .exchange_declare(
            short(&names.dead_exchange()),
            ExchangeKind::Direct,
            durable,
            FieldTable::default(),
        )
        .await?;
    let queue_opts = QueueDeclareOptions {
        durable: true,
        ..Default::default()
    };
    for stage in Stage::ALL {
        let parking = names.parking(stage);
        channel
            .queue_declare(short(&parking), queue_opts, parking_queue_args(settings))
            .await?;
        channel
            .queue_bind(
                short(&parking),
                short(&names.dead_exchange()),
                short(stage.as_str()),
                QueueBindOptions::default(),
                FieldTable::default(),
            )
            .await?;
        let work = names.queue(stage);
        channel
            .queue_declare(short(&work), queue_opts, work_queue_args(names, settings))
            .await?;
        channel
            .queue_bind(
                short(&work),
                short(&names.work_exchange()),
                short(stage.as_str()),
                QueueBindOptions::default(),
                FieldTable::default(),
            )
            .await?;
    }
    Ok(())
}
