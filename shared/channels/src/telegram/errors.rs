//! The refusals Telegram names in the `description` of a 400 answer
//! (<https://core.telegram.org/bots/api#making-requests>): the status alone says "refused",
//! the description says whether the formatting, the edit or the message was at fault, and
//! each calls for something else (send as plain text, nothing, send anew).

use hermes_net::failure::FailureReason;

use crate::SendFailure;

/// A refusal Telegram describes, which the sender answers in its own way.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Refusal {
    /// The Markdown could not be parsed: the same message goes again as plain text.
    CantParseEntities,
    /// An edit to the text the message shows already: not a failure.
    NotModified,
    /// The message to edit is gone (the user deleted it).
    MessageToEditNotFound,
    /// The message can no longer be edited (too old, or not the bot's).
    MessageCantBeEdited,
}

impl Refusal {
    /// The words of Telegram's description that name it.
    fn phrase(self) -> &'static str {
        match self {
            Refusal::CantParseEntities => "can't parse entities",
            Refusal::NotModified => "message is not modified",
            Refusal::MessageToEditNotFound => "message to edit not found",
            Refusal::MessageCantBeEdited => "message can't be edited",
        }
    }
}

/// Whether Telegram refused a request (400) with the `refusal` described.
pub fn refused(f: &SendFailure, refusal: Refusal) -> bool {
    f.reason == FailureReason::InvalidRecipient
        && f.body
            .as_deref()
            .is_some_and(|b| b.contains(refusal.phrase()))
}
