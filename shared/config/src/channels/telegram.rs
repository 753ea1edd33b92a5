//! `[channels.telegram]`: Telegram's groups and edited messages (docs/channels.md, "Group
//! chats" and "Edited messages").

use std::collections::BTreeMap;

use serde::Deserialize;

/// When the bot answers a message in a Telegram group or supergroup.
#[derive(Clone, Copy, Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum GroupAnswer {
    /// Only a message that mentions the bot, replies to one of its messages, or starts with
    /// a command for it.
    #[default]
    Mentions,
    /// Every message.
    All,
    /// None: the bot stays silent in the group.
    Never,
}

impl GroupAnswer {
    pub fn as_str(self) -> &'static str {
        match self {
            GroupAnswer::Mentions => "mentions",
            GroupAnswer::All => "all",
            GroupAnswer::Never => "never",
        }
    }
}

/// What becomes of a message the sender edited after sending it.
#[derive(Clone, Copy, Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum EditPolicy {
    /// Acknowledged, not answered: the original question was answered already.
    #[default]
    Ignore,
    /// Answered once per edit, as a correction of the earlier message.
    Answer,
}

impl EditPolicy {
    pub fn as_str(self) -> &'static str {
        match self {
            EditPolicy::Ignore => "ignore",
            EditPolicy::Answer => "answer",
        }
    }
}

/// `[channels.telegram.groups."<chat id>"]`: one group's own rule.
#[derive(Clone, Copy, Debug, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct GroupSettings {
    pub answer: GroupAnswer,
}

/// `[channels.telegram]`.
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct TelegramSettings {
    /// The bot's username (with or without the `@`), which mentions and `/cmd@name`
    /// commands name. Unset, a group message reaches the bot only as a reply to it or as a
    /// bare command.
    pub bot_username: Option<String>,
    /// The rule of groups not named under `groups`.
    pub group_answer: GroupAnswer,
    /// Rules of single groups, by chat id (`"-1001234567890"`).
    pub groups: BTreeMap<String, GroupSettings>,
    /// Edited messages (`edited_message`, `edited_channel_post`).
    pub edits: EditPolicy,
}

impl TelegramSettings {
    /// The bot's username without its `@`, if configured.
    pub fn username(&self) -> Option<&str> {
        self.bot_username
            .as_deref()
            .map(|u| u.trim().trim_start_matches('@'))
            .filter(|u| !u.is_empty())
    }

    /// The rule of the group `chat_id`.
    pub fn answer_in(&self, chat_id: &str) -> GroupAnswer {
        self.groups
            .get(chat_id)
            .map_or(self.group_answer, |g| g.answer)
    }

    pub(crate) fn validate(&self, problems: &mut Vec<String>) {
        if let Some(name) = &self.bot_username {
            let bare = name.trim().trim_start_matches('@');
            let ok = (5..=32).contains(&bare.len())
                && bare.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
            if !ok {
                problems.push(format!(
                    "channels.telegram.bot_username: {name:?} is not a Telegram username (5-32 letters, digits or '_')"
                ));
            }
        }
        for chat in self.groups.keys() {
            if chat.parse::<i64>().is_err() {
                problems.push(format!(
                    "channels.telegram.groups: {chat:?} is not a Telegram chat id such as \"-1001234567890\""
                ));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn groups_default_to_mentions_and_edits_to_ignore() {
        let t: TelegramSettings =
            toml::from_str("bot_username = \"@Hermes_bot\"\n[groups.\"-100\"]\nanswer = \"all\"\n")
                .unwrap();
        assert_eq!(t.username(), Some("Hermes_bot"));
        assert_eq!(t.answer_in("-100"), GroupAnswer::All);
        assert_eq!(t.answer_in("-200"), GroupAnswer::Mentions);
        assert_eq!(t.edits, EditPolicy::Ignore);
        let mut problems = Vec::new();
        t.validate(&mut problems);
        assert!(problems.is_empty(), "{problems:?}");
    }

    #[test]
    fn a_bad_username_or_chat_id_is_refused() {
        let t: TelegramSettings =
            toml::from_str("bot_username = \"no way\"\n[groups.general]\nanswer = \"never\"\n")
                .unwrap();
        let mut problems = Vec::new();
        t.validate(&mut problems);
        assert_eq!(problems.len(), 2, "{problems:?}");
        assert!(toml::from_str::<TelegramSettings>("edits = \"sometimes\"").is_err());
        assert!(toml::from_str::<TelegramSettings>("group_answer = \"loud\"").is_err());
    }
}
