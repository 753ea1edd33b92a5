//! Scheduled jobs (docs/api.md, "Jobs"): a prompt run on a schedule for the key that made
//! it, and where each run's answer goes. Not to be confused with `jobs.rs`, the work owed
//! after a run.
//!
//! The schedule's wire form is the API's and the database's: `{"cron": "0 9 * * 1-5",
//! "timezone": "Europe/Paris"}` (timezone optional, UTC by default) or
//! `{"every_seconds": 30}`. Both are checked when parsed, so a `Schedule` always has a next
//! time. A string is taken too (`"every 30s"`, `"0 8 * * 1-5"`: `schedule_text.rs`) and
//! answered as its object.

use chrono::{DateTime, TimeDelta, Utc};
use croner::Cron;
use croner::parser::{CronParser, Seconds, Year};
use serde::{Deserialize, Serialize};

use super::Platform;
use crate::ids::JobId;

/// The longest interval accepted: one year.
pub const MAX_EVERY_SECONDS: u64 = 366 * 24 * 3600;

/// When a job is due.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(into = "ScheduleWire")]
pub enum Schedule {
    /// A 5-field cron expression (minute hour day-of-month month day-of-week), read in
    /// `timezone` (an IANA name; UTC when absent).
    Cron {
        expr: String,
        timezone: Option<String>,
    },
    /// Every `seconds` seconds, in step with the job's first due time.
    Every { seconds: u64 },
}

/// The schedule's JSON: exactly one of `cron` (with an optional `timezone`) or
/// `every_seconds`.
#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct ScheduleWire {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    cron: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    timezone: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    every_seconds: Option<u64>,
}

impl TryFrom<ScheduleWire> for Schedule {
    type Error = String;

    fn try_from(w: ScheduleWire) -> Result<Self, String> {
        let schedule = match (w.cron, w.every_seconds) {
            (Some(expr), None) => Schedule::Cron {
                expr: expr.trim().to_string(),
                timezone: w.timezone,
            },
            (None, Some(seconds)) if w.timezone.is_none() => Schedule::Every { seconds },
            (None, Some(_)) => return Err("timezone goes only with cron".into()),
            _ => {
                return Err(
                    "schedule needs exactly one of cron (a 5-field expression) or every_seconds"
                        .into(),
                );
            }
        };
        schedule.check()?;
        Ok(schedule)
    }
}

/// A schedule's JSON: its object, or its text form. By hand rather than `untagged`, so that
/// an object's own error (an unknown field, both forms at once) reaches the caller as it is.
impl<'de> Deserialize<'de> for Schedule {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Either;
        impl<'de> serde::de::Visitor<'de> for Either {
            type Value = Schedule;

            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a schedule: {\"cron\": …}, {\"every_seconds\": …}, or text such as \"every 30s\"")
            }

            fn visit_str<E: serde::de::Error>(self, text: &str) -> Result<Schedule, E> {
                let schedule = super::schedule_text::parse(text).map_err(E::custom)?;
                schedule.check().map_err(E::custom)?;
                Ok(schedule)
            }

            fn visit_map<A: serde::de::MapAccess<'de>>(self, map: A) -> Result<Schedule, A::Error> {
                let wire =
                    ScheduleWire::deserialize(serde::de::value::MapAccessDeserializer::new(map))?;
                Schedule::try_from(wire).map_err(serde::de::Error::custom)
            }
        }
        d.deserialize_any(Either)
    }
}

impl From<Schedule> for ScheduleWire {
    fn from(s: Schedule) -> Self {
        match s {
            Schedule::Cron { expr, timezone } => Self {
                cron: Some(expr),
                timezone,
                every_seconds: None,
            },
            Schedule::Every { seconds } => Self {
                cron: None,
                timezone: None,
                every_seconds: Some(seconds),
            },
        }
    }
}

/// Parse a 5-field cron expression: no seconds field, no year field.
fn parse_cron(expr: &str) -> Result<Cron, String> {
    if expr.split_whitespace().count() != 5 {
        return Err(format!(
            "cron {expr:?} must have 5 fields: minute hour day-of-month month day-of-week"
        ));
    }
    CronParser::builder()
        .seconds(Seconds::Disallowed)
        .year(Year::Disallowed)
        .build()
        .parse(expr)
        .map_err(|e| format!("cron {expr:?} is not valid: {e}"))
}

fn parse_timezone(tz: Option<&str>) -> Result<chrono_tz::Tz, String> {
    match tz {
        None => Ok(chrono_tz::UTC),
        Some(name) => name
            .parse()
            .map_err(|_| format!("timezone {name:?} is not an IANA time zone name")),
    }
}

