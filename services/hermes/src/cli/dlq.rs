//! `hermes dlq`: look into the parking queues (`{ns}.<stage>.dead`), replay what was parked
//! once its cause is fixed, or purge it. The actions, and how they keep every message safe
//! while they look, are `hermes_operator::parked`'s, which the console shares; this file is
//! the command line, its output and its progress bar.

use std::collections::BTreeSet;
use std::io::{IsTerminal, Write};

use anyhow::{Context, bail};
use chrono::{DateTime, Utc};
use clap::{Args, Subcommand};
use hermes_bus::{Bus, Names};
use hermes_config::Config;
use hermes_operator::parked::{self, Selection};
use hermes_telemetry::Metrics;
use serde_json::json;

mod parked_list;

use parked_list::print_list;

/// A replay of at least this many messages draws a progress bar on stderr.
const PROGRESS_FROM: usize = 20;

#[derive(Subcommand)]
pub enum DlqCommand {
    /// List parked messages: id, kind, run, reason, age.
    List(Filter),
    /// Print one parked message (envelope and failure headers).
    Show {
        /// The message id.
        #[arg(value_name = "ID")]
        message: String,
        #[command(flatten)]
        filter: Filter,
    },
    /// Republish matching messages to their work queue (same id, attempt reset to 0).
    Replay(Filter),
    /// Delete matching messages for good.
    Purge {
        #[command(flatten)]
        filter: Filter,
        /// Really delete them.
        #[arg(long)]
        yes: bool,
    },
}

/// Which parked messages a command applies to.
#[derive(Args, Clone, Default)]
pub struct Filter {
    /// Only this stage's parking queue (router, llm, tools, delivery, webhooks, or the full
    /// queue name); default: all of them.
    #[arg(long, value_name = "Q")]
    queue: Option<String>,
    /// Only messages parked for this reason (e.g. service_unavailable, address_refused,
    /// rejected, delivery_limit).
    #[arg(long, value_name = "R")]
    reason: Option<String>,
    /// Only messages parked since T: a duration back from now (90s, 30m, 2h, 7d) or an
    /// RFC 3339 time.
    #[arg(long, value_name = "T")]
    since: Option<String>,
    /// Only the message with this id.
    #[arg(long)]
    id: Option<String>,
    /// Print JSON instead of text.
    #[arg(long)]
    json: bool,
}

/// `--since`: a duration back from `now` or an RFC 3339 time.
fn parse_since(s: &str, now: DateTime<Utc>) -> anyhow::Result<DateTime<Utc>> {
    if let Ok(t) = DateTime::parse_from_rfc3339(s) {
        return Ok(t.with_timezone(&Utc));
    }
    let (num, unit) = s.split_at(s.trim_end_matches(char::is_alphabetic).len());
    let n: i64 = num
        .parse()
        .ok()
        .with_context(|| format!("--since {s:?}: expected e.g. 30m, 2h, 7d or an RFC 3339 time"))?;
    let secs = match unit {
        "s" | "" => n,
        "m" => n * 60,
        "h" => n * 3600,
        "d" => n * 86_400,
        _ => bail!("--since {s:?}: the unit must be s, m, h or d"),
    };
    Ok(now - chrono::Duration::seconds(secs))
}

/// What one `hermes dlq` invocation does.
enum Action {
    List,
    Show,
    Replay,
    Purge { yes: bool },
}

/// Run `hermes dlq …`.
pub async fn run(config: &Config, cmd: DlqCommand) -> anyhow::Result<()> {
    let (action, filter) = match cmd {
        DlqCommand::List(f) => (Action::List, f),
        DlqCommand::Show {
            message,
            mut filter,
        } => {
            filter.id = Some(message);
            (Action::Show, filter)
        }
        DlqCommand::Replay(f) => (Action::Replay, f),
        DlqCommand::Purge { filter, yes } => (Action::Purge { yes }, filter),
    };
    let now = Utc::now();
    let names = Names::new(config.namespace.clone());
    let bus = Bus::connect(
        config.amqp_url.clone(),
        names,
        config.bus.clone(),
        Metrics::new(),
    )
    .await
    .context("cannot reach RabbitMQ (AMQP_URL)")?;
    let result = act(&bus, &action, &filter, now).await;
    bus.close().await;
    result
}

