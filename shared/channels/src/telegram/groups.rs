//! Telegram groups and edited messages (docs/channels.md, "Group chats" and "Edited
//! messages"): what a parsed update says about whom it addresses, and whether it is
//! answered.
//!
//! The parser ([`super::parse`]) reads the facts of a message: the chat's type, its
//! mentions and leading command (Telegram's `entities`, whose offsets count UTF-16 code
//! units, turned here into byte ranges of the event's text), the author of the message it
//! replies to, and whether it is an edit. [`admit`] then applies the configured rules: in a
//! group or supergroup the bot answers only a message that mentions it, replies to one of its
//! messages or starts with a command for it (`[channels.telegram]`, per chat), with its
//! mention taken out of the text and the answer quoting the message; an edit is ignored or
//! answered as a correction. Everything here is pure and total over its input.

use std::ops::Range;

use hermes_config::{EditPolicy, GroupAnswer, TelegramSettings};
use hermes_types::model::{ChatKind, Inbound, MessageEvent};
use serde::Deserialize;

use crate::inbound::Skip;

/// What the model sees before the text of an edited message.
pub const EDITED_MARK: &str = "(edited)";

/// The kind of chat a message was written in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ChatType {
    Private,
    Group,
    Supergroup,
    Channel,
    /// Missing, or a type newer than this build.
    Other,
}

impl ChatType {
    fn parse(s: Option<&str>) -> Self {
        match s {
            Some("private") => ChatType::Private,
            Some("group") => ChatType::Group,
            Some("supergroup") => ChatType::Supergroup,
            Some("channel") => ChatType::Channel,
            _ => ChatType::Other,
        }
    }

    /// A group or supergroup: members other than the sender read the answer.
    pub fn is_group(self) -> bool {
        matches!(self, ChatType::Group | ChatType::Supergroup)
    }
}

/// Someone a message names or answers.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Author {
    pub id: Option<i64>,
    pub is_bot: bool,
    pub username: Option<String>,
}

/// A mention in the event's text: an `@username`, or a `text_mention` of a user without one.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Mention {
    /// Bytes of the event's text the mention spans.
    pub range: Range<usize>,
    pub who: Author,
}

/// The command a message starts with (`/cmd` or `/cmd@botname`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Command {
    /// Bytes of the event's text of the `@botname` suffix, when there is one.
    pub target: Option<(Range<usize>, String)>,
}

/// The facts of one message that decide whether the bot is addressed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Addressing {
    pub chat_type: ChatType,
    /// Telegram's id of the message in its chat (what a reply quotes).
    pub message_id: i64,
    /// An `edited_message` or `edited_channel_post`.
    pub edited: bool,
    pub mentions: Vec<Mention>,
    pub command: Option<Command>,
    /// The author of the message this one replies to.
    pub replies_to: Option<Author>,
}

/// What the parser reads of a message for its [`Addressing`], before the event's text
/// (cut to its limit) is known.
pub(crate) struct Facts {
    addressing: Addressing,
    entities: Vec<RawEntity>,
}

impl Facts {
    /// The facts of message `message_id` in a chat of type `chat_type`, with the entities
    /// of its text (or caption) and the author of the message it replies to.
    pub(crate) fn new(
        chat_type: Option<&str>,
        message_id: i64,
        edited: bool,
        entities: Vec<RawEntity>,
        replies_to: Option<Author>,
    ) -> Self {
        Self {
            addressing: Addressing {
                chat_type: ChatType::parse(chat_type),
                message_id,
                edited,
                mentions: Vec::new(),
                command: None,
                replies_to,
            },
            entities,
        }
    }

    /// The addressing of the event whose text is `text`.
    pub(crate) fn addressing(self, text: Option<&str>) -> Addressing {
        let (mentions, command) = entities(text.unwrap_or_default(), &self.entities);
        Addressing {
            mentions,
            command,
            ..self.addressing
        }
    }
}

/// One of Telegram's `MessageEntity` objects, as much as is read of it.
#[derive(Clone, Debug, Deserialize)]
pub(crate) struct RawEntity {
    #[serde(default, rename = "type")]
    kind: Option<String>,
    #[serde(default)]
    offset: Option<i64>,
    #[serde(default)]
    length: Option<i64>,
    #[serde(default)]
    user: Option<RawEntityUser>,
}

#[derive(Clone, Debug, Deserialize)]
pub(crate) struct RawEntityUser {
    #[serde(default)]
    id: Option<i64>,
    #[serde(default)]
    is_bot: Option<bool>,
    #[serde(default)]
    username: Option<String>,
}

/// The mentions and leading command of `text` from its entities (offsets in UTF-16 units);
/// entities past the end of `text` (cut at the text limit) or malformed are skipped.
fn entities(text: &str, raw: &[RawEntity]) -> (Vec<Mention>, Option<Command>) {
    let mut mentions = Vec::new();
    let mut command = None;
    for e in raw {
        let Some(range) = byte_range(text, e.offset, e.length) else {
            continue;
        };
        let span = &text[range.clone()];
        match e.kind.as_deref() {
            Some("mention") => mentions.push(Mention {
                who: Author {
                    id: None,
                    is_bot: false,
                    username: Some(span.trim_start_matches('@').to_owned()),
                },
                range,
            }),
            Some("text_mention") => {
                let Some(u) = &e.user else { continue };
                mentions.push(Mention {
                    range,
                    who: Author {
                        id: u.id,
                        is_bot: u.is_bot.unwrap_or(false),
                        username: u.username.clone(),
                    },
                });
            }
            Some("bot_command") if range.start == 0 => {
                let target = span.find('@').map(|at| {
                    let r = range.start + at..range.end;
                    (r, span[at + 1..].to_owned())
                });
                command = Some(Command { target });
            }
            _ => {}
        }
    }
    (mentions, command)
}

