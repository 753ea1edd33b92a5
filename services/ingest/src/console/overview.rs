//! The console's overview (docs/console.md, "Pages"): the fleet at a glance, from the same
//! reads as `/health/detailed` and the fleet's truth in PostgreSQL, never a second store.
//!
//! 1. runs per minute over the last hour, by platform (PostgreSQL, `runs::activity`);
//! 2. the time to answer, p50 and p99, per five minutes and over the hour (the same read);
//! 3. each stage's work queue, its consumers and its parking queue (RabbitMQ, as
//!    `/health/detailed` asks it);
//! 4. the delivery breakers that are open (Redis, as delivery reads them);
//! 5. today's spend against the cap and the killswitch, with its confirmed form.
//!
//! Each part that cannot be read says so; the rest of the page is still drawn.

use std::collections::BTreeMap;

use axum::Extension;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::Response;
use chrono::{DateTime, Utc};
use hermes_db::console_sessions::Login;
use hermes_db::runs::activity::{self, Activity, LATENCY_BUCKET_MINUTES, MINUTES};
use hermes_types::model::Platform;

use super::charts;
use super::html::{esc, page};
use crate::AppState;
use crate::health::{StageQueues, stage_queues};

/// `GET /console/overview`
pub async fn show(State(app): State<AppState>, Extension(login): Extension<Login>) -> Response {
    let now = Utc::now();
    let activity = async {
        let client = app.ctx.db.get().await?;
        activity::last_hour(&client, now).await
    };
    let budgets = super::killswitch::budgets(&app);
    let (activity, queues, breakers, spend) = tokio::join!(
        activity,
        stage_queues(&app.ctx.bus),
        open_breakers(&app.ctx.cache),
        budgets.status(),
    );
    let mut body = String::new();
    match activity {
        Ok(a) => {
            body.push_str(&runs_section(&a));
            body.push_str(&latency_section(&a));
        }
        Err(_) => body.push_str(&missing("Runs and time to answer", "PostgreSQL")),
    }
    match queues {
        Ok(q) => body.push_str(&queues_section(&q)),
        Err(_) => body.push_str(&missing("Queues", "RabbitMQ")),
    }
    match breakers {
        Some(open) => body.push_str(&breakers_section(&open)),
        None => body.push_str(&missing("Breakers", "Redis")),
    }
    match spend {
        Ok(status) => {
            body.push_str(
                "<section aria-labelledby=\"spend\"><h2 id=\"spend\">Spend and killswitch</h2>",
            );
            if let Some(cap) = status.cap_micro_usd {
                body.push_str(&charts::meter(
                    status.spent_today_usd,
                    cap as f64 / 1_000_000.0,
                    "today's spend against the daily cap",
                ));
            }
            body.push_str(&super::killswitch::panel(&status, &login));
            body.push_str("</section>");
        }
        Err(_) => body.push_str(&missing(
            "Spend and killswitch",
            "Neither Redis nor PostgreSQL",
        )),
    }
    page(StatusCode::OK, "Overview", Some(&login), &body)
}

/// A section whose source did not answer.
fn missing(title: &str, source: &str) -> String {
    format!(
        "<section><h2>{}</h2><p class=\"error\">{} did not answer; reload shortly.</p></section>",
        esc(title),
        esc(source)
    )
}

/// Runs per minute, oldest first, of one platform (`None`: every platform).
fn per_minute(a: &Activity, platform: Option<Option<Platform>>) -> Vec<f64> {
    let mut out = vec![0.0; MINUTES as usize];
    for m in &a.per_minute {
        if platform.is_none_or(|p| p == m.platform) && (0..MINUTES).contains(&m.minutes_ago) {
            out[(MINUTES - 1 - m.minutes_ago) as usize] += m.runs as f64;
        }
    }
    out
}

fn runs_section(a: &Activity) -> String {
    let mut totals: BTreeMap<&str, (Option<Platform>, i64)> = BTreeMap::new();
    for m in &a.per_minute {
        let name = m.platform.map_or("none", |p| p.as_str());
        totals.entry(name).or_insert((m.platform, 0)).1 += m.runs;
    }
    let all = per_minute(a, None);
    let hour: f64 = all.iter().sum();
    let mut out = format!(
        "<section aria-labelledby=\"runs\"><h2 id=\"runs\">Runs per minute</h2>\
         <p>{} in the last {MINUTES} minutes, {:.1} a minute; {} in the last minute.</p>{}",
        runs(hour as i64),
        hour / f64::from(MINUTES),
        all.last().copied().unwrap_or(0.0),
        charts::bars(&all, "runs per minute, every platform, the last hour"),
    );
    if !totals.is_empty() {
        out.push_str(
            "<table><caption>By platform</caption><thead><tr><th scope=\"col\">Platform</th>\
             <th scope=\"col\">Runs in the hour</th><th scope=\"col\">Per minute</th></tr></thead><tbody>",
        );
        for (name, (platform, runs)) in totals {
            let label = format!("runs per minute on {name}, the last hour");
            out.push_str(&format!(
                "<tr><td>{name}</td><td>{runs}</td><td>{}</td></tr>",
                charts::bars(&per_minute(a, Some(platform)), &label)
            ));
        }
        out.push_str("</tbody></table>");
    }
    out.push_str("</section>");
    out
}

