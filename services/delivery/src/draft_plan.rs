//! The decisions behind showing an external agent's draft (docs/agents.md, "How drafts are
//! shown"), kept pure so each rule is tested on its own: what a draft update does given the
//! draft as stored, and which messages the final reply becomes when a draft was shown (the
//! draft's message is edited to the first part, so nothing is shown twice).

use hermes_channels::split::split_text;
use hermes_channels::whatsapp::TemplateMessage;
use hermes_channels::{DraftMessage, Part};
use hermes_config::MessageTag;
use hermes_db::drafts::Draft;
use hermes_types::ids::{DraftId, MessageId, RunId};
use hermes_types::model::DraftUpdate;

/// What became of one draft update (`hermes_agent_draft_updates_total{outcome}`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DraftOutcome {
    /// The draft's message was sent.
    Shown,
    /// The draft's message was edited to the new text.
    Edited,
    /// Not shown now, but the draft is still open: a later update or the final reply shows
    /// the whole text.
    Skipped,
    /// Never to be shown: stale, the answer is out, or the platform shows no drafts.
    Dropped,
}

impl DraftOutcome {
    /// Every outcome, so the metric's series start at 0.
    pub const ALL: [DraftOutcome; 4] = [Self::Shown, Self::Edited, Self::Skipped, Self::Dropped];

    /// The metric label.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Shown => "shown",
            Self::Edited => "edited",
            Self::Skipped => "skipped",
            Self::Dropped => "dropped",
        }
    }
}

/// Why an update is not shown (for the log line).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Why {
    /// WhatsApp, Instagram and the API channels get the final text only.
    PlatformShowsNoDrafts,
    /// No Telegram sender is configured (the final reply is parked for replay).
    NoSender,
    /// No such draft, or one of another run.
    UnknownDraft,
    /// The agent finalized the draft: its reply replaces it.
    Finalized,
    /// The run is closed: nothing appears after the answer.
    RunClosed,
    /// The chat shows as many chunks or more already.
    Stale,
    /// The shown message id is not one this platform can edit.
    ForeignMessage,
    /// Nothing but whitespace yet.
    Empty,
    /// Beyond one message: the final reply sends the rest.
    TooLong,
    /// Too soon after the chat's last message (the rate gate).
    TooSoon,
    /// The platform's breaker is open.
    BreakerOpen,
    /// The platform refused it after the in-call retries.
    Refused,
}

/// What to do with a draft update.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Step {
    /// Send the draft's first message.
    Send,
    /// Edit the message showing the draft.
    Edit(DraftMessage),
    /// Not now; the draft stays open.
    Skip(Why),
    /// Never.
    Drop(Why),
}

/// What `update` (of run `run`) does to `draft` as stored, `run_open` telling whether the
/// run still waits for its answer. The order matters: a closed draft drops whatever the
/// update holds, and only an update newer than what is shown may send anything.
pub fn plan(draft: Option<&Draft>, run: RunId, run_open: bool, update: &DraftUpdate) -> Step {
    let Some(draft) = draft.filter(|d| d.run_id == run) else {
        return Step::Drop(Why::UnknownDraft);
    };
    if draft.finalized {
        return Step::Drop(Why::Finalized);
    }
    if !run_open {
        return Step::Drop(Why::RunClosed);
    }
    if update.chunks <= draft.shown_chunks {
        return Step::Drop(Why::Stale);
    }
    if update.text.trim().is_empty() {
        return Step::Skip(Why::Empty);
    }
    let platform = update.reply_to.platform;
    let fits = DraftMessage::limits_on(platform).map_or(0, |l| l.max_chars);
    if update.text.chars().count() > fits {
        return Step::Skip(Why::TooLong);
    }
    match draft.platform_message_id.as_deref() {
        None => Step::Send,
        Some(stored) => match DraftMessage::from_stored(platform, stored) {
            Some(message) => Step::Edit(message),
            None => Step::Drop(Why::ForeignMessage),
        },
    }
}

/// One message of a final reply.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outbound {
    /// A new message.
    Send(Part),
    /// The shown draft's message, edited to this text.
    Replace { message: DraftMessage, text: String },
    /// An approved WhatsApp template in place of the whole reply (outside the 24-hour
    /// window, docs/channels.md).
    Template(TemplateMessage),
    /// A Messenger message outside the 24-hour window, under a message tag.
    Tagged(Part, MessageTag),
}

/// The messages of a final reply: when its draft is shown in `shown`, that message becomes
/// the first part and the rest are new messages (as text: a text message cannot become a
/// photo, so a Markdown image stays a link); otherwise the platform's usual `parts`.
pub fn final_messages(
    shown: Option<DraftMessage>,
    text: &str,
    parts: impl FnOnce(&str) -> Vec<Part>,
) -> Vec<Outbound> {
    let Some(message) = shown else {
        return parts(text).into_iter().map(Outbound::Send).collect();
    };
    split_text(text, message.limits().max_chars)
        .into_iter()
        .enumerate()
        .map(|(i, part)| match i {
            0 => Outbound::Replace {
                message,
                text: part,
            },
            _ => Outbound::Send(Part::Text(part)),
        })
        .collect()
}

/// Bits flipped in a draft's id to name its send lease in `delivery_sends`: updates of one
/// draft and its final reply take turns on it, and the final reply's commit marks it done,
/// so an update coming after the answer finds the draft closed.
const DRAFT_LEASE: u128 = 0x6472_6166_742d_6c65_6173_6500_0000_0001;