impl Schedule {
    /// Whether the schedule can be used: a valid expression and zone with a time to come,
    /// or an interval from 1 s to a year.
    fn check(&self) -> Result<(), String> {
        match self {
            Schedule::Every { seconds } if (1..=MAX_EVERY_SECONDS).contains(seconds) => Ok(()),
            Schedule::Every { .. } => Err(format!(
                "every_seconds must be from 1 to {MAX_EVERY_SECONDS}"
            )),
            Schedule::Cron { .. } => self.next_after(Utc::now(), Utc::now()).map(|_| ()),
        }
    }

    /// The first due time strictly after `now`, for a job last due at `due` (its first
    /// time for a new job). A job that missed several times while the fleet was away gets
    /// one time after `now`, not one per missed time; an interval keeps its step.
    pub fn next_after(
        &self,
        due: DateTime<Utc>,
        now: DateTime<Utc>,
    ) -> Result<DateTime<Utc>, String> {
        match self {
            Schedule::Every { seconds } => {
                let step = *seconds as i64;
                let behind = now.signed_duration_since(due).num_seconds().max(0);
                let steps = behind / step + 1;
                let mut next = due + TimeDelta::seconds(steps * step);
                // Sub-second remainders: the next time must be after `now`.
                while next <= now {
                    next += TimeDelta::seconds(step);
                }
                Ok(next)
            }
            Schedule::Cron { expr, timezone } => {
                let cron = parse_cron(expr)?;
                let tz = parse_timezone(timezone.as_deref())?;
                cron.find_next_occurrence(&now.with_timezone(&tz), false)
                    .map(|t| t.with_timezone(&Utc))
                    .map_err(|e| format!("cron {expr:?} has no time to come: {e}"))
            }
        }
    }

    /// The first due time of a job scheduled (or resumed) at `now`: an interval's first run
    /// is one interval away, a cron expression's its next time.
    pub fn first_after(&self, now: DateTime<Utc>) -> Result<DateTime<Utc>, String> {
        self.next_after(now, now)
    }

    /// The shortest time between two due times from `now` on: an interval's step; for a
    /// cron expression the shortest gap among its next [`GAP_SAMPLES`] times, which covers
    /// more than a day of even an every-minute expression, so every gap within a day and
    /// across midnight shows (a 5-field expression's fields are minute, hour and days:
    /// `None` when it has fewer than two times to come).
    pub fn shortest_gap(&self, now: DateTime<Utc>) -> Result<Option<TimeDelta>, String> {
        match self {
            Schedule::Every { seconds } => Ok(Some(TimeDelta::seconds(*seconds as i64))),
            Schedule::Cron { expr, timezone } => {
                let cron = parse_cron(expr)?;
                let tz = parse_timezone(timezone.as_deref())?;
                let mut times = cron.iter_after(now.with_timezone(&tz)).take(GAP_SAMPLES);
                let Some(mut last) = times.next() else {
                    return Ok(None);
                };
                let mut shortest: Option<TimeDelta> = None;
                for t in times {
                    let gap = t.signed_duration_since(last);
                    shortest = Some(shortest.map_or(gap, |s| s.min(gap)));
                    last = t;
                }
                Ok(shortest)
            }
        }
    }
}

/// Due times of a cron expression [`Schedule::shortest_gap`] looks at.
pub const GAP_SAMPLES: usize = 2000;

/// Where a job's answers go.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case", deny_unknown_fields)]
pub enum JobTarget {
    /// Kept on the run only: read it with `GET /api/jobs/{id}` or `GET /v1/runs/{id}`.
    /// (Empty struct variants, not unit ones: serde refuses unknown fields only on those.)
    Stored {},
    /// POSTed to the owning key's callback URL, signed (docs/api.md, callbacks).
    Callback {},
    /// Answered in a linked chat as if its user had sent the prompt (operator only).
    Chat { platform: Platform, chat_id: String },
}

impl JobTarget {
    pub fn kind(&self) -> JobTargetKind {
        match self {
            JobTarget::Stored {} => JobTargetKind::Stored,
            JobTarget::Callback {} => JobTargetKind::Callback,
            JobTarget::Chat { .. } => JobTargetKind::Chat,
        }
    }
}

/// The kind of a [`JobTarget`], as stored in `jobs.target_kind`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum JobTargetKind {
    Stored,
    Callback,
    Chat,
}

impl JobTargetKind {
    pub fn as_str(self) -> &'static str {
        match self {
            JobTargetKind::Stored => "stored",
            JobTargetKind::Callback => "callback",
            JobTargetKind::Chat => "chat",
        }
    }
}

/// Why a job ran.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum JobTrigger {
    /// Its schedule came due.
    Schedule,
    /// `POST /api/jobs/{id}/run`.
    Manual,
}

impl JobTrigger {
    pub fn as_str(self) -> &'static str {
        match self {
            JobTrigger::Schedule => "schedule",
            JobTrigger::Manual => "manual",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        [JobTrigger::Schedule, JobTrigger::Manual]
            .into_iter()
            .find(|t| t.as_str() == s)
    }
}

