//! What the stages call a chat platform through on the way out (docs/channels.md,
//! "Delivery"): the [`Outbound`] trait every platform's sender implements (its limits, one
//! part sent with in-call retries), [`ShowsDrafts`] for a platform that shows an external
//! agent's draft as a message edited as it grows, and [`Sender`], the enum over the
//! platforms, with [`Senders::new`], the one place a platform's sender is registered.
//!
//! A new platform is one folder with a type implementing [`Outbound`], one variant of
//! [`Sender`] with its arms, and one line in [`Senders::new`] (docs/development.md, "Adding a
//! chat platform"). The stages hold a [`Sender`] rather than a `dyn Outbound`: a trait with
//! async methods is not object-safe, and the enum's matches name every platform in one file.

use std::future::Future;

use hermes_config::{ChannelsSettings, DeliverySettings, MessageTag};
use hermes_net::failure::FailureReason;
use hermes_types::model::{Platform, ReplyTo};

use crate::discord::Discord;
use crate::drafts::Drafts;
use crate::instagram::Instagram;
use crate::messenger::Messenger;
use crate::slack::Slack;
use crate::teams::Teams;
use crate::telegram::{Edited, Telegram};
use crate::twilio::Sms;
use crate::whatsapp::{TemplateMessage, Whatsapp};
use crate::{Limits, Part, RetryPolicy, SendFailure, parts};

/// One chat platform's sender.
pub trait Outbound {
    /// The platform it sends to.
    fn platform(&self) -> Platform;

    /// What one of its messages holds.
    fn limits(&self) -> Limits;

    /// The messages a reply's text becomes on this platform (split to its size; one
    /// Markdown image as a photo).
    fn parts(&self, text: &str) -> Vec<Part> {
        parts::parts(text, self.limits())
    }

    /// Send one part to `chat_id`, with in-call retries (`policy`); where the platform
    /// quotes, as a reply to the message `quote` (a group's question, docs/channels.md,
    /// "Group chats"). `on_failure` sees every failed try. Returns the platform's id of the
    /// message when its answer names one (docs/channels.md, "Statuses").
    fn send(
        &self,
        policy: &RetryPolicy,
        chat_id: &str,
        part: &Part,
        quote: Option<&str>,
        on_failure: impl FnMut(FailureReason) + Send,
    ) -> impl Future<Output = Result<Option<String>, SendFailure>> + Send;
}

/// A platform that shows an external agent's draft as one message edited as it grows
/// (docs/agents.md, "How drafts are shown"); when to show what is the delivery stage's plan.
pub trait ShowsDrafts: Outbound {
    /// The platform's id of the message showing a draft, as it is edited.
    type Message: Copy;

    /// Send the draft's first message; its id.
    fn show_draft(
        &self,
        policy: &RetryPolicy,
        chat_id: &str,
        text: &str,
        on_failure: impl FnMut(FailureReason) + Send,
    ) -> impl Future<Output = Result<Self::Message, SendFailure>> + Send;

    /// Edit the draft's `message` to show `text`.
    fn edit_draft(
        &self,
        policy: &RetryPolicy,
        chat_id: &str,
        message: Self::Message,
        text: &str,
        on_failure: impl FnMut(FailureReason) + Send,
    ) -> impl Future<Output = Result<Edited, SendFailure>> + Send;

    /// Edit the draft's `message` into the answer's first part `text`, or send that anew
    /// when the message can no longer be edited; the id of the message that shows it.
    fn replace_draft(
        &self,
        policy: &RetryPolicy,
        chat_id: &str,
        message: Self::Message,
        text: &str,
        on_failure: impl FnMut(FailureReason) + Send,
    ) -> impl Future<Output = Result<Option<String>, SendFailure>> + Send;
}

/// What [`ShowsDrafts::replace_draft`] does when the final edit of a draft failed with
/// `failure`: when the draft's message is `gone` (the person deleted it, or it is past the
/// platform's edit window), the answer's first part `text` is sent as a new message;
/// otherwise the failure stands.
pub(crate) async fn send_anew_if_gone<S: Outbound>(
    sender: &S,
    policy: &RetryPolicy,
    chat_id: &str,
    text: &str,
    failure: SendFailure,
    gone: bool,
    on_failure: impl FnMut(FailureReason) + Send,
) -> Result<Option<String>, SendFailure> {
    if !gone {
        return Err(failure);
    }
    tracing::info!(
        platform = sender.platform().as_str(),
        "the draft's message cannot be edited; the answer goes as a new message"
    );
    let part = Part::Text(text.to_string());
    sender.send(policy, chat_id, &part, None, on_failure).await
}

