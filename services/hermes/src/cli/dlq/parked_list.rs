//! `hermes dlq list` as a table or JSON: id, kind, run, queue, reason and age of each
//! parked message ([`hermes_operator::parked::Parked`]).

use std::time::Duration;

use chrono::{DateTime, Utc};
use hermes_operator::parked::Parked;
use serde_json::Value;

fn age(p: &Parked, now: DateTime<Utc>) -> String {
    match p.parked_at {
        Some(t) => human((now - t).to_std().unwrap_or_default()),
        None => "-".into(),
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

pub(super) fn print_list(shown: &[Parked], json: bool, now: DateTime<Utc>) {
    if json {
        let rows: Vec<Value> = shown.iter().map(|p| p.to_json(now)).collect();
        println!("{}", Value::from(rows));
        return;
    }
    if shown.is_empty() {
        println!("no parked messages");
        return;
    }
    println!(
        "{:<36}  {:<14}  {:<36}  {:<10}  {:<20}  AGE",
        "ID", "KIND", "RUN", "QUEUE", "REASON"
    );
    for p in shown {
        println!(
            "{:<36}  {:<14}  {:<36}  {:<10}  {:<20}  {}",
            p.id,
            p.kind,
            p.run,
            p.stage.as_str(),
            p.reason,
            age(p, now)
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
