//! What a parked message says (docs/operations.md, "Parked messages (`hermes dlq`)"): its
//! envelope, why it was parked (the failure headers, else RabbitMQ's `x-death`), when and
//! how often it was returned, as a table row or JSON.

use std::time::Duration;

use chrono::{DateTime, Utc};
use hermes_bus::Stage;
use hermes_runtime::stage::{FAILURE_DETAIL_HEADER, FAILURE_REASON_HEADER};
use hermes_types::envelope::Envelope;
use lapin::message::BasicGetMessage;
use lapin::types::{AMQPValue, FieldTable};
use serde_json::{Value, json};

/// One parked message as it is shown.
pub(super) struct Parked {
    pub(super) stage: Stage,
    pub(super) queue: String,
    pub(super) id: String,
    pub(super) kind: String,
    pub(super) run: String,
    pub(super) attempt: u32,
    pub(super) reason: String,
    pub(super) detail: Option<String>,
    pub(super) parked_at: Option<DateTime<Utc>>,
    /// Times the parking queue delivered it and had it returned (0 when only looked at by
    /// this command, which returns copies).
    pub(super) returned: u32,
    pub(super) envelope: Option<Envelope>,
    pub(super) raw: Vec<u8>,
}

impl Parked {
    pub(super) fn read(stage: Stage, queue: &str, m: &BasicGetMessage) -> Self {
        let props = &m.delivery.properties;
        let headers = props.headers().clone().unwrap_or_default();
        let envelope = Envelope::from_slice(&m.delivery.data).ok();
        let death = first_death(&headers);
        let reason = header(&headers, FAILURE_REASON_HEADER)
            .or_else(|| death.as_ref().and_then(|d| field(d, "reason")))
            .unwrap_or_else(|| "unknown".into());
        // When it was dead-lettered, else when the parked copy was published.
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

    fn age(&self, now: DateTime<Utc>) -> String {
        match self.parked_at {
            Some(t) => human((now - t).to_std().unwrap_or_default()),
            None => "-".into(),
        }
    }

    pub(super) fn to_json(&self, now: DateTime<Utc>) -> Value {
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
}

fn header(h: &FieldTable, name: &str) -> Option<String> {
    match h.inner().get(name)? {
        AMQPValue::LongString(s) => Some(String::from_utf8_lossy(s.as_bytes()).into_owned()),
        AMQPValue::ShortString(s) => Some(s.to_string()),
        _ => None,
    }
}

fn field(t: &FieldTable, name: &str) -> Option<String> {
    header(t, name)
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

/// `3d`, `5h`, `12m`, `40s`.
fn human(d: Duration) -> String {
    let s = d.as_secs();
    if s >= 86_400 {
        format!("{}d", s / 86_400)
    } else if s >= 3600 {
        format!("{}h", s / 3600)
    } else if s >= 60 {
        format!("{}m", s / 60)
    } else {
        format!("{s}s")
    }
}

pub(super) fn print_list(held: &[(Parked, BasicGetMessage)], json: bool, now: DateTime<Utc>) {
    if json {
        let rows: Vec<Value> = held.iter().map(|(p, _)| p.to_json(now)).collect();
        println!("{}", Value::from(rows));
        return;
    }
    if held.is_empty() {
        println!("no parked messages");
        return;
    }
    println!(
        "{:<36}  {:<14}  {:<36}  {:<10}  {:<20}  AGE",
        "ID", "KIND", "RUN", "QUEUE", "REASON"
    );
    for (p, _) in held {
        println!(
            "{:<36}  {:<14}  {:<36}  {:<10}  {:<20}  {}",
            p.id,
            p.kind,
            p.run,
            p.stage.as_str(),
            p.reason,
            p.age(now)
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ages_read_like_durations() {
        assert_eq!(human(Duration::from_secs(40)), "40s");
        assert_eq!(human(Duration::from_secs(3 * 3600 + 5)), "3h");
        assert_eq!(human(Duration::from_secs(3 * 86_400)), "3d");
    }
}
