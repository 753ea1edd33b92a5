//! The delivery stage for one reply: hand it to whoever waits, then close the run.
//!
//! A chat reply is sent before the commit: the platform's breaker is asked first (an open
//! breaker skips the send and retries it later); the text becomes the platform's messages
//! (split to its size, one Markdown image as a photo); each part waits its turn at the rate
//! gate and is sent with in-call retries, skipping parts an earlier attempt of the same
//! message delivered; a failure that remains goes to the queued retry schedule, or is
//! parked with its reason. A REST caller's callback is POSTed the same way. Then the run row
//! is closed (`runs::close`) in the transaction that records the message as processed, and
//! only then is a waiting API caller told (through the run's event stream in Redis, written
//! only where a reader can exist: an API or REST run, or a chat run someone follows), so a
//! caller never learns of an answer the database does not hold; if Redis is down the caller
//! still gets it from the row. A platform without credentials has no sender: its replies
//! are parked, intact, for `hermes dlq replay` once one is configured; a reply parked for
//! good closes its run as failed and refunded in the stage's parking hook
//! (`runs::close::undelivered`). A Forge run's reply is sent nowhere: its agent answered
//! through the Forge's tools, so delivery only closes it.
//!
//! An external agent's draft updates come through the same queue and are shown (or not) in
//! `handler/drafts.rs`; the final reply of a shown draft edits its message instead of
//! sending the text again.
//!
//! A WhatsApp reply outside the 24-hour customer-service window goes as the configured
//! template, or is parked as `outside_window` (`window.rs`).

mod drafts;

use std::collections::HashSet;
use std::time::Duration;

use anyhow::anyhow;
use hermes_bus::Stage;
use hermes_cache::run_events::{RunEvent, RunEvents};
use hermes_channels::Outbound as _;
use hermes_channels::outbound::how_to_enable;
use hermes_channels::{RetryPolicy, SendFailure, Sender, Senders};
use hermes_db::platform_sends::{NewSend, SendStatus};
use hermes_db::runs::close;
use hermes_db::{Transaction, delivery_sends, forge_answers};
use hermes_net::failure::FailureReason;
use hermes_runtime::Ctx;
use hermes_runtime::stage::{Handler, ParkCause, StageError};
use hermes_types::envelope::{Envelope, MessageKind};
use hermes_types::ids::DraftId;
use hermes_types::model::{FailureCode, ForgeAnswer, Outcome, Platform, Reply, ReplyTo};

use crate::bookkeeping::Bookkeeping;
use crate::breaker::Breakers;
use crate::callback::Callbacks;
use crate::consent::ConsentRule;
use crate::draft_plan::{DraftOutcome, Outbound, draft_lease};
use crate::rate_gate::RateGate;
use crate::sent_parts::SentParts;
use crate::window::{MessengerPlan, MessengerWindow, Plan, WindowRule};

/// Every outbound request's deadline (docs/channels.md: a shared client with a 10 s timeout).
const HTTP_TIMEOUT: Duration = Duration::from_secs(10);

pub struct DeliveryStage {
    ctx: Ctx,
    events: RunEvents,
    policy: RetryPolicy,
    callbacks: Callbacks,
    senders: Senders,
    breakers: Breakers,
    gate: RateGate,
    sent: SentParts,
    books: Bookkeeping,
    window: WindowRule,
    consent: ConsentRule,
    messenger_window: MessengerWindow,
}

