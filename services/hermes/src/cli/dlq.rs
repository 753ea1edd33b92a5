//! `hermes dlq`: look into the parking queues (`{ns}.<stage>.dead`), replay what was parked
//! once its cause is fixed, or purge it.
//!
//! Messages are taken with `basic.get` and held unacknowledged while the command decides:
//! a replayed one is acked off the parking queue only after the broker confirmed its copy in
//! the work queue (same message id, so the consumer's idempotency still holds; attempt reset
//! to 0, so the retry schedule applies again); a purged one is acked; every other one is
//! returned untouched. A failure returns whatever was not yet settled, so nothing is lost.
//!
//! Returning a message is not a `nack` with requeue: a quorum queue counts each one as a
//! failed delivery, and a broker with a delivery limit on parking queues (RabbitMQ 4 sets 20
//! by default) would drop a message after twenty looks. The command publishes an identical
//! copy (body, properties, failure headers, message id) back to the parking queue, waits for
//! the broker's confirm, and only then acks the original. Every message is taken before any
//! is returned, so one pass keeps their order.

use std::io::{IsTerminal, Write};

use anyhow::{Context, bail};
use chrono::{DateTime, Utc};
use clap::{Args, Subcommand};
use hermes_bus::{Bus, Names, Outgoing, Stage};
use hermes_config::Config;
use hermes_telemetry::Metrics;
use lapin::Channel;
use lapin::Confirmation;
use lapin::message::BasicGetMessage;
use lapin::options::{BasicAckOptions, BasicGetOptions, BasicPublishOptions, ConfirmSelectOptions};
use lapin::types::FieldTable;
use serde_json::json;

mod parked;

use parked::{Parked, print_list};

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

/// The parking queues `--queue` names (a stage or a full queue name); all when absent.
fn stages(names: &Names, queue: Option<&str>) -> anyhow::Result<Vec<Stage>> {
    let Some(q) = queue else {
        return Ok(Stage::ALL.to_vec());
    };
    Stage::ALL
        .into_iter()
        .find(|s| s.as_str() == q || names.parking(*s) == q)
        .map(|s| vec![s])
        .with_context(|| {
            format!(
                "--queue {q:?} is not a parking queue: use one of {}",
                Stage::ALL.map(|s| s.as_str()).join(", ")
            )
        })
}

struct Matcher {
    reason: Option<String>,
    since: Option<DateTime<Utc>>,
    id: Option<String>,
}

impl Matcher {
    fn matches(&self, p: &Parked) -> bool {
        self.reason.as_deref().is_none_or(|r| p.reason == r)
            && self
                .since
                .is_none_or(|since| p.parked_at.is_some_and(|t| t >= since))
            && self.id.as_deref().is_none_or(|id| p.id == id)
    }
}

enum Action {
    List,
    Show,
    Replay,
    Purge,
}

/// Run `hermes dlq …`.
pub async fn run(config: &Config, cmd: DlqCommand) -> anyhow::Result<()> {
    let (action, filter, yes) = match cmd {
        DlqCommand::List(f) => (Action::List, f, false),
        DlqCommand::Show {
            message,
            mut filter,
        } => {
            filter.id = Some(message);
            (Action::Show, filter, false)
        }
        DlqCommand::Replay(f) => (Action::Replay, f, false),
        DlqCommand::Purge { filter, yes } => (Action::Purge, filter, yes),
    };
    let now = Utc::now();
    let matcher = Matcher {
        reason: filter.reason.clone(),
        since: filter
            .since
            .as_deref()
            .map(|s| parse_since(s, now))
            .transpose()?,
        id: filter.id.clone(),
    };
    let names = Names::new(config.namespace.clone());
    let stages = stages(&names, filter.queue.as_deref())?;
    let bus = Bus::connect(
        config.amqp_url.clone(),
        names.clone(),
        config.bus.clone(),
        Metrics::new(),
    )
    .await
    .context("cannot reach RabbitMQ (AMQP_URL)")?;
    let request = Request {
        stages,
        matcher,
        action,
        filter,
        yes,
        now,
    };
    let result = act(&bus, &names, &request).await;
    bus.close().await;
    result
}

/// What one `hermes dlq` invocation asked for.
struct Request {
    stages: Vec<Stage>,
    matcher: Matcher,
    action: Action,
    filter: Filter,
    yes: bool,
    now: DateTime<Utc>,
}

async fn act(bus: &Bus, names: &Names, r: &Request) -> anyhow::Result<()> {
    let ch = bus.channel().await?;
    let back = Returner::open(bus).await?;
    // Take every message (held unacked) so each is looked at once.
    let mut held: Vec<(Parked, BasicGetMessage)> = Vec::new();
    for &stage in &r.stages {
        let queue = names.parking(stage);
        while let Some(m) = ch
            .basic_get(queue.clone().into(), BasicGetOptions::default())
            .await
            .with_context(|| format!("cannot read {queue}"))?
        {
            held.push((Parked::read(stage, &queue, &m), m));
        }
    }
    let (chosen, others): (Vec<_>, Vec<_>) =
        held.into_iter().partition(|(p, _)| r.matcher.matches(p));
    back.all(&others).await?;
    let outcome = settle(
        bus, names, &back, chosen, &r.action, &r.filter, r.yes, r.now,
    )
    .await;
    let _ = ch.close(200, "done".into()).await;
    let _ = back.ch.close(200, "done".into()).await;
    outcome
}

