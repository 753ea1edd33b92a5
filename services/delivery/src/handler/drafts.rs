//! An external agent's draft in a chat (docs/agents.md, "How drafts are shown"). A platform
//! that shows drafts (Telegram and Slack, through `hermes_channels::ShowsDrafts`) shows one as a
//! message edited as it grows: the first update sends it and records
//! its id on the draft, later ones edit it when they are newer than what it shows, as often
//! as the chat's rate gate allows now (an update that would have to wait is skipped:
//! the next one, or the final reply, carries the whole text), and not past one message's
//! length. Other platforms show no drafts: their updates are dropped and the final reply
//! brings the text.
//!
//! A draft update is a courtesy, not an answer: it never closes the run or spends its credit,
//! and one the platform refuses after the in-call retries is dropped (counted, logged), not
//! scheduled for a queued retry or parked, since a later update or the final reply
//! supersedes it. Updates of one draft and its final reply take turns on the draft's send
//! lease (`delivery_sends`, `draft_plan::draft_lease`), which the final reply's commit marks
//! done: an update never lands on top of the answer, and one arriving after it sends nothing.

use std::collections::HashSet;
use std::time::Duration;

use hermes_channels::{DraftMessage, Outbound, Part, SendFailure, Sender, ShowsDrafts};
use hermes_db::{DbError, drafts, runs};
use hermes_runtime::stage::StageError;
use hermes_types::envelope::Envelope;
use hermes_types::ids::DraftId;
use hermes_types::model::{DraftUpdate, Platform, ReplyTo};

use super::DeliveryStage;
use crate::draft_plan::{self, DraftOutcome, Step, Why, draft_lease, final_messages};

/// How long a shown draft's message id waits for PostgreSQL to be recorded (within the stop
/// grace, as a sent part's record).
const RECORD_PATIENCE: Duration = Duration::from_secs(30);

/// How often that record is tried again while PostgreSQL is away.
const RECORD_RETRY: Duration = Duration::from_millis(250);

/// An update's outcome, and why it was not shown.
type Shown = (DraftOutcome, Option<Why>);

fn not_shown(outcome: DraftOutcome, why: Why) -> Result<Shown, StageError> {
    Ok((outcome, Some(why)))
}

impl DeliveryStage {
    /// Show a draft update where its chat shows drafts; what became of it.
    pub(super) async fn show_draft(&self, env: &Envelope) -> Result<DraftOutcome, StageError> {
        let update: DraftUpdate = env.payload()?;
        let (outcome, why) = self.try_show(env, &update).await?;
        let (draft_id, chunks) = (update.draft_id, update.chunks);
        match why {
            Some(why) => {
                tracing::info!(%draft_id, chunks, outcome = outcome.as_str(), ?why, "draft update not shown")
            }
            None => tracing::debug!(%draft_id, chunks, outcome = outcome.as_str(), "draft shown"),
        }
        Ok(outcome)
    }

    async fn try_show(&self, env: &Envelope, update: &DraftUpdate) -> Result<Shown, StageError> {
        let platform = update.reply_to.platform;
        if !Sender::shows_drafts(platform) {
            return not_shown(DraftOutcome::Dropped, Why::PlatformShowsNoDrafts);
        }
        let Some(shows) = self.senders.get(platform).and_then(Sender::drafts) else {
            return not_shown(DraftOutcome::Dropped, Why::NoSender);
        };
        if self.breakers.open_until(platform).await.is_some() {
            return not_shown(DraftOutcome::Skipped, Why::BreakerOpen);
        }
        let lease = self.sent.lease(draft_lease(update.draft_id)).await?;
        let shown = if lease.finished {
            not_shown(DraftOutcome::Dropped, Why::Finalized)
        } else {
            self.show_now(env, &shows, update).await
        };
        self.sent.release(lease).await;
        shown
    }

