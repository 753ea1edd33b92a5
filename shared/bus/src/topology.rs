//! Queue and exchange names under the namespace, and their declaration (docs/architecture.md#8-the-bus).
//!
//! One direct work exchange `{ns}.work` routes by stage name to the quorum work queues
//! `{ns}.<stage>`; each work queue dead-letters (at-least-once) through `{ns}.dead` into
//! its parking queue `{ns}.<stage>.dead`. The stages that retry later (delivery, webhooks)
//! also get one wait queue per retry delay, `{ns}.<stage>.retry.<label>`: a message waits
//! there for the queue's TTL, then dead-letters back to the work exchange under its stage's
//! routing key. Declarations are idempotent and run at start and after every reconnect. A
//! wait queue holds at most `HERMES_WAIT_QUEUE_MAX_LENGTH` messages and refuses more (the
//! stage then keeps the message in its work queue), so a flood of failing sends cannot fill
//! the broker's disk.

use std::time::Duration;

use lapin::options::{ExchangeDeclareOptions, QueueBindOptions, QueueDeclareOptions};
use lapin::types::{AMQPValue, FieldTable, LongString, ShortString};
use lapin::{Connection, ExchangeKind};

use hermes_config::{BusSettings, Namespace};
use hermes_types::stage::Stage;

/// The short name of a retry delay used in wait-queue names: `1m`, `25m`, `2h`, `90s`.
pub fn delay_label(delay: Duration) -> String {
    hermes_types::duration::duration_label(delay)
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

    /// The wait queue holding `stage`'s messages for `delay` before their next attempt.
    pub fn wait(&self, stage: Stage, delay: Duration) -> String {
        format!("{}.{}.retry.{}", self.ns, stage, delay_label(delay))
    }

    /// Every wait queue of the installation: the retry queues of the stages that retry
    /// later, and the router's slow lane.
    pub fn wait_queues(&self, settings: &BusSettings) -> Vec<String> {
        Stage::ALL
            .into_iter()
            .flat_map(|s| {
                settings
                    .wait_delays(s)
                    .into_iter()
                    .map(move |d| self.wait(s, d))
            })
            .collect()
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

/// Arguments of a wait queue: quorum, every message waits `delay` (queue-level TTL: no
/// per-message TTL in a shared queue), then dead-letters (at-least-once) back to the work
/// exchange with its stage as the routing key.
pub fn wait_queue_args(
    names: &Names,
    settings: &BusSettings,
    stage: Stage,
    delay: Duration,
) -> FieldTable {
    let mut t = FieldTable::default();
    t.insert(short("x-queue-type"), long_string("quorum"));
    t.insert(
        short("x-message-ttl"),
        AMQPValue::LongLongInt(delay.as_millis() as i64),
    );
    t.insert(
        short("x-dead-letter-exchange"),
        long_string(&names.work_exchange()),
    );
    t.insert(
        short("x-dead-letter-routing-key"),
        long_string(stage.as_str()),
    );
    t.insert(
        short("x-dead-letter-strategy"),
        long_string("at-least-once"),
    );
    t.insert(short("x-overflow"), long_string("reject-publish"));
    t.insert(
        short("x-max-length"),
        AMQPValue::LongLongInt(i64::from(settings.wait_queue_max_length)),
    );
    if let Some(expires) = settings.queue_expires {
        // Nobody consumes a wait queue, so "unused" would start at declaration: keep it
        // at least long enough for its own delay to pass.
        let keep = expires.max(delay * 2);
        t.insert(
            short("x-expires"),
            AMQPValue::LongLongInt(keep.as_millis() as i64),
        );
    }
    t
}

/// Declare every exchange, queue and binding of the installation (idempotent).
pub async fn declare(
    conn: &Connection,
    names: &Names,
    settings: &BusSettings,
) -> lapin::Result<()> {
    let channel = conn.create_channel().await?;
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
        // Published to through the default exchange by name; no binding needed.
        for delay in settings.wait_delays(stage) {
            let args = wait_queue_args(names, settings, stage, delay);
            declare_wait_queue(conn, &names.wait(stage, delay), args).await?;
        }
    }
    let _ = channel.close(200, "declared".into()).await;
    Ok(())
}

/// Does `queue` exist (a passive declaration, on a channel of its own)?
async fn exists(conn: &Connection, queue: &str) -> bool {
    let Ok(ch) = conn.create_channel().await else {
        return false;
    };
    let passive = QueueDeclareOptions {
        passive: true,
        ..Default::default()
    };
    let found = ch
        .queue_declare(short(queue), passive, FieldTable::default())
        .await
        .is_ok();
    let _ = ch.close(200, "looked".into()).await;
    found
}

/// Declare a wait queue. One an older build declared (before the length cap) cannot be
/// redeclared with other arguments: the broker refuses. It is then kept as it is, with a
/// warning, rather than deleted: a replica of the older build may be publishing a retry into
/// it at that very moment, and quorum queues cannot be deleted only-if-empty. Operators drain
/// and delete it to get the cap (docs/operations.md, changing the bus on a live install).
async fn declare_wait_queue(conn: &Connection, queue: &str, args: FieldTable) -> lapin::Result<()> {
    let opts = QueueDeclareOptions {
        durable: true,
        ..Default::default()
    };
    let ch = conn.create_channel().await?;
    let declared = ch.queue_declare(short(queue), opts, args).await;
    let _ = ch.close(200, "declared".into()).await;
    match declared {
        Ok(_) => Ok(()),
        // It exists, so the broker refused its arguments.
        Err(e) if exists(conn, queue).await => {
            tracing::warn!(queue, error = %e, "wait queue declared by an older build with other arguments: kept as it is (no length cap) until drained and deleted");
            Ok(())
        }
        Err(e) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wait_queues_are_named_after_their_delay() {
        let names = Names::new(Namespace::parse("hermes").unwrap());
        let mins = |m: u64| Duration::from_secs(m * 60);
        assert_eq!(
            names.wait(Stage::Delivery, mins(1)),
            "hermes.delivery.retry.1m"
        );
        assert_eq!(
            names.wait(Stage::Webhooks, mins(25)),
            "hermes.webhooks.retry.25m"
        );
        assert_eq!(delay_label(Duration::from_secs(1)), "1s");
        assert_eq!(delay_label(Duration::from_secs(90)), "90s");
        assert_eq!(delay_label(Duration::from_secs(7200)), "2h");
        let settings = BusSettings {
            prefetch: 1,
            commit_group: 1,
            mark_gather: Duration::from_millis(50),
            delivery_limit: 5,
            publish_window: 1,
            frame_max: 16_384,
            reconnect_timeout: Duration::from_secs(1),
            queue_expires: None,
            retry_delays: vec![mins(1), mins(5)],
            inbound_delay: Duration::from_secs(30),
            publish_timeout: Duration::from_secs(10),
            wait_queue_max_length: 100_000,
        };
        let all = names.wait_queues(&settings);
        assert_eq!(all.len(), 5, "{all:?}");
        assert!(
            all.contains(&"hermes.router.retry.30s".to_string()),
            "{all:?}"
        );
        assert!(all.iter().all(|q| q.contains(".delivery.")
            || q.contains(".webhooks.")
            || q.contains(".router.")));
    }
}