/// The `delivery_sends` key of `draft`'s lease.
pub fn draft_lease(draft: DraftId) -> MessageId {
    MessageId::from(uuid::Uuid::from_u128(
        draft.as_uuid().as_u128() ^ DRAFT_LEASE,
    ))
}

#[cfg(test)]
mod tests {
    use hermes_channels::telegram::{self, MessageRef};
    use hermes_types::ids::AgentId;
    use hermes_types::model::{Platform, ReplyTo};

    use super::*;

    fn draft(run: RunId) -> Draft {
        Draft {
            id: DraftId::new(),
            run_id: run,
            agent_id: AgentId::new(),
            body: String::new(),
            chunks: 0,
            platform_message_id: None,
            shown_chunks: 0,
            finalized: false,
        }
    }

    fn update(d: &Draft, text: &str, chunks: i32) -> DraftUpdate {
        DraftUpdate {
            draft_id: d.id,
            reply_to: ReplyTo {
                platform: Platform::Telegram,
                chat_id: "1".into(),
                callback_url: None,
                quote: None,
                interaction: None,
            },
            text: text.into(),
            chunks,
        }
    }

    #[test]
    fn the_first_update_sends_and_later_ones_edit_only_when_newer() {
        let run = RunId::new();
        let mut d = draft(run);
        assert_eq!(plan(Some(&d), run, true, &update(&d, "Hel", 1)), Step::Send);
        d.platform_message_id = Some("42".into());
        d.shown_chunks = 3;
        assert_eq!(
            plan(Some(&d), run, true, &update(&d, "Hello wor", 4)),
            Step::Edit(DraftMessage::Telegram(MessageRef(42)))
        );
        assert_eq!(
            plan(Some(&d), run, true, &update(&d, "Hello", 2)),
            Step::Drop(Why::Stale),
            "older than what is shown"
        );
        assert_eq!(
            plan(Some(&d), run, true, &update(&d, "Hello w", 3)),
            Step::Drop(Why::Stale),
            "the same update again"
        );
    }

    #[test]
    fn nothing_is_shown_once_the_answer_is_out_or_for_a_draft_of_another_run() {
        let run = RunId::new();
        let mut d = draft(run);
        let u = update(&d, "Hel", 1);
        assert_eq!(plan(Some(&d), run, false, &u), Step::Drop(Why::RunClosed));
        assert_eq!(
            plan(Some(&d), RunId::new(), true, &u),
            Step::Drop(Why::UnknownDraft)
        );
        assert_eq!(plan(None, run, true, &u), Step::Drop(Why::UnknownDraft));
        d.finalized = true;
        assert_eq!(plan(Some(&d), run, true, &u), Step::Drop(Why::Finalized));
    }

    #[test]
    fn an_empty_or_oversized_draft_is_skipped_and_a_foreign_message_id_dropped() {
        let run = RunId::new();
        let mut d = draft(run);
        assert_eq!(
            plan(Some(&d), run, true, &update(&d, "  \n", 1)),
            Step::Skip(Why::Empty)
        );
        let long = "é".repeat(telegram::LIMITS.max_chars + 1);
        assert_eq!(
            plan(Some(&d), run, true, &update(&d, &long, 1)),
            Step::Skip(Why::TooLong)
        );
        let fits = "é".repeat(telegram::LIMITS.max_chars);
        assert_eq!(plan(Some(&d), run, true, &update(&d, &fits, 1)), Step::Send);
        d.platform_message_id = Some("wamid.1".into());
        assert_eq!(
            plan(Some(&d), run, true, &update(&d, "x", 1)),
            Step::Drop(Why::ForeignMessage)
        );
    }

    #[test]
    fn a_shown_draft_is_replaced_by_the_first_part_and_the_rest_sent() {
        let parts = |t: &str| vec![Part::Text(t.to_string())];
        assert_eq!(
            final_messages(None, "hi", parts),
            [Outbound::Send(Part::Text("hi".into()))]
        );
        assert_eq!(
            final_messages(Some(DraftMessage::Telegram(MessageRef(9))), "hi", parts),
            [Outbound::Replace {
                message: DraftMessage::Telegram(MessageRef(9)),
                text: "hi".into()
            }]
        );
        let long = format!(
            "{}\n\n{}",
            "a".repeat(telegram::LIMITS.max_chars - 10),
            "b".repeat(100)
        );
        let m = final_messages(Some(DraftMessage::Telegram(MessageRef(9))), &long, parts);
        assert_eq!(m.len(), 2);
        assert!(matches!(&m[0], Outbound::Replace { text, .. } if text.starts_with('a')));
        assert_eq!(m[1], Outbound::Send(Part::Text("b".repeat(100))));
        // A photo cannot replace a text message: the image stays a link in the text.
        let image = "Look: ![bar](https://img.example/bar.jpg)";
        assert!(matches!(
            &final_messages(Some(DraftMessage::Telegram(MessageRef(9))), image, |_| Vec::new())[..],
            [Outbound::Replace { text, .. }] if text == image
        ));
    }

    #[test]
    fn a_drafts_lease_is_stable_and_not_the_drafts_own_id() {
        let d = DraftId::new();
        assert_eq!(draft_lease(d), draft_lease(d));
        assert_ne!(draft_lease(d).as_uuid(), d.as_uuid());
    }
}
