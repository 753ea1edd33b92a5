//! What a parked message says (docs/operations.md, "Parked messages (`hermes dlq`)"): its
//! envelope, why it was parked (the failure headers, else RabbitMQ's `x-death`), when, and
//! how often the parking queue delivered it and had it returned.

use chrono::{DateTime, Utc};
use hermes_bus::Stage;
use hermes_runtime::stage::{FAILURE_DETAIL_HEADER, FAILURE_REASON_HEADER};
use hermes_types::envelope::Envelope;
use lapin::message::BasicGetMessage;
use lapin::types::{AMQPValue, FieldTable};
use serde_json::{Value, json};

/// One parked message as it is shown.
#[derive(Clone, Debug)]
pub struct Parked {
    /// The stage whose parking queue holds it.
    pub stage: Stage,
    /// That parking queue's name.
    pub queue: String,
    /// The message id (the envelope's, else the AMQP `message-id`, else `-`).
    pub id: String,
    /// The envelope's kind, or `undecodable`.
    pub kind: String,
    /// The run it belongs to, or `-`.
    pub run: String,
    /// The attempt it was parked at.
    pub attempt: u32,
    /// Why it was parked (`service_unavailable`, `rejected`, `delivery_limit`, …).
    pub reason: String,
    /// What the stage said of the failure, when it said something.
    pub detail: Option<String>,
    /// When it was dead-lettered, else when the parked copy was published.
    pub parked_at: Option<DateTime<Utc>>,
    /// Times the parking queue delivered it and had it returned (0 when only looked at here,
    /// which returns copies).
    pub returned: u32,
    /// The envelope, when the body is one.
    pub envelope: Option<Envelope>,
    /// The body as it is.
    pub raw: Vec<u8>,
}

impl Parked {
    /// Read one message taken from `queue`, the parking queue of `stage`.
    pub fn read(stage: Stage, queue: &str, m: &BasicGetMessage) -> Self {
        let props = &m.delivery.properties;
        let headers = props.headers().clone().unwrap_or_default();
        let envelope = Envelope::from_slice(&m.delivery.data).ok();
        let death = first_death(&headers);
        let reason = header(&headers, FAILURE_REASON_HEADER)
            .or_else(|| death.as_ref().and_then(|d| header(d, "reason")))
            .unwrap_or_else(|| "unknown".into());
        let parked_at = death
            .as_ref()
            .and_then(|d| match d.inner().get("time") {
                Some(AMQPValue::Timestamp(t)) => DateTime::from_timestamp(*t as i64, 0),
                _ => None,
            })
            .or_else(|| {
                props
                    .timestamp()
                    .and_then(|t| DateTime::from_timestamp(t as i64, 0))
            });
        Self {
            stage,
            queue: queue.to_string(),
            id: envelope
                .as_ref()
                .map(|e| e.id.to_string())
                .or_else(|| props.message_id().as_ref().map(|s| s.to_string()))
                .unwrap_or_else(|| "-".into()),
            kind: envelope
                .as_ref()
                .and_then(|e| serde_json::to_value(e.kind).ok())
                .and_then(|v| v.as_str().map(str::to_owned))
                .unwrap_or_else(|| "undecodable".into()),
            run: envelope
                .as_ref()
                .map(|e| e.run_id.to_string())
                .unwrap_or_else(|| "-".into()),
            attempt: envelope.as_ref().map_or(0, |e| e.attempt),
            reason,
            detail: header(&headers, FAILURE_DETAIL_HEADER),
            parked_at,
            returned: hermes_bus::delivery_count(&m.delivery),
            envelope,
            raw: m.delivery.data.clone(),
        }
    }

    /// The list's fields as JSON (`hermes dlq list --json`).
    pub fn to_json(&self, now: DateTime<Utc>) -> Value {
        json!({
            "queue": self.queue,
            "id": self.id,
            "kind": self.kind,
            "run_id": self.run,
            "attempt": self.attempt,
            "returned": self.returned,
            "reason": self.reason,
            "detail": self.detail,
            "parked_at": self.parked_at,
            "age_secs": self.parked_at.map(|t| (now - t).num_seconds()),
        })
    }

    /// The envelope as JSON (the raw body as a string when it is not one), with a Discord
    /// interaction's live token masked wherever it appears: a replay sends the message as it
    /// was, but nobody needs to read the token.
    pub fn envelope_json(&self) -> Value {
        let mut v = match &self.envelope {
            Some(e) => serde_json::to_value(e).unwrap_or(Value::Null),
            None => json!(String::from_utf8_lossy(&self.raw)),
        };
        hermes_types::model::redact_tokens(&mut v);
        v
    }
}

fn header(h: &FieldTable, name: &str) -> Option<String> {
    match h.inner().get(name)? {
        AMQPValue::LongString(s) => Some(String::from_utf8_lossy(s.as_bytes()).into_owned()),
        AMQPValue::ShortString(s) => Some(s.to_string()),
        _ => None,
    }
}

/// The newest entry of RabbitMQ's `x-death` header (why the broker dead-lettered it).
fn first_death(h: &FieldTable) -> Option<FieldTable> {
    match h.inner().get("x-death")? {
        AMQPValue::FieldArray(a) => a.as_slice().iter().find_map(|v| match v {
            AMQPValue::FieldTable(t) => Some(t.clone()),
            _ => None,
        }),
        _ => None,
    }
}
