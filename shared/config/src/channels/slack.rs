//! `[channels.slack]`: where the bot answers a Slack message (docs/channels.md, "Slack").

use serde::Deserialize;

/// Where the answer to a mention at the top level of a channel goes. A message written in a
/// thread is always answered in its thread, and a direct message at the top level of the
/// conversation at its top level.
#[derive(Clone, Copy, Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum SlackChannelReplies {
    /// In a thread under the mention, so a channel is not filled with the bot's answers.
    #[default]
    Thread,
    /// In the channel itself.
    Channel,
}

impl SlackChannelReplies {
    pub fn as_str(self) -> &'static str {
        match self {
            SlackChannelReplies::Thread => "thread",
            SlackChannelReplies::Channel => "channel",
        }
    }
}

/// The `[channels.slack]` section.
#[derive(Clone, Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields, default)]
pub struct SlackSettings {
    /// Where a mention at a channel's top level is answered (`thread`, the default, or
    /// `channel`).
    pub channel_replies: SlackChannelReplies,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_section_reads_its_one_setting() {
        let s: SlackSettings = toml::from_str("channel_replies = \"channel\"").unwrap();
        assert_eq!(s.channel_replies, SlackChannelReplies::Channel);
        assert_eq!(SlackSettings::default().channel_replies.as_str(), "thread");
        assert!(toml::from_str::<SlackSettings>("threads = true").is_err());
    }
}
