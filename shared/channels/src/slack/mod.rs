//! Slack, through the Events API over HTTP (<https://api.slack.com/apis/events-api>) and
//! the Web API (<https://api.slack.com/web>).
//!
//! In: [`verify`] checks `X-Slack-Signature` v0 over `v0:{timestamp}:{body}` with the app's
//! signing secret and refuses a timestamp more than five minutes away
//! (<https://api.slack.com/authentication/verifying-requests-from-slack>); [`parse`] reads
//! one Events API request: the `url_verification` challenge
//! (<https://api.slack.com/events/url_verification>), `message` events of direct messages
//! (`message.im`, <https://api.slack.com/events/message.im>) and `app_mention` in channels
//! (<https://api.slack.com/events/app_mention>), their files
//! (<https://api.slack.com/types/file>); [`Webhook`] puts them behind
//! [`crate::inbound::Webhook`]. [`chat`] is where an answer goes: the conversation, and the
//! thread within it.
//!
//! Out: [`send`] (`chat.postMessage`, <https://api.slack.com/methods/chat.postMessage>,
//! with the bot token), [`drafts`] (an external agent's draft as one message edited as it
//! grows, `chat.update`, <https://api.slack.com/methods/chat.update>), [`errors`] (the
//! `error` codes of Slack's `ok: false` answers), [`mrkdwn`] (the model's Markdown as
//! Slack's own), [`limits`] and [`media`] (`url_private`
//! files, fetched with the bot token, <https://api.slack.com/types/file#auth>). Slack has no
//! typing indicator a bot can show through the Web API, so there is no presence call
//! (docs/channels.md, "Slack").

pub mod chat;
pub mod drafts;
pub mod errors;
pub mod limits;
pub mod media;
pub mod mrkdwn;
pub mod parse;
pub mod send;
pub mod verify;
mod webhook;

pub use chat::{SlackChat, Ts};
pub use limits::LIMITS;
pub use parse::{Request, parse};
pub use send::Slack;
pub use webhook::Webhook;