impl DeliveryStage {
    pub fn new(ctx: Ctx) -> anyhow::Result<Self> {
        let settings = &ctx.config.delivery;
        let http = hermes_net::http::client_builder(hermes_net::http::USER_AGENT)
            .timeout(HTTP_TIMEOUT)
            .build()?;
        let policy = RetryPolicy {
            pauses: settings.send_pauses.clone(),
            max_retry_after: settings.max_retry_after,
            ..RetryPolicy::default()
        };
        // The draft outcomes and every platform's failure series start at 0, so alerts and
        // rate() see them before the first event.
        for outcome in DraftOutcome::ALL {
            ctx.metrics
                .agents
                .draft_updates
                .with_label_values(&[outcome.as_str()]);
        }
        for platform in Platform::ALL.into_iter().filter(|p| p.is_chat()) {
            for reason in FailureReason::ALL {
                ctx.metrics
                    .delivery
                    .attempts
                    .with_label_values(&[platform.as_str(), reason.as_str()]);
            }
        }
        let configured = settings.configured();
        // Discord's interaction answers need no credential, so its sender is always there.
        if configured.len() <= 1 {
            tracing::warn!(
                senders = ?configured,
                "no channel sender configured but Discord's: other platforms' replies will be parked"
            );
        } else {
            tracing::info!(senders = ?configured, "channel senders configured");
        }
        Ok(Self {
            events: RunEvents::new(ctx.cache.clone(), &ctx.config),
            senders: Senders::new(settings, &ctx.config.channels, &http),
            breakers: Breakers::new(
                ctx.cache.clone(),
                settings.breaker,
                ctx.metrics.clone(),
                ctx.alerts.clone(),
            ),
            gate: RateGate::new(ctx.cache.clone(), settings.rate_gate, ctx.metrics.clone())
                .for_whatsapp_number(settings.whatsapp.as_ref().map_or("", |w| w.number()))
                .for_sms_number(settings.sms.as_ref().map(|s| (s.from.as_str(), s.per_sec))),
            sent: SentParts::new(ctx.db.clone()),
            books: Bookkeeping::new(&ctx),
            window: WindowRule::new(ctx.db.clone(), ctx.config.channels.whatsapp.clone()),
            consent: ConsentRule::new(ctx.db.clone()),
            messenger_window: MessengerWindow::new(
                ctx.db.clone(),
                ctx.config.channels.messenger.outside_window_tag,
            ),
            callbacks: Callbacks::new(ctx.clone(), policy.clone()),
            policy,
            ctx,
        })
    }

    /// Count one failed try towards `hermes_delivery_attempts_total`.
    fn count_attempt(&self, platform: Platform, reason: FailureReason) {
        self.ctx
            .metrics
            .delivery
            .attempts
            .with_label_values(&[platform.as_str(), reason.as_str()])
            .inc();
    }

    fn count_delivery(&self, platform: Platform, outcome: &str) {
        self.ctx
            .metrics
            .delivery
            .replies
            .with_label_values(&[platform.as_str(), outcome])
            .inc();
    }

    /// Send the reply's text to its chat: breaker, parts (split; an image as a photo), rate
    /// gate, send with retries. The answer to a `draft` replaces the draft where it is shown.
    async fn send_to_chat(
        &self,
        env: &Envelope,
        to: &ReplyTo,
        text: &str,
        draft: Option<DraftId>,
    ) -> Result<(), StageError> {
        let platform = to.platform;
        let Some(sender) = self.senders.get(platform) else {
            self.count_delivery(platform, "no_sender");
            return Err(StageError::Retry {
                reason: FailureReason::NoSender,
                error: anyhow!(
                    "no sender configured for {} ({}): reply parked for replay",
                    platform.as_str(),
                    how_to_enable(platform)
                ),
            });
        };
        if let Some(until) = self.breakers.open_until(platform).await {
            self.count_attempt(platform, FailureReason::BreakerOpen);
            return Err(StageError::Retry {
                reason: FailureReason::BreakerOpen,
                error: anyhow!(
                    "{} breaker open until {}: send skipped",
                    platform.as_str(),
                    until.to_rfc3339()
                ),
            });
        }
        // One copy of this reply sends at a time; parts an earlier attempt or copy already
        // delivered are not sent twice.
        let lease = self.sent.lease(env.id).await?;
        // A part its platform reported failed after accepting it, for good or once too
        // often: the reply was queued to be parked with the reason (docs/channels.md,
        // statuses), and the stage parks it and fails the run.
        if let Some((reason, detail)) = lease.park.clone() {
            self.sent.release(lease).await;
            let reason = FailureReason::parse(&reason).unwrap_or(FailureReason::InvalidRecipient);
            self.count_delivery(platform, reason.as_str());
            return Err(StageError::Retry {
                reason,
                error: anyhow!(
                    detail.unwrap_or_else(|| "the platform reported the message failed".into())
                ),
            });
        }
        let sent = match (lease.finished, draft, sender.drafts()) {
            (true, _, _) => Ok(()),
            (false, Some(draft), Some(_)) => {
                self.replace_draft(env, sender, to, text, draft, &lease.sent)
                    .await
            }
            (false, _, _) => match self.messages(sender, to, text).await {
                Ok(messages) => {
                    self.send_parts(env, sender, to, &messages, &lease.sent)
                        .await
                }
                Err(e) => Err(e),
            },
        };
        self.sent.release(lease).await;
        sent
    }