/// Returns messages to their parking queue as confirmed copies (see the module doc).
struct Returner {
    ch: Channel,
}

impl Returner {
    async fn open(bus: &Bus) -> anyhow::Result<Self> {
        let ch = bus.channel().await?;
        ch.confirm_select(ConfirmSelectOptions::default()).await?;
        Ok(Self { ch })
    }

    /// Put an identical copy of `m` at the tail of `queue`, then ack the original.
    async fn give_back(&self, queue: &str, m: &BasicGetMessage) -> anyhow::Result<()> {
        let mut props = m.delivery.properties.clone();
        // The broker's count of the original's deliveries does not belong to the copy.
        if let Some(h) = props.headers().clone() {
            let mut h = h.inner().clone();
            h.remove("x-delivery-count");
            props = props.with_headers(FieldTable::from(h));
        }
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
            .context("cannot return a message to its parking queue")?
            .await
            .context("cannot return a message to its parking queue")?;
        if let Confirmation::Nack(_) = confirm {
            bail!(
                "{queue} refused the returned copy; the original stays held until this command exits, then goes back by itself"
            );
        }
        m.delivery
            .acker
            .ack(BasicAckOptions::default())
            .await
            .context("the copy is back in the parking queue but the original could not be acked; it may show twice")?;
        Ok(())
    }

    async fn all(&self, held: &[(Parked, BasicGetMessage)]) -> anyhow::Result<()> {
        for (p, m) in held {
            self.give_back(&p.queue, m).await?;
        }
        Ok(())
    }
}

#[allow(clippy::too_many_arguments)] // one call site; the pieces of one request
async fn settle(
    bus: &Bus,
    names: &Names,
    back: &Returner,
    chosen: Vec<(Parked, BasicGetMessage)>,
    action: &Action,
    filter: &Filter,
    yes: bool,
    now: DateTime<Utc>,
) -> anyhow::Result<()> {
    match action {
        Action::List => {
            print_list(&chosen, filter.json, now);
            back.all(&chosen).await
        }
        Action::Show => {
            let Some((p, _)) = chosen.first() else {
                back.all(&chosen).await?;
                bail!(
                    "no parked message with id {}",
                    filter.id.as_deref().unwrap_or("?")
                );
            };
            let mut v = p.to_json(now);
            v["envelope"] = match &p.envelope {
                Some(e) => serde_json::to_value(e)?,
                None => json!(String::from_utf8_lossy(&p.raw)),
            };
            // A Discord answer carries its interaction's live token: shown masked (a replay
            // sends the message as it was).
            hermes_types::model::redact_tokens(&mut v["envelope"]);
            if filter.json {
                println!("{v}");
            } else {
                println!("{}", serde_json::to_string_pretty(&v)?);
            }
            back.all(&chosen).await
        }
        Action::Purge => {
            if !yes {
                let n = chosen.len();
                back.all(&chosen).await?;
                bail!("{n} message(s) match; nothing deleted: add --yes to purge them");
            }
            for (_, m) in &chosen {
                m.delivery.acker.ack(BasicAckOptions::default()).await?;
            }
            report(filter.json, "purged", chosen.len());
            Ok(())
        }
        Action::Replay => replay(bus, names, back, chosen, filter.json).await,
    }
}

fn report(json: bool, what: &str, n: usize) {
    if json {
        println!("{}", json!({ what: n }));
    } else {
        println!("{what} {n} message(s)");
    }
}

/// Republish each message to its work queue, confirmed, then ack it off the parking queue.
async fn replay(
    bus: &Bus,
    names: &Names,
    back: &Returner,
    chosen: Vec<(Parked, BasicGetMessage)>,
    json: bool,
) -> anyhow::Result<()> {
    let total = chosen.len();
    let progress = total >= PROGRESS_FROM;
    let mut done = 0usize;
    let mut iter = chosen.into_iter();
    while let Some((p, m)) = iter.next() {
        let published = match &p.envelope {
            Some(env) => {
                let mut again = env.clone();
                again.attempt = 0;
                let queue = names.queue(p.stage);
                bus.publish_to(
                    &names.work_exchange(),
                    p.stage.as_str(),
                    &queue,
                    &Outgoing::from_envelope(&again),
                )
                .await
                .with_context(|| format!("cannot republish {} to {queue}", p.id))
            }
            None => Err(anyhow::anyhow!(
                "message {} in {} is not a valid envelope; it cannot be replayed (purge it)",
                p.id,
                p.queue
            )),
        };
        if let Err(e) = published {
            // Nothing is lost: this one and the rest go back where they were.
            back.give_back(&p.queue, &m).await?;
            for (rest_p, rest) in iter {
                back.give_back(&rest_p.queue, &rest).await?;
            }
            if progress {
                eprintln!();
            }
            return Err(e.context(format!("replayed {done} of {total} before stopping")));
        }
        m.delivery
            .acker
            .ack(BasicAckOptions::default())
            .await
            .context("the copy is in the work queue but the parked original could not be acked; it may be replayed twice (idempotent by id)")?;
        done += 1;
        if progress {
            draw(done, total);
        }
    }
    if progress {
        eprintln!();
    }
    report(json, "replayed", done);
    Ok(())
}

fn draw(done: usize, total: usize) {
    const WIDTH: usize = 30;
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