/// The byte range of `text` that `length` UTF-16 units from `offset` cover; `None` when it
/// does not fall on characters of `text`.
fn byte_range(text: &str, offset: Option<i64>, length: Option<i64>) -> Option<Range<usize>> {
    let start = usize::try_from(offset?).ok()?;
    let end = start.checked_add(usize::try_from(length?).ok()?)?;
    if end == start {
        return None;
    }
    let (mut units, mut from, mut to) = (0usize, None, None);
    for (i, c) in text.char_indices() {
        if units == start {
            from = Some(i);
        }
        if units == end {
            to = Some(i);
            break;
        }
        units += c.len_utf16();
    }
    if units == end && to.is_none() {
        to = Some(text.len());
    }
    Some(from?..to?)
}

/// Who the bot is: its username (`[channels.telegram] bot_username`) and its user id (the
/// digits before the `:` of `TELEGRAM_BOT_TOKEN`), as far as they are known.
#[derive(Clone, Debug, Default)]
pub struct Bot {
    pub username: Option<String>,
    pub id: Option<i64>,
}

impl Bot {
    /// The bot as the settings and the token name it.
    pub fn new(settings: &TelegramSettings, token: Option<&str>) -> Self {
        Self {
            username: settings.username().map(str::to_owned),
            id: token
                .and_then(|t| t.split_once(':'))
                .and_then(|(id, _)| id.parse().ok()),
        }
    }

    fn is(&self, who: &Author) -> bool {
        let by_name = match (&self.username, &who.username) {
            (Some(me), Some(them)) => me.eq_ignore_ascii_case(them),
            _ => false,
        };
        let by_id = matches!((self.id, who.id), (Some(me), Some(them)) if me == them);
        by_name || by_id
    }

    fn named(&self, name: &str) -> bool {
        self.username
            .as_deref()
            .is_some_and(|me| me.eq_ignore_ascii_case(name))
    }
}

/// The message to route for `event`, or why it is not answered.
pub fn admit(
    mut event: MessageEvent,
    facts: &Addressing,
    settings: &TelegramSettings,
    bot: &Bot,
) -> Result<Inbound, Skip> {
    if facts.edited && settings.edits == EditPolicy::Ignore {
        return Err(Skip::EditIgnored);
    }
    let group = facts.chat_type.is_group();
    if group {
        let addressed = addressed(facts, bot);
        match settings.answer_in(&event.chat_id) {
            GroupAnswer::Never => return Err(Skip::GroupSilent),
            GroupAnswer::Mentions if !addressed => return Err(Skip::NotAddressed),
            GroupAnswer::Mentions | GroupAnswer::All => {}
        }
        event.text = event.text.map(|t| without_bot(&t, facts, bot));
    }
    if facts.edited {
        event.text = Some(match event.text {
            Some(t) => format!("{EDITED_MARK} {t}"),
            None => EDITED_MARK.to_owned(),
        });
    }
    let mut inbound = Inbound::of(event);
    if group {
        inbound.chat_kind = ChatKind::Group;
        inbound.quote = Some(facts.message_id.to_string());
    }
    Ok(inbound)
}

/// Whether the message mentions the bot, replies to it, or starts with a command for it
/// (a bare `/cmd` is for every bot of the group, so for this one too).
fn addressed(facts: &Addressing, bot: &Bot) -> bool {
    facts.mentions.iter().any(|m| bot.is(&m.who))
        || facts
            .replies_to
            .as_ref()
            .is_some_and(|a| a.is_bot && bot.is(a))
        || facts.command.as_ref().is_some_and(|c| match &c.target {
            None => true,
            Some((_, name)) => bot.named(name),
        })
}

/// `text` without the bot's mentions and the `@botname` of its command, spaces around them
/// folded; the text as it was when nothing else would be left.
fn without_bot(text: &str, facts: &Addressing, bot: &Bot) -> String {
    let mut cuts: Vec<Range<usize>> = facts
        .mentions
        .iter()
        .filter(|m| bot.is(&m.who))
        .map(|m| m.range.clone())
        .collect();
    if let Some(Command {
        target: Some((range, name)),
    }) = &facts.command
        && bot.named(name)
    {
        cuts.push(range.clone());
    }
    if cuts.is_empty() {
        return text.to_owned();
    }
    cuts.sort_by_key(|r| r.start);
    let mut out = String::with_capacity(text.len());
    let mut at = 0;
    for cut in cuts {
        if cut.start < at || cut.end > text.len() {
            continue;
        }
        let kept = &text[at..cut.start];
        // "hey @bot, what…" → "hey, what…"; "@bot what…" → "what…".
        if kept.ends_with(' ') && text[cut.end..].starts_with([',', ':', ' ']) {
            out.push_str(kept.trim_end_matches(' '));
        } else {
            out.push_str(kept);
        }
        at = cut.end;
    }
    out.push_str(&text[at..]);
    let folded = out
        .trim_start_matches([' ', ',', ':'])
        .trim_end()
        .to_owned();
    if folded.is_empty() {
        text.to_owned()
    } else {
        folded
    }
}

#[cfg(test)]
mod tests;
