//! Accepting one normalized message, the same for every way a message comes in (ingest's
//! routes, the Discord Gateway connector): skip it if the platform
//! already delivered it, hold back a sender over their rate, hand it to the router with a
//! broker confirm, and only then remember its id. Redis trouble never refuses a message:
//! dedupe and rate limits fail open (counted), the router's unique index still guarantees
//! one run per platform message.
//!
//! The REST channel's message ids are its callers' own, so they are scoped by the key that
//! sent them (docs/security.md, keys and tenants), claimed before the publish so that two
//! copies sent at once make one run, and checked against PostgreSQL too: a repeat is told
//! the run that answers it, after 24 hours as well, never given a run that will not exist.
//!
//! A chat message acknowledged to its platform is never dropped for rate reasons
//! (docs/channels.md, inbound rate limits): over the sender's rate it goes to the router's
//! slow lane, a wait queue it leaves after `HERMES_INBOUND_DELAY_SECS`, and is answered
//! then. A try the broker refused (503) gives its token back, so a platform retrying
//! through an outage does not use up the sender's rate.

use std::time::Duration;

use hermes_cache::dedupe::Dedupe;
use hermes_cache::rate_limit::RateLimiter;
use hermes_cache::rate_limit::Verdict;
use hermes_types::envelope::Envelope;
use hermes_types::ids::RunId;
use hermes_types::model::{FinishReason, Inbound, Platform, Reply};
use hermes_types::stage::{Outgoing, Stage};
use hermes_types::trace::TraceParent;
use redis::AsyncCommands;

use crate::Ctx;
use crate::http::ApiError;

/// What accepting a message needs: the process's handles and the dedupe and rate-limit
/// views of Redis. Cheap to clone.
#[derive(Clone)]
pub struct Intake {
    /// The process's handles: the bus it publishes on, its config and metrics.
    pub ctx: Ctx,
    /// Platform message ids already accepted (24 hours).
    pub dedupe: Dedupe,
    /// Senders' inbound rates (and ingest's per-key limits).
    pub limiter: RateLimiter,
}

impl Intake {
    /// The intake of a process with `ctx`.
    pub fn new(ctx: Ctx) -> Self {
        Self {
            dedupe: Dedupe::new(ctx.cache.clone()),
            limiter: RateLimiter::new(ctx.cache.clone()),
            ctx,
        }
    }
}

/// What the sender is told, once a minute at most, when over their inbound rate.
pub const SLOW_DOWN: &str =
    "You're sending messages faster than I can answer them. Please wait a moment and try again.";

/// What became of an accepted request's message.
#[derive(Debug, PartialEq, Eq)]
pub enum Accepted {
    /// Published to the router as this run.
    Routed(RunId),
    /// The platform delivered this message before; nothing new was created. The run that
    /// answers it, when known (always for the REST channel unless the first copy is still on
    /// its way to the router while Redis is down).
    Duplicate(Option<RunId>),
    /// A chat sender is over their rate: the message waits in the router's slow lane as
    /// this run and is routed after `HERMES_INBOUND_DELAY_SECS`.
    Delayed(RunId),
    /// An API or REST caller is over their rate; the message was not routed (they are
    /// answered 429 and retry).
    RateLimited { retry_after: Duration },
}

/// Accept `inbound`; `Err` (503) only when the broker did not take it.
pub async fn accept(
    app: &Intake,
    inbound: Inbound,
    traceparent: Option<TraceParent>,
) -> Result<Accepted, ApiError> {
    accept_as(app, inbound, traceparent, RunId::new()).await
}