    /// The messages a reply becomes: its parts; on WhatsApp outside the 24-hour window the
    /// configured template instead, or the `outside_window` failure that parks it unsent.
    async fn messages(
        &self,
        sender: &Sender,
        to: &ReplyTo,
        text: &str,
    ) -> Result<Vec<Outbound>, StageError> {
        if to.platform == Platform::Sms {
            self.consent.check(to).await.inspect_err(|_| {
                self.count_delivery(to.platform, FailureReason::OptedOut.as_str());
            })?;
        }
        if to.platform == Platform::Whatsapp {
            match self.window.plan(&to.chat_id, text).await {
                Ok(Plan::FreeText) => {}
                Ok(Plan::Template(t)) => return Ok(vec![Outbound::Template(t)]),
                Err(e) => {
                    if matches!(
                        e,
                        StageError::Retry {
                            reason: FailureReason::OutsideWindow,
                            ..
                        }
                    ) {
                        self.count_delivery(to.platform, FailureReason::OutsideWindow.as_str());
                    }
                    return Err(e);
                }
            }
        }
        let parts = sender.parts(text).into_iter();
        if to.platform == Platform::Messenger {
            let plan = self
                .messenger_window
                .plan(&to.chat_id)
                .await
                .inspect_err(|_| {
                    self.count_delivery(to.platform, FailureReason::OutsideWindow.as_str());
                })?;
            if let MessengerPlan::Tagged(tag) = plan {
                return Ok(parts.map(|p| Outbound::Tagged(p, tag)).collect());
            }
        }
        Ok(parts.map(Outbound::Send).collect())
    }

    /// The messages not yet sent (or edited), each through the rate gate and the sender.
    async fn send_parts(
        &self,
        env: &Envelope,
        sender: &Sender,
        to: &ReplyTo,
        messages: &[Outbound],
        already: &HashSet<usize>,
    ) -> Result<(), StageError> {
        let platform = to.platform;
        for (index, message) in messages.iter().enumerate() {
            if already.contains(&index) {
                continue;
            }
            self.gate
                .pass(platform, &to.chat_id)
                .await
                .map_err(|e| StageError::Retry {
                    reason: FailureReason::RateLimited,
                    error: e.into(),
                })?;
            // Only the first message quotes the question.
            let quote = to.quote.as_deref().filter(|_| index == 0);
            let sent = self.send_one(sender, to, index, message, quote).await;
            let platform_id = match sent {
                Ok(id) => id,
                Err(f) => {
                    if f.reason.counts_against_platform() {
                        self.breakers.record_failure(platform).await;
                    }
                    self.count_delivery(platform, f.reason.as_str());
                    return Err(retry(f));
                }
            };
            // The platform's id of the message, kept with the run for its statuses; the reply
            // too where a failure can still be reported after this send succeeded.
            let send = platform_id.as_deref().map(|id| NewSend {
                run_id: env.run_id,
                platform,
                chat_id: &to.chat_id,
                platform_message_id: id,
                reply: reports_late_failures(platform).then_some((&env.payload, messages.len())),
            });
            if send.is_some() {
                self.ctx
                    .metrics
                    .delivery
                    .statuses
                    .with_label_values(&[platform.as_str(), SendStatus::Accepted.as_str()])
                    .inc();
            }
            self.sent.mark(env.id, index, send).await;
            self.breakers.record_success(platform).await;
        }
        let template = messages.iter().any(|m| matches!(m, Outbound::Template(_)));
        self.count_delivery(platform, if template { "template" } else { "sent" });
        Ok(())
    }