/// The sender of one chat platform.
pub enum Sender {
    /// Telegram's Bot API.
    Telegram(Telegram),
    /// WhatsApp, through the Cloud API or 360dialog.
    Whatsapp(Whatsapp),
    /// Instagram's Messaging API.
    Instagram(Instagram),
    /// Slack's Web API.
    Slack(Slack),
    /// SMS through Twilio's Messages API.
    Sms(Sms),
    /// Facebook Messenger's Send API.
    Messenger(Messenger),
    /// Microsoft Teams, through the Bot Framework Connector.
    Teams(Teams),
    /// Discord: interaction follow-ups, and channel messages with the bot token.
    Discord(Discord),
}

impl Sender {
    /// Whether `platform` shows drafts: its sender is [`Sender::drafts`]'s.
    pub fn shows_drafts(platform: Platform) -> bool {
        matches!(platform, Platform::Telegram | Platform::Slack)
    }

    /// This sender as one that shows drafts, where its platform does.
    pub fn drafts(&self) -> Option<Drafts<'_>> {
        match self {
            Sender::Telegram(t) => Some(Drafts::Telegram(t)),
            Sender::Slack(s) => Some(Drafts::Slack(s)),
            Sender::Whatsapp(_) | Sender::Instagram(_) => None,
            Sender::Sms(_) | Sender::Messenger(_) | Sender::Teams(_) | Sender::Discord(_) => None,
        }
    }

    /// Send part `index` of a reply to `to`, with in-call retries: a Discord slash command's
    /// answer on its interaction (the first part edits the deferred response); every other
    /// reply as [`Outbound::send`] sends it.
    pub async fn send_reply(
        &self,
        policy: &RetryPolicy,
        to: &ReplyTo,
        index: usize,
        part: &Part,
        quote: Option<&str>,
        on_failure: impl FnMut(FailureReason) + Send,
    ) -> Result<Option<String>, SendFailure> {
        match (self, &to.interaction) {
            (Sender::Discord(d), Some(i)) => {
                d.answer(policy, i, &to.chat_id, index, part, on_failure)
                    .await
            }
            _ => {
                self.send(policy, &to.chat_id, part, quote, on_failure)
                    .await
            }
        }
    }

    /// Send an approved template to `chat_id`, with in-call retries: WhatsApp's alone (a
    /// reply outside its 24-hour window); any other platform refuses it. Returns the
    /// message's wamid, which its statuses name.
    pub async fn send_template(
        &self,
        policy: &RetryPolicy,
        chat_id: &str,
        template: &TemplateMessage,
        on_failure: impl FnMut(FailureReason) + Send,
    ) -> Result<Option<String>, SendFailure> {
        match self {
            Sender::Whatsapp(s) => s.send_template(policy, chat_id, template, on_failure).await,
            Sender::Telegram(_)
            | Sender::Instagram(_)
            | Sender::Slack(_)
            | Sender::Sms(_)
            | Sender::Messenger(_)
            | Sender::Teams(_)
            | Sender::Discord(_) => Err(SendFailure {
                reason: FailureReason::InvalidRecipient,
                status: None,
                body: None,
                detail: "message templates are WhatsApp's".into(),
                tries: 0,
            }),
        }
    }
}

impl Sender {
    /// Send one part under a message tag, with in-call retries: Messenger's alone (a reply
    /// outside its 24-hour window); any other platform refuses it.
    pub async fn send_tagged(
        &self,
        policy: &RetryPolicy,
        chat_id: &str,
        part: &Part,
        tag: MessageTag,
        on_failure: impl FnMut(FailureReason) + Send,
    ) -> Result<Option<String>, SendFailure> {
        match self {
            Sender::Messenger(m) => m.send_tagged(policy, chat_id, part, tag, on_failure).await,
            _ => Err(SendFailure {
                reason: FailureReason::InvalidRecipient,
                status: None,
                body: None,
                detail: "message tags are Messenger's".into(),
                tries: 0,
            }),
        }
    }
}

impl Outbound for Sender {
    fn parts(&self, text: &str) -> Vec<Part> {
        match self {
            Sender::Sms(s) => s.parts(text),
            _ => parts::parts(text, self.limits()),
        }
    }

    fn platform(&self) -> Platform {
        match self {
            Sender::Telegram(s) => s.platform(),
            Sender::Whatsapp(s) => s.platform(),
            Sender::Instagram(s) => s.platform(),
            Sender::Slack(s) => s.platform(),
            Sender::Sms(s) => s.platform(),
            Sender::Messenger(s) => s.platform(),
            Sender::Teams(s) => s.platform(),
            Sender::Discord(s) => s.platform(),
        }
    }