/// What a job's run carries to the router beyond its prompt: which job it is, and the
/// job's own narrowing of the tools and choice of model.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct JobRunOptions {
    pub job_id: Option<JobId>,
    /// Only tools of these toolsets are offered (absent: every tool the surface offers).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub toolsets: Option<Vec<String>>,
    /// A logical model of `[models]` tried first, before the tier's chain.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn at(s: &str) -> DateTime<Utc> {
        s.parse().unwrap()
    }

    fn parse(v: serde_json::Value) -> Result<Schedule, String> {
        serde_json::from_value(v).map_err(|e| e.to_string())
    }

    #[test]
    fn the_shortest_gap_is_an_intervals_step_or_a_cron_expressions_closest_times() {
        let now = at("2030-01-01T00:00:30Z");
        let gap = |v: serde_json::Value| {
            parse(v)
                .unwrap()
                .shortest_gap(now)
                .unwrap()
                .map(|d| d.num_seconds())
        };
        assert_eq!(gap(json!({"every_seconds": 45})), Some(45));
        assert_eq!(gap(json!({"cron": "* * * * *"})), Some(60));
        assert_eq!(gap(json!({"cron": "*/5 * * * *"})), Some(300));
        assert_eq!(gap(json!({"cron": "0 9 * * *"})), Some(86_400));
        // Two close times once a day, far from now, still show.
        assert_eq!(gap(json!({"cron": "0,1 9 * * *"})), Some(60));
        // Across midnight.
        assert_eq!(gap(json!({"cron": "59,0 23,0 * * *"})), Some(60));
        assert_eq!(gap(json!({"cron": "0 9 * * 1"})), Some(7 * 86_400));
        // In a zone with summer time, the night the clocks go forward is an hour short.
        assert_eq!(
            gap(json!({"cron": "0 9 * * *", "timezone": "Europe/Paris"})),
            Some(23 * 3600)
        );
    }

    #[test]
    fn schedules_parse_from_either_form_and_refuse_the_rest() {
        assert_eq!(
            parse(json!({"every_seconds": 30})).unwrap(),
            Schedule::Every { seconds: 30 }
        );
        let cron = parse(json!({"cron": "0 9 * * 1-5", "timezone": "Europe/Paris"})).unwrap();
        assert_eq!(
            serde_json::to_value(&cron).unwrap(),
            json!({"cron": "0 9 * * 1-5", "timezone": "Europe/Paris"})
        );
        for bad in [
            json!({}),
            json!({"every_seconds": 0}),
            json!({"every_seconds": 30, "cron": "* * * * *"}),
            json!({"every_seconds": 30, "timezone": "UTC"}),
            json!({"cron": "* * * *"}),
            json!({"cron": "0 * * * * *"}),
            json!({"cron": "61 * * * *"}),
            json!({"cron": "0 0 31 2 *"}),
            json!({"cron": "* * * * *", "timezone": "Mars/Olympus"}),
            json!({"cron": "* * * * *", "every": 3}),
        ] {
            assert!(parse(bad.clone()).is_err(), "{bad} was accepted");
        }
    }

    #[test]
    fn a_missed_time_runs_once_and_an_interval_keeps_its_step() {
        let every = Schedule::Every { seconds: 10 };
        let due = at("2026-01-01T00:00:00Z");
        // On time: the next step.
        assert_eq!(
            every.next_after(due, at("2026-01-01T00:00:00.2Z")).unwrap(),
            at("2026-01-01T00:00:10Z")
        );
        // A day away: one time after now, in step with the first.
        assert_eq!(
            every.next_after(due, at("2026-01-02T00:00:04Z")).unwrap(),
            at("2026-01-02T00:00:10Z")
        );
        let cron = Schedule::Cron {
            expr: "30 9 * * *".into(),
            timezone: Some("Europe/Paris".into()),
        };
        // 09:30 in Paris is 08:30 UTC in winter.
        assert_eq!(
            cron.next_after(due, at("2026-01-05T12:00:00Z")).unwrap(),
            at("2026-01-06T08:30:00Z")
        );
        assert_eq!(
            cron.first_after(at("2026-01-06T08:30:00Z")).unwrap(),
            at("2026-01-07T08:30:00Z"),
            "strictly after now"
        );
    }

    #[test]
    fn targets_are_tagged() {
        let t: JobTarget = serde_json::from_value(
            json!({"type": "chat", "platform": "telegram", "chat_id": "42"}),
        )
        .unwrap();
        assert_eq!(
            t,
            JobTarget::Chat {
                platform: Platform::Telegram,
                chat_id: "42".into()
            }
        );
        assert!(serde_json::from_value::<JobTarget>(json!({"type": "email"})).is_err());
        assert!(serde_json::from_value::<JobTarget>(json!({"type": "stored", "x": 1})).is_err());
    }
}