    /// Send message `index` of a reply, or edit a shown draft's message into it.
    async fn send_one(
        &self,
        sender: &Sender,
        to: &ReplyTo,
        index: usize,
        message: &Outbound,
        quote: Option<&str>,
    ) -> Result<Option<String>, SendFailure> {
        let (platform, chat_id) = (to.platform, to.chat_id.as_str());
        match message {
            Outbound::Send(part) => {
                sender
                    .send_reply(&self.policy, to, index, part, quote, |r| {
                        self.count_attempt(platform, r)
                    })
                    .await
            }
            Outbound::Tagged(part, tag) => {
                sender
                    .send_tagged(&self.policy, chat_id, part, *tag, |r| {
                        self.count_attempt(platform, r)
                    })
                    .await
            }
            Outbound::Template(t) => {
                sender
                    .send_template(&self.policy, chat_id, t, |r| {
                        self.count_attempt(platform, r)
                    })
                    .await
            }
            Outbound::Replace { message, text } => {
                self.replace_message(sender, chat_id, *message, text, platform)
                    .await
            }
        }
    }

    /// POST the outcome to a REST caller's callback URL, signed and guarded.
    async fn callback(
        &self,
        env: &Envelope,
        url: &str,
        outcome: &Outcome,
    ) -> Result<(), StageError> {
        self.callbacks
            .send(env, url, outcome, |r| self.count_attempt(Platform::Rest, r))
            .await
    }
}

/// Whether `platform` may report a message failed after its send API accepted it (WhatsApp's
/// `failed` status, Twilio's `failed` and `undelivered`), so the reply is kept to send that part again.
fn reports_late_failures(platform: Platform) -> bool {
    matches!(platform, Platform::Whatsapp | Platform::Sms)
}

/// A send that failed after its in-call retries, for the queued retry schedule.
fn retry(f: SendFailure) -> StageError {
    StageError::Retry {
        reason: f.reason,
        error: f.into(),
    }
}

/// The text a chat user receives for an outcome.
fn chat_text(outcome: &Outcome) -> &str {
    match outcome {
        Outcome::Answered { text, .. } => text,
        Outcome::Failed { message, .. } => message,
    }
}

/// What the delivery stage handled: a run's reply, or a draft update (which commits nothing
/// but its processed record).
pub enum Handled {
    Reply(Box<Reply>),
    Draft(DraftOutcome),
}

/// What follows a commit.
pub enum Committed {
    /// The reply, and whether this commit closed its run (a copy of a closed run's reply
    /// leaves the history alone).
    Reply(Box<Reply>, bool),
    Draft(DraftOutcome),
}

impl Handler for DeliveryStage {
    const STAGE: Stage = Stage::Delivery;
    type Prepared = Handled;
    type After = Committed;

    async fn prepare(&self, env: &Envelope) -> Result<Handled, StageError> {
        if env.kind == MessageKind::DraftUpdate {
            return Ok(Handled::Draft(self.show_draft(env).await?));
        }
        let reply: Reply = env.payload()?;
        let to = &reply.reply_to;
        match to.platform {
            // The caller waits on the run's event stream, written after the commit; a
            // scheduled job's run may also name its key's callback (docs/api.md, jobs).
            Platform::Api | Platform::Rest => {
                if let Some(url) = &to.callback_url {
                    self.callback(env, url, &reply.outcome).await?;
                }
            }
            Platform::Telegram | Platform::Whatsapp | Platform::Instagram | Platform::Slack => {
                self.send_to_chat(env, to, chat_text(&reply.outcome), reply.draft_id)
                    .await?;
            }
            Platform::Sms | Platform::Messenger | Platform::Teams | Platform::Discord => {
                self.send_to_chat(env, to, chat_text(&reply.outcome), reply.draft_id)
                    .await?;
            }
            // A Forge run's agent acted through the Forge's tools; a chat run's answer reaches
            // its thread through the tools stage, from the message this commit emits
            // (docs/agents.md, "Answers stream to the Forge"). Nothing is sent here.
            Platform::Forge => {}
        }
        Ok(Handled::Reply(Box::new(reply)))
    }