/// [`accept`] as run `run` when it is routed: a run id derived from the caller's request id
/// (ingest's `request_id`) makes a retry of a try the broker may have taken the same run,
/// which the router does not make twice.
pub async fn accept_as(
    app: &Intake,
    mut inbound: Inbound,
    traceparent: Option<TraceParent>,
    run: RunId,
) -> Result<Accepted, ApiError> {
    without_nul(&mut inbound);
    let event = &inbound.event;
    let platform = event.platform;
    let m = &app.ctx.metrics;
    let dedupe_id = dedupe_id(&inbound);
    // One round trip: the dedupe check, then a token from the sender's bucket.
    let seen_key = dedupe_id.as_deref().map(|id| app.dedupe.key(platform, id));
    // Identifiers never appear in key names (a WhatsApp sender id is a phone number).
    let bucket = format!(
        "in:{}:{}",
        platform.as_str(),
        app.ctx.cache.opaque(&sender_scope(&inbound))
    );
    let limit = app.ctx.config.ingest.inbound_rate_for(platform);
    match app
        .limiter
        .take_unless_seen(&bucket, limit, seen_key.as_deref())
        .await
    {
        Ok(Verdict::Allowed) => {}
        Ok(Verdict::Seen) => {
            let run = match (platform, dedupe_id.as_deref()) {
                (Platform::Rest, Some(id)) => existing_run(app, &inbound, id).await,
                _ => None,
            };
            return Ok(duplicate(app, platform, run));
        }
        Ok(Verdict::Limited { retry_after }) => {
            tracing::info!(
                platform = platform.as_str(),
                retry_after_ms = retry_after.as_millis() as u64,
                "sender over the inbound rate"
            );
            if !is_chat(platform) {
                m.http
                    .ingest_messages
                    .with_label_values(&[platform.as_str(), "rate_limited"])
                    .inc();
                return Ok(Accepted::RateLimited { retry_after });
            }
            let run = slow_lane(app, &inbound, traceparent.clone()).await?;
            remember(app, &inbound, run).await;
            m.http
                .ingest_messages
                .with_label_values(&[platform.as_str(), "delayed"])
                .inc();
            slow_down_once(app, &inbound, traceparent).await;
            return Ok(Accepted::Delayed(run));
        }
        Err(e) => {
            tracing::warn!(error = %e, "dedupe and rate limit unavailable; letting the message through")
        }
    }
    // A REST message id is claimed before the publish, and looked up in PostgreSQL, whose
    // runs outlive Redis' 24 hours.
    let claimed = match (platform, dedupe_id.as_deref()) {
        (Platform::Rest, Some(id)) => match claim(app, &inbound, id, run).await {
            Ok(claimed) => claimed,
            Err(existing) => return Ok(duplicate(app, platform, existing)),
        },
        _ => false,
    };
    let envelope = Envelope::new(
        run,
        Some(traceparent.unwrap_or_else(TraceParent::generate)),
        &inbound,
    );
    if let Err(e) = app.ctx.bus.publish(&envelope).await {
        m.http
            .ingest_messages
            .with_label_values(&[platform.as_str(), "unavailable"])
            .inc();
        tracing::error!(%run, error = %e, "inbound message not accepted by the broker");
        // The try is refused: its token goes back, or the platform's retries through an
        // outage would use up the sender's rate and be slowed down afterwards.
        if let Err(e) = app.limiter.give_back(&bucket, limit).await {
            tracing::warn!(error = %e, "cannot give the refused try's rate token back");
        }
        // Likewise the claim: the retry is not a duplicate of a message never queued.
        if claimed
            && let Some(id) = &dedupe_id
            && let Err(e) = app.dedupe.forget(platform, id).await
        {
            tracing::warn!(error = %e, "cannot release the refused try's message id");
        }
        return Err(unavailable());
    }
    if !claimed {
        remember(app, &inbound, run).await;
    }
    m.http
        .ingest_messages
        .with_label_values(&[platform.as_str(), "accepted"])
        .inc();
    // The router logs every run at info; here a line per message would double the volume.
    tracing::debug!(%run, platform = platform.as_str(), "message accepted");
    Ok(Accepted::Routed(run))
}