fn latency_section(a: &Activity) -> String {
    let buckets = (MINUTES / LATENCY_BUCKET_MINUTES) as usize;
    let mut p50 = vec![None; buckets];
    let mut p99 = vec![None; buckets];
    for l in &a.latency {
        if let Some(ago) = l.buckets_ago.filter(|b| (0..buckets as i32).contains(b)) {
            let at = buckets - 1 - ago as usize;
            p50[at] = Some(l.p50_ms);
            p99[at] = Some(l.p99_ms);
        }
    }
    let summary = match a.latency.iter().find(|l| l.buckets_ago.is_none()) {
        Some(h) if h.answered > 0 => format!(
            "<p>{} answered in the last {MINUTES} minutes: p50 {}, p99 {} from the message to the answer.</p>",
            runs(h.answered),
            ms(h.p50_ms),
            ms(h.p99_ms)
        ),
        _ => format!("<p>No run answered in the last {MINUTES} minutes.</p>"),
    };
    format!(
        "<section aria-labelledby=\"latency\"><h2 id=\"latency\">Time to answer</h2>{summary}{}\
         <p class=\"muted\">Per {LATENCY_BUCKET_MINUTES} minutes: p50 solid, p99 dashed.</p></section>",
        charts::lines(&[&p50, &p99], "time to answer, p50 and p99, the last hour"),
    )
}

/// `1 run`, `3 runs`.
fn runs(n: i64) -> String {
    if n == 1 {
        "1 run".into()
    } else {
        format!("{n} runs")
    }
}

/// `850 ms`, `2.4 s`.
fn ms(v: f64) -> String {
    if v >= 1000.0 {
        format!("{:.1} s", v / 1000.0)
    } else {
        format!("{v:.0} ms")
    }
}

fn queues_section(queues: &[StageQueues]) -> String {
    let mut out = String::from(
        "<section aria-labelledby=\"queues\"><h2 id=\"queues\">Queues</h2>\
         <table><caption>Each stage's queue</caption><thead><tr><th scope=\"col\">Stage</th>\
         <th scope=\"col\">Waiting</th><th scope=\"col\">Consumers</th><th scope=\"col\">Parked</th></tr></thead><tbody>",
    );
    for q in queues {
        let stage = q.stage.as_str();
        let consumers = if q.consumers == 0 {
            "<strong class=\"error\">0</strong>".to_string()
        } else {
            q.consumers.to_string()
        };
        out.push_str(&format!(
            "<tr><td>{stage}</td><td>{}</td><td>{consumers}</td>\
             <td><a href=\"/console/parked?stage={stage}\">{}</a></td></tr>",
            q.messages, q.parked
        ));
    }
    out.push_str("</tbody></table></section>");
    out
}

/// Every platform whose delivery breaker is open, with when it resets (one Redis round
/// trip); `None` when Redis did not answer.
async fn open_breakers(cache: &hermes_cache::Cache) -> Option<Vec<(Platform, DateTime<Utc>)>> {
    let until = cache.breakers_open_until_ms(&Platform::ALL).await.ok()?;
    Some(
        Platform::ALL
            .into_iter()
            .zip(until)
            .filter_map(|(p, until)| Some((p, DateTime::from_timestamp_millis(until?)?)))
            .collect(),
    )
}

fn breakers_section(open: &[(Platform, DateTime<Utc>)]) -> String {
    let mut out =
        String::from("<section aria-labelledby=\"breakers\"><h2 id=\"breakers\">Breakers</h2>");
    if open.is_empty() {
        out.push_str("<p class=\"completed\">Every platform's breaker is closed.</p>");
    } else {
        out.push_str("<ul>");
        for (p, until) in open {
            out.push_str(&format!(
                "<li class=\"error\"><strong>{}</strong> open until {}: its replies wait in the retry queue.</li>",
                p.as_str(),
                until.to_rfc3339()
            ));
        }
        out.push_str("</ul>");
    }
    out.push_str("</section>");
    out
}