    async fn commit(
        &self,
        env: &Envelope,
        handled: Handled,
        tx: &Transaction<'_>,
    ) -> Result<(Vec<Envelope>, Committed), StageError> {
        let reply = match handled {
            Handled::Draft(outcome) => return Ok((Vec::new(), Committed::Draft(outcome))),
            Handled::Reply(reply) => *reply,
        };
        if reply.reply_to.platform.is_chat() {
            delivery_sends::finish(tx, env.id).await?;
            // The answer is out: a draft update coming after it finds its draft closed.
            if let Some(draft) = reply.draft_id {
                delivery_sends::finish(tx, draft_lease(draft)).await?;
            }
        }
        let closed = close::with_outcome(
            tx,
            env.run_id,
            &reply.outcome,
            reply.detail.as_deref(),
            &reply.calls,
        )
        .await?;
        let mut next = Vec::new();
        if closed.closed {
            next = self.books.record(tx, env, &reply, closed).await?;
            // A Forge chat run owes its thread the whole answer: posted by the tools stage,
            // which holds the Forge's session, from a message committed with the close.
            if reply.reply_to.platform == Platform::Forge
                && forge_answers::unposted(tx, env.run_id).await?.is_some()
            {
                next.push(env.follow(&ForgeAnswer {
                    body: chat_text(&reply.outcome).to_owned(),
                }));
            }
            let status = match &reply.outcome {
                Outcome::Answered { .. } => "completed",
                Outcome::Failed {
                    code: FailureCode::Cancelled,
                    ..
                } => "cancelled",
                Outcome::Failed { .. } => "failed",
            };
            self.ctx
                .metrics
                .stages
                .runs
                .with_label_values(&[reply.reply_to.platform.as_str(), status])
                .inc();
            tracing::info!(status, "run closed");
        }
        Ok((next, Committed::Reply(Box::new(reply), closed.closed)))
    }

    async fn after_commit(&self, env: &Envelope, committed: Committed) {
        let (reply, closed) = match committed {
            Committed::Draft(outcome) => {
                self.ctx
                    .metrics
                    .agents
                    .draft_updates
                    .with_label_values(&[outcome.as_str()])
                    .inc();
                return;
            }
            Committed::Reply(reply, closed) => (*reply, closed),
        };
        if closed {
            self.books.remember(&reply).await;
        }
        let platform = reply.reply_to.platform;
        let event = RunEvent::Final {
            outcome: reply.outcome,
        };
        // Written where a reader can exist: an API or REST caller, or someone following a
        // chat run's events; a Telegram or WhatsApp run nobody follows stores nothing.
        let outcome = match self.events.append(env.run_id, platform, &event).await {
            Ok(_) => "delivered",
            Err(e) => {
                tracing::warn!(error = %e, "cannot append to the run's event stream; the caller reads the run row");
                "deferred_to_database"
            }
        };
        // A chat reply was counted when it was sent; the stream is how API callers get theirs.
        if matches!(platform, Platform::Api | Platform::Rest) {
            self.count_delivery(platform, outcome);
        }
    }

    /// A reply that could not be delivered closes its run as failed and refunded: there is
    /// nobody left to tell (docs/architecture.md, "4. Poison is parked, never looped"). A
    /// draft that could not be shown leaves nothing open: the run's answer comes as its reply.
    /// A run not closed now is the stuck-run sweeper's.
    async fn on_parked(&self, env: &Envelope, cause: ParkCause) -> anyhow::Result<Vec<Envelope>> {
        if env.kind == MessageKind::Reply {
            let closed = close::undelivered(&self.ctx.db, env, cause.as_str()).await?;
            if closed.closed {
                tracing::warn!(refunded = closed.refunded, %cause, "undeliverable reply parked: its run closed as failed");
            }
        }
        Ok(Vec::new())
    }
}