    /// Under the draft's lease: send or edit its message if the draft as stored allows it.
    async fn show_now<S: ShowsDrafts<Message = DraftMessage> + Sync>(
        &self,
        env: &Envelope,
        shows: &S,
        update: &DraftUpdate,
    ) -> Result<Shown, StageError> {
        let platform = shows.platform();
        let client = self.ctx.db.get().await?;
        let draft = drafts::get(&client, update.draft_id, None).await?;
        let run_open = runs::get(&client, env.run_id)
            .await?
            .is_some_and(|r| !r.status.is_final());
        drop(client);
        let shown_in = match draft_plan::plan(draft.as_ref(), env.run_id, run_open, update) {
            Step::Skip(why) => return not_shown(DraftOutcome::Skipped, why),
            Step::Drop(why) => return not_shown(DraftOutcome::Dropped, why),
            Step::Send => None,
            Step::Edit(message) => Some(message),
        };
        let chat = &update.reply_to.chat_id;
        if !self.gate.try_pass(platform, chat).await {
            return not_shown(DraftOutcome::Skipped, Why::TooSoon);
        }
        let count = |r| self.count_attempt(platform, r);
        let sent = match shown_in {
            None => shows
                .show_draft(&self.policy, chat, &update.text, count)
                .await
                .map(|message| (message, DraftOutcome::Shown)),
            Some(message) => shows
                .edit_draft(&self.policy, chat, message, &update.text, count)
                .await
                .map(|_| (message, DraftOutcome::Edited)),
        };
        match sent {
            Ok((message, outcome)) => {
                self.breakers.record_success(platform).await;
                self.record_shown(update, message).await?;
                Ok((outcome, None))
            }
            Err(f) => {
                if f.reason.counts_against_platform() {
                    self.breakers.record_failure(platform).await;
                }
                tracing::warn!(error = %f, draft_id = %update.draft_id, platform = platform.as_str(), "the platform refused a draft update; dropped (the final reply still comes)");
                not_shown(DraftOutcome::Dropped, Why::Refused)
            }
        }
    }

    /// Record that the draft's message shows `update`. Once Telegram accepted a first
    /// message, an unrecorded id would make the next update send a second one, so PostgreSQL
    /// away is waited for, within [`RECORD_PATIENCE`], as a sent part's record is.
    async fn record_shown(
        &self,
        update: &DraftUpdate,
        message: DraftMessage,
    ) -> Result<(), DbError> {
        let deadline = tokio::time::Instant::now() + RECORD_PATIENCE;
        loop {
            let recorded = match self.ctx.db.get().await {
                Ok(c) => {
                    drafts::mark_shown(&c, update.draft_id, &message.to_stored(), update.chunks)
                        .await
                }
                Err(e) => Err(e),
            };
            match recorded {
                Ok(_) => return Ok(()),
                Err(e) if e.is_unavailable() && tokio::time::Instant::now() < deadline => {
                    tracing::warn!(error = %e, draft_id = %update.draft_id, "cannot record the draft's message yet; trying until PostgreSQL is back");
                    tokio::time::sleep(RECORD_RETRY).await;
                }
                Err(e) => return Err(e),
            }
        }
    }

    /// Send the final reply of `draft`: where the draft is shown, its message becomes the
    /// first part and the rest are new messages; where it is not, the reply goes as usual.
    /// Under the draft's lease, so no update edits the message meanwhile.
    pub(super) async fn replace_draft(
        &self,
        env: &Envelope,
        sender: &Sender,
        to: &ReplyTo,
        text: &str,
        draft: DraftId,
        already: &HashSet<usize>,
    ) -> Result<(), StageError> {
        let lease = self.sent.lease(draft_lease(draft)).await?;
        let sent = match self.shown_message(env, to.platform, draft).await {
            Ok(shown) => {
                let messages = final_messages(shown, text, |t| sender.parts(t));
                self.send_parts(env, sender, to, &messages, already).await
            }
            Err(e) => Err(e.into()),
        };
        self.sent.release(lease).await;
        sent
    }

    /// The message showing `draft` on `platform`, if it is this run's and was shown.
    async fn shown_message(
        &self,
        env: &Envelope,
        platform: Platform,
        draft: DraftId,
    ) -> Result<Option<DraftMessage>, DbError> {
        let client = self.ctx.db.get().await?;
        Ok(drafts::get(&client, draft, None)
            .await?
            .filter(|d| d.run_id == env.run_id)
            .and_then(|d| d.platform_message_id)
            .and_then(|m| DraftMessage::from_stored(platform, &m)))
    }

    /// Edit the shown draft's `message` into `text` (formatted like any reply) where the
    /// platform shows drafts, or send `text` anew (docs/agents.md, "How drafts are shown").
    pub(super) async fn replace_message(
        &self,
        sender: &Sender,
        chat_id: &str,
        message: DraftMessage,
        text: &str,
        platform: Platform,
    ) -> Result<Option<String>, SendFailure> {
        let count = |r| self.count_attempt(platform, r);
        match sender.drafts() {
            Some(shows) => {
                shows
                    .replace_draft(&self.policy, chat_id, message, text, count)
                    .await
            }
            None => {
                let part = Part::Text(text.to_string());
                sender.send(&self.policy, chat_id, &part, None, count).await
            }
        }
    }
}