    fn limits(&self) -> Limits {
        match self {
            Sender::Telegram(s) => s.limits(),
            Sender::Whatsapp(s) => s.limits(),
            Sender::Instagram(s) => s.limits(),
            Sender::Slack(s) => s.limits(),
            Sender::Sms(s) => s.limits(),
            Sender::Messenger(s) => s.limits(),
            Sender::Teams(s) => s.limits(),
            Sender::Discord(s) => s.limits(),
        }
    }

    async fn send(
        &self,
        policy: &RetryPolicy,
        chat_id: &str,
        part: &Part,
        quote: Option<&str>,
        on_failure: impl FnMut(FailureReason) + Send,
    ) -> Result<Option<String>, SendFailure> {
        match self {
            Sender::Telegram(s) => s.send(policy, chat_id, part, quote, on_failure).await,
            Sender::Whatsapp(s) => s.send(policy, chat_id, part, quote, on_failure).await,
            Sender::Instagram(s) => s.send(policy, chat_id, part, quote, on_failure).await,
            Sender::Slack(s) => s.send(policy, chat_id, part, quote, on_failure).await,
            Sender::Sms(s) => s.send(policy, chat_id, part, quote, on_failure).await,
            Sender::Messenger(s) => s.send(policy, chat_id, part, quote, on_failure).await,
            Sender::Teams(s) => s.send(policy, chat_id, part, quote, on_failure).await,
            Sender::Discord(s) => s.send(policy, chat_id, part, quote, on_failure).await,
        }
    }
}

/// The senders this process has credentials for. A platform whose credentials are not
/// configured has none; its replies are parked for replay.
pub struct Senders(Vec<Sender>);

impl Senders {
    /// The senders `settings` configures, behaving as `channels` says, all on the stage's one
    /// client `http`: the registration of every platform.
    pub fn new(
        settings: &DeliverySettings,
        channels: &ChannelsSettings,
        http: &reqwest::Client,
    ) -> Self {
        let http = || http.clone();
        let configured = [
            (settings.telegram.as_ref()).map(|s| Sender::Telegram(Telegram::new(s, http()))),
            (settings.whatsapp.as_ref()).map(|s| Sender::Whatsapp(Whatsapp::new(s, http()))),
            (settings.instagram.as_ref()).map(|s| Sender::Instagram(Instagram::new(s, http()))),
            (settings.slack.as_ref()).map(|s| Sender::Slack(Slack::new(s, http()))),
            (settings.sms.as_ref())
                .map(|s| Sender::Sms(Sms::new(s, channels.sms.max_segments, http()))),
            (settings.messenger.as_ref()).map(|s| Sender::Messenger(Messenger::new(s, http()))),
            (settings.teams.as_ref()).map(|s| Sender::Teams(Teams::new(s, http()))),
            // Always: an interaction's answer needs only the token it came with.
            Some(Sender::Discord(Discord::new(&settings.discord, http()))),
        ];
        Self(configured.into_iter().flatten().collect())
    }

    /// The sender of a chat platform, if configured (`None` for the API channels and Forge
    /// runs too).
    pub fn get(&self, platform: Platform) -> Option<&Sender> {
        self.0.iter().find(|s| s.platform() == platform)
    }
}

/// The part of `chat_id` a platform paces its messages by (the rate gate's chat bucket): the
/// chat itself, or on Slack the conversation whatever thread a message goes in.
pub fn pacing_chat(platform: Platform, chat_id: &str) -> &str {
    match platform {
        Platform::Slack => crate::slack::chat::pacing_key(chat_id),
        _ => chat_id,
    }
}

/// What enables the sender of `platform`, for a parked reply's reason.
pub fn how_to_enable(platform: Platform) -> &'static str {
    match platform {
        Platform::Telegram => "set TELEGRAM_BOT_TOKEN",
        Platform::Whatsapp => {
            "set D360_API_KEY, or WHATSAPP_ACCESS_TOKEN and WHATSAPP_PHONE_NUMBER_ID"
        }
        Platform::Instagram => "set INSTAGRAM_ACCESS_TOKEN",
        Platform::Slack => "set SLACK_BOT_TOKEN",
        Platform::Sms => {
            "set TWILIO_ACCOUNT_SID, TWILIO_AUTH_TOKEN and TWILIO_FROM_NUMBER (or TWILIO_MESSAGING_SERVICE_SID)"
        }
        Platform::Messenger => "set MESSENGER_PAGE_ACCESS_TOKEN",
        Platform::Teams => "set TEAMS_APP_ID and TEAMS_APP_PASSWORD",
        Platform::Discord => {
            "set DISCORD_BOT_TOKEN (an answer on its interaction's token needs none; one without a live interaction goes to the channel)"
        }
        Platform::Api | Platform::Rest => "nothing: API replies need no sender",
        Platform::Forge => "nothing: a Forge run's reply is not sent",
    }
}
