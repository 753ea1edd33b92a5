//! The parking queues (`{ns}.<stage>.dead`, docs/operations.md, "Parked messages (`hermes
//! dlq`)"): looked into, replayed once their cause is fixed, or purged. `hermes dlq` and the
//! console's parked-messages page both act through here.
//!
//! Messages are taken with `basic.get` and held unacknowledged while the action decides: a
//! replayed one is acked off the parking queue only after the broker confirmed its copy in
//! the work queue (same message id, so the consumer's idempotency still holds; attempt reset
//! to 0, so the retry schedule applies again); a purged one is acked; every other one is
//! returned untouched. A failure returns whatever was not yet settled, so nothing is lost.
//!
//! Returning a message is not a `nack` with requeue: a quorum queue counts each one as a
//! failed delivery, and a broker with a delivery limit on parking queues (RabbitMQ 4 sets 20
//! by default) would drop a message after twenty looks. An identical copy (body, properties,
//! failure headers, message id) goes back to the parking queue, confirmed, and only then is
//! the original acked. Every message is taken before any is returned, so one pass keeps
//! their order.

mod message;

use std::collections::BTreeSet;

use chrono::{DateTime, Utc};
use hermes_bus::{Bus, Outgoing, Stage};
use lapin::message::BasicGetMessage;
use lapin::options::{BasicAckOptions, BasicGetOptions, BasicPublishOptions, ConfirmSelectOptions};
use lapin::types::FieldTable;
use lapin::{Channel, Confirmation};

pub use message::Parked;

/// Why an action on the parking queues stopped. Whatever it had not settled is back in its
/// parking queue.
#[derive(Debug, thiserror::Error)]
pub enum ParkedError {
    /// The broker did not answer, or refused a step.
    #[error("{0}")]
    Broker(String),
    /// A queue named by the caller is not a parking queue.
    #[error("{queue:?} is not a parking queue: use one of {known}")]
    UnknownQueue { queue: String, known: String },
    /// The message's body is not an envelope: it can be shown and purged, not replayed.
    #[error("message {id} in {queue} is not a valid envelope; it cannot be replayed (purge it)")]
    NotAnEnvelope { id: String, queue: String },
    /// A replay that stopped part of the way.
    #[error("replayed {done} of {total} before stopping: {cause}")]
    Stopped {
        done: usize,
        total: usize,
        cause: Box<ParkedError>,
    },
}

fn broker(what: &str) -> impl FnOnce(lapin::Error) -> ParkedError + '_ {
    move |e| ParkedError::Broker(format!("{what}: {e}"))
}

/// Which parked messages an action applies to.
#[derive(Clone, Debug, Default)]
pub struct Selection {
    /// The stages whose parking queues are looked into; all of them when empty.
    pub stages: Vec<Stage>,
    /// Only messages parked for this reason.
    pub reason: Option<String>,
    /// Only messages parked at or after this time.
    pub since: Option<DateTime<Utc>>,
    /// Only messages with one of these ids.
    pub ids: Option<BTreeSet<String>>,
}

impl Selection {
    /// Whether `p` is selected.
    pub fn matches(&self, p: &Parked) -> bool {
        self.reason.as_deref().is_none_or(|r| p.reason == r)
            && self
                .since
                .is_none_or(|since| p.parked_at.is_some_and(|t| t >= since))
            && self.ids.as_ref().is_none_or(|ids| ids.contains(&p.id))
    }

    fn stages(&self) -> Vec<Stage> {
        if self.stages.is_empty() {
            Stage::ALL.to_vec()
        } else {
            self.stages.clone()
        }
    }
}

/// The stage whose parking queue `queue` names: a stage's name or the full queue name.
pub fn stage_named(bus: &Bus, queue: &str) -> Result<Stage, ParkedError> {
    Stage::ALL
        .into_iter()
        .find(|s| s.as_str() == queue || bus.names().parking(*s) == queue)
        .ok_or_else(|| ParkedError::UnknownQueue {
            queue: queue.to_string(),
            known: Stage::ALL.map(|s| s.as_str()).join(", "),
        })
}

/// How many messages each stage's parking queue holds (a passive declaration: nothing is
/// taken).
pub async fn depths(bus: &Bus) -> Result<Vec<(Stage, u32)>, ParkedError> {
    let mut out = Vec::with_capacity(Stage::ALL.len());
    for stage in Stage::ALL {
        let (messages, _) = bus
            .queue_stats(&bus.names().parking(stage))
            .await
            .map_err(|e| ParkedError::Broker(format!("cannot count {}: {e}", stage.as_str())))?;
        out.push((stage, messages));
    }
    Ok(out)
}

/// The selected messages, every one left where it was.
pub async fn list(bus: &Bus, selection: &Selection) -> Result<Vec<Parked>, ParkedError> {
    let held = Held::take(bus, selection).await?;
    let shown = held.chosen.iter().map(|(p, _)| p.clone()).collect();
    held.give_all_back().await?;
    Ok(shown)
}

/// Delete the selected messages for good: how many.
pub async fn purge(bus: &Bus, selection: &Selection) -> Result<usize, ParkedError> {
    let held = Held::take(bus, selection).await?;
    let mut purged = 0;
    for (_, m) in &held.chosen {
        m.delivery
            .acker
            .ack(BasicAckOptions::default())
            .await
            .map_err(broker("cannot purge"))?;
        purged += 1;
    }
    held.close().await;
    Ok(purged)
}