/// Drop NUL characters from a channel message's text and sender name: PostgreSQL stores no
/// NUL in text, and a platform's message holding one must still be answered, not refused
/// (the API surfaces refuse it with a 400 instead: `api_body`).
fn without_nul(inbound: &mut Inbound) {
    let event = &mut inbound.event;
    for text in [&mut event.text, &mut event.sender_name]
        .into_iter()
        .flatten()
    {
        if text.contains('\0') {
            text.retain(|c| c != '\0');
        }
    }
}

fn unavailable() -> ApiError {
    ApiError::unavailable("the message could not be queued; retry shortly")
}

/// Chat platforms must be answered 2xx or they retry (and Telegram holds the bot's later
/// updates meanwhile); API and REST callers can be told 429.
fn is_chat(platform: Platform) -> bool {
    !matches!(platform, Platform::Rest | Platform::Api)
}

/// The id `inbound` is deduplicated by: the platform's message id, and on the REST channel
/// the key that sent it before it (two customers may both send their `order-1`).
fn dedupe_id(inbound: &Inbound) -> Option<String> {
    let id = inbound.event.external_message_id.as_deref()?;
    Some(match inbound.event.platform {
        Platform::Rest => format!("{}:{id}", key_scope(inbound)),
        _ => id.to_string(),
    })
}

/// Whose sender `inbound` comes from: on the REST channel a sender id is its key's own.
fn sender_scope(inbound: &Inbound) -> String {
    let event = &inbound.event;
    match event.platform {
        Platform::Rest => format!("rest:{}:{}", key_scope(inbound), event.sender_id),
        p => format!("{}:{}", p.as_str(), event.sender_id),
    }
}

/// The REST key that sent `inbound`, or `operator` for `API_SERVER_KEY`.
fn key_scope(inbound: &Inbound) -> String {
    inbound
        .api_key_id
        .map_or_else(|| "operator".to_string(), |k| k.to_string())
}

/// Count and answer a duplicate.
fn duplicate(app: &Intake, platform: Platform, run: Option<RunId>) -> Accepted {
    app.ctx
        .metrics
        .http
        .ingest_messages
        .with_label_values(&[platform.as_str(), "duplicate"])
        .inc();
    Accepted::Duplicate(run)
}

/// The run of a REST message id Redis remembers, else the one PostgreSQL holds.
async fn existing_run(app: &Intake, inbound: &Inbound, id: &str) -> Option<RunId> {
    match app.dedupe.run_of(inbound.event.platform, id).await {
        Ok(Some(run)) => return Some(run),
        Ok(None) => {}
        Err(e) => tracing::warn!(error = %e, "cannot read the remembered run; asking PostgreSQL"),
    }
    stored_run(app, inbound).await.ok().flatten()
}

/// The run PostgreSQL holds for `inbound`'s message id and key.
async fn stored_run(app: &Intake, inbound: &Inbound) -> Result<Option<RunId>, ApiError> {
    let Some(external) = inbound.event.external_message_id.as_deref() else {
        return Ok(None);
    };
    let client = app
        .ctx
        .db
        .get()
        .await
        .map_err(|_| ApiError::unavailable("cannot check the message id right now"))?;
    hermes_db::runs::find_by_message(
        &client,
        inbound.event.platform,
        inbound.api_key_id,
        external,
    )
    .await
    .map_err(|_| ApiError::unavailable("cannot check the message id right now"))
}

/// Claim a REST message id for `run`: `Ok(true)` when Redis now holds it for this message,
/// `Ok(false)` when Redis cannot be asked (PostgreSQL still answers for older runs);
/// `Err(existing)` when another copy holds it (or a run in PostgreSQL does).
async fn claim(
    app: &Intake,
    inbound: &Inbound,
    id: &str,
    run: RunId,
) -> Result<bool, Option<RunId>> {
    let platform = inbound.event.platform;
    let claimed = match app.dedupe.claim(platform, id, run).await {
        Ok(hermes_cache::dedupe::Claim::Claimed) => true,
        Ok(hermes_cache::dedupe::Claim::Held(existing)) => return Err(existing),
        Err(e) => {
            tracing::warn!(error = %e, "cannot claim the message id; asking PostgreSQL only");
            false
        }
    };
    // Redis forgets after 24 hours (or when restarted); the run does not. With PostgreSQL
    // unreadable too the message goes on: the unique index still stops a second run.
    if let Ok(Some(existing)) = stored_run(app, inbound).await {
        if claimed && let Err(e) = app.dedupe.remember(platform, id, existing).await {
            tracing::warn!(error = %e, "cannot remember the message id's run");
        }
        return Err(Some(existing));
    }
    Ok(claimed)
}