/// The selection `filter` names.
fn selection(bus: &Bus, filter: &Filter, now: DateTime<Utc>) -> anyhow::Result<Selection> {
    let stages = match filter.queue.as_deref() {
        Some(q) => vec![parked::stage_named(bus, q).context("--queue")?],
        None => Vec::new(),
    };
    Ok(Selection {
        stages,
        reason: filter.reason.clone(),
        since: filter
            .since
            .as_deref()
            .map(|s| parse_since(s, now))
            .transpose()?,
        ids: filter.id.clone().map(|id| BTreeSet::from([id])),
    })
}

async fn act(
    bus: &Bus,
    action: &Action,
    filter: &Filter,
    now: DateTime<Utc>,
) -> anyhow::Result<()> {
    let selection = selection(bus, filter, now)?;
    match action {
        Action::List => {
            print_list(&parked::list(bus, &selection).await?, filter.json, now);
            Ok(())
        }
        Action::Show => {
            let shown = parked::list(bus, &selection).await?;
            let Some(p) = shown.first() else {
                bail!(
                    "no parked message with id {}",
                    filter.id.as_deref().unwrap_or("?")
                );
            };
            let mut v = p.to_json(now);
            v["envelope"] = p.envelope_json();
            if filter.json {
                println!("{v}");
            } else {
                println!("{}", serde_json::to_string_pretty(&v)?);
            }
            Ok(())
        }
        Action::Purge { yes: false } => {
            let n = parked::list(bus, &selection).await?.len();
            bail!("{n} message(s) match; nothing deleted: add --yes to purge them");
        }
        Action::Purge { yes: true } => {
            report(filter.json, "purged", parked::purge(bus, &selection).await?);
            Ok(())
        }
        Action::Replay => {
            let mut progress = Progress::default();
            let done = parked::replay(bus, &selection, &mut |done, total| {
                progress.draw(done, total)
            })
            .await;
            progress.end();
            report(filter.json, "replayed", done?);
            Ok(())
        }
    }
}

fn report(json: bool, what: &str, n: usize) {
    if json {
        println!("{}", json!({ what: n }));
    } else {
        println!("{what} {n} message(s)");
    }
}

/// The replay's progress bar on stderr, from [`PROGRESS_FROM`] messages.
#[derive(Default)]
struct Progress {
    drawn: bool,
}

impl Progress {
    fn draw(&mut self, done: usize, total: usize) {
        const WIDTH: usize = 30;
        if total < PROGRESS_FROM {
            return;
        }
        self.drawn = true;
        let filled = done * WIDTH / total.max(1);
        let mut err = std::io::stderr();
        let end = if err.is_terminal() { "\r" } else { "\n" };
        // Only a terminal redraws in place; a log gets a line per tenth.
        if !err.is_terminal() && done != total && !done.is_multiple_of((total / 10).max(1)) {
            return;
        }
        let _ = write!(
            err,
            "replaying [{}{}] {done}/{total}{end}",
            "#".repeat(filled),
            " ".repeat(WIDTH - filled)
        );
        let _ = err.flush();
    }

    fn end(&self) {
        if self.drawn {
            eprintln!();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn since_takes_durations_and_times() {
        let now = Utc::now();
        assert_eq!(
            parse_since("30m", now).unwrap(),
            now - chrono::Duration::minutes(30)
        );
        assert_eq!(
            parse_since("2d", now).unwrap(),
            now - chrono::Duration::days(2)
        );
        assert_eq!(
            parse_since("2026-11-01T00:00:00Z", now)
                .unwrap()
                .to_rfc3339(),
            "2026-11-01T00:00:00+00:00"
        );
        assert!(parse_since("soon", now).is_err());
        assert!(parse_since("3w", now).is_err());
    }
}