/// Republish each selected message to its work queue, confirmed, then ack it off the
/// parking queue: how many. `progress(done, total)` is told after each one.
pub async fn replay(
    bus: &Bus,
    selection: &Selection,
    progress: &mut (dyn FnMut(usize, usize) + Send),
) -> Result<usize, ParkedError> {
    let mut held = Held::take(bus, selection).await?;
    let chosen = std::mem::take(&mut held.chosen);
    let total = chosen.len();
    let mut done = 0usize;
    let mut iter = chosen.into_iter();
    while let Some((p, m)) = iter.next() {
        if let Err(cause) = republish(bus, &p).await {
            // Nothing is lost: this one and the rest go back where they were.
            held.back.give_back(&p.queue, &m).await?;
            for (rest_p, rest) in iter {
                held.back.give_back(&rest_p.queue, &rest).await?;
            }
            held.close().await;
            return Err(ParkedError::Stopped {
                done,
                total,
                cause: Box::new(cause),
            });
        }
        m.delivery
            .acker
            .ack(BasicAckOptions::default())
            .await
            .map_err(broker(
                "the copy is in the work queue but the parked original could not be acked; \
             it may be replayed twice (idempotent by id)",
            ))?;
        done += 1;
        progress(done, total);
    }
    held.close().await;
    Ok(done)
}

/// One parked message back in its work queue, attempt 0, same id.
async fn republish(bus: &Bus, p: &Parked) -> Result<(), ParkedError> {
    let Some(env) = &p.envelope else {
        return Err(ParkedError::NotAnEnvelope {
            id: p.id.clone(),
            queue: p.queue.clone(),
        });
    };
    let mut again = env.clone();
    again.attempt = 0;
    let names = bus.names();
    let queue = names.queue(p.stage);
    bus.publish_to(
        &names.work_exchange(),
        p.stage.as_str(),
        &queue,
        &Outgoing::from_envelope(&again),
    )
    .await
    .map_err(|e| ParkedError::Broker(format!("cannot republish {} to {queue}: {e}", p.id)))
}

/// Every message of the selected parking queues, taken and held unacked; the unselected
/// ones already given back.
struct Held {
    ch: Channel,
    back: Returner,
    chosen: Vec<(Parked, BasicGetMessage)>,
}

impl Held {
    async fn take(bus: &Bus, selection: &Selection) -> Result<Self, ParkedError> {
        let unreachable =
            |e: hermes_bus::BusError| ParkedError::Broker(format!("cannot reach RabbitMQ: {e}"));
        let ch = bus.channel().await.map_err(unreachable)?;
        let back = Returner::open(bus).await?;
        let mut all = Vec::new();
        for stage in selection.stages() {
            let queue = bus.names().parking(stage);
            while let Some(m) = ch
                .basic_get(queue.clone().into(), BasicGetOptions::default())
                .await
                .map_err(|e| ParkedError::Broker(format!("cannot read {queue}: {e}")))?
            {
                all.push((Parked::read(stage, &queue, &m), m));
            }
        }
        let (chosen, others): (Vec<_>, Vec<_>) =
            all.into_iter().partition(|(p, _)| selection.matches(p));
        for (p, m) in &others {
            back.give_back(&p.queue, m).await?;
        }
        Ok(Self { ch, back, chosen })
    }

    async fn give_all_back(mut self) -> Result<(), ParkedError> {
        for (p, m) in std::mem::take(&mut self.chosen) {
            self.back.give_back(&p.queue, &m).await?;
        }
        self.close().await;
        Ok(())
    }

    /// Close both channels; anything still unacked goes back by itself.
    async fn close(self) {
        let _ = self.ch.close(200, "done".into()).await;
        let _ = self.back.ch.close(200, "done".into()).await;
    }
}

/// Returns messages to their parking queue as confirmed copies (see the module doc).
struct Returner {
    ch: Channel,
}

impl Returner {
    async fn open(bus: &Bus) -> Result<Self, ParkedError> {
        let ch = bus
            .channel()
            .await
            .map_err(|e| ParkedError::Broker(format!("cannot reach RabbitMQ: {e}")))?;
        ch.confirm_select(ConfirmSelectOptions::default())
            .await
            .map_err(broker("cannot open a confirmed channel"))?;
        Ok(Self { ch })
    }

    /// Put an identical copy of `m` at the tail of `queue`, then ack the original.
    async fn give_back(&self, queue: &str, m: &BasicGetMessage) -> Result<(), ParkedError> {
        let mut props = m.delivery.properties.clone();
        // The broker's count of the original's deliveries does not belong to the copy.
        if let Some(h) = props.headers().clone() {
            let mut h = h.inner().clone();
            h.remove("x-delivery-count");
            props = props.with_headers(FieldTable::from(h));
        }
        let returning = broker("cannot return a message to its parking queue");
        let confirm = self
            .ch
            .basic_publish(
                "".into(),
                queue.to_string().into(),
                BasicPublishOptions::default(),
                &m.delivery.data,
                props,
            )
            .await
            .map_err(returning)?
            .await
            .map_err(broker("cannot return a message to its parking queue"))?;
        if let Confirmation::Nack(_) = confirm {
            return Err(ParkedError::Broker(format!(
                "{queue} refused the returned copy; the original stays held until the \
                 connection closes, then goes back by itself"
            )));
        }
        m.delivery
            .acker
            .ack(BasicAckOptions::default())
            .await
            .map_err(broker(
                "the copy is back in the parking queue but the original could not be acked; \
             it may show twice",
            ))?;
        Ok(())
    }
}