/// Remember the platform's id of an accepted message as `run`, so its redelivery is a
/// duplicate.
async fn remember(app: &Intake, inbound: &Inbound, run: RunId) {
    if let Some(id) = dedupe_id(inbound)
        && let Err(e) = app.dedupe.remember(inbound.event.platform, &id, run).await
    {
        tracing::warn!(error = %e, "cannot remember the message id; a redelivery will be caught by the router");
    }
}

/// Queue `inbound` in the router's slow lane (confirmed by the broker, or 503).
async fn slow_lane(
    app: &Intake,
    inbound: &Inbound,
    traceparent: Option<TraceParent>,
) -> Result<RunId, ApiError> {
    let run = RunId::new();
    let envelope = Envelope::new(
        run,
        Some(traceparent.unwrap_or_else(TraceParent::generate)),
        inbound,
    );
    let bus = &app.ctx.bus;
    let lane = bus
        .names()
        .wait(Stage::Router, app.ctx.config.bus.inbound_delay);
    if let Err(e) = bus
        .publish_to("", &lane, &lane, &Outgoing::from_envelope(&envelope))
        .await
    {
        app.ctx
            .metrics
            .http
            .ingest_messages
            .with_label_values(&[inbound.event.platform.as_str(), "unavailable"])
            .inc();
        tracing::error!(%run, error = %e, "delayed message not accepted by the broker");
        return Err(unavailable());
    }
    Ok(run)
}

/// Tell a chat sender to slow down, once per minute per sender (the platform is still
/// answered 2xx so it does not retry). The REST channel answers 429 instead.
async fn slow_down_once(app: &Intake, inbound: &Inbound, traceparent: Option<TraceParent>) {
    let platform = inbound.event.platform;
    if !is_chat(platform) {
        return;
    }
    let key = app.ctx.cache.key(format_args!(
        "slowdown:{}:{}",
        platform.as_str(),
        app.ctx.cache.opaque(&inbound.event.sender_id)
    ));
    let mut c = app.ctx.cache.conn();
    let first: Result<bool, _> = redis::cmd("SET")
        .arg(&key)
        .arg(1)
        .arg("NX")
        .arg("EX")
        .arg(60)
        .query_async(&mut c)
        .await;
    if !matches!(first, Ok(true)) {
        return;
    }
    let reply = Reply::notice(inbound.reply_to(), FinishReason::RateLimited, SLOW_DOWN);
    let env = Envelope::new(RunId::new(), traceparent, &reply);
    if let Err(e) = app.ctx.bus.publish(&env).await {
        tracing::warn!(error = %e, "cannot queue the slow-down reply");
        let _: Result<(), _> = c.del(&key).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hermes_types::model::MessageEvent;

    #[test]
    fn a_channel_message_loses_its_nul_characters_and_keeps_the_rest() {
        let mut inbound = Inbound::of(MessageEvent {
            platform: Platform::Telegram,
            sender_id: "42".into(),
            chat_id: "42".into(),
            text: Some("hel\0lo".into()),
            media: Vec::new(),
            external_message_id: Some("7".into()),
            sender_name: Some("\0Ann".into()),
            received_at: chrono::Utc::now(),
            metadata: None,
        });
        without_nul(&mut inbound);
        assert_eq!(inbound.event.text.as_deref(), Some("hello"));
        assert_eq!(inbound.event.sender_name.as_deref(), Some("Ann"));
    }
}
