//! `[channels.sms]` and `[channels.messenger]`: how long an SMS reply may be, what answers an
//! SMS `HELP`, and how a Messenger reply outside the 24-hour window goes (docs/channels.md,
//! "SMS through Twilio" and "Facebook Messenger").

use serde::Deserialize;

/// Twilio's ceiling: a message over 10 segments is refused or delivered poorly.
pub const MAX_SEGMENTS: u8 = 10;

/// `[channels.sms]`.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct SmsSettings {
    /// Segments one SMS may hold (1 to 10); a longer reply goes as several messages.
    pub max_segments: u8,
    /// The answer to `HELP` (or `INFO`), sent in the webhook's TwiML answer; none: Twilio's
    /// own help reply stands.
    pub help_text: Option<String>,
}

impl Default for SmsSettings {
    fn default() -> Self {
        Self {
            max_segments: 4,
            help_text: None,
        }
    }
}

impl SmsSettings {
    pub(crate) fn validate(&self, problems: &mut Vec<String>) {
        if !(1..=MAX_SEGMENTS).contains(&self.max_segments) {
            problems.push(format!(
                "[channels.sms] max_segments must be 1 to {MAX_SEGMENTS}, not {}",
                self.max_segments
            ));
        }
        if self
            .help_text
            .as_deref()
            .is_some_and(|t| t.trim().is_empty())
        {
            problems.push("[channels.sms] help_text is empty: leave it out instead".into());
        }
    }
}

/// A Messenger message tag: what lets a message go outside the 24-hour window
/// (<https://developers.facebook.com/docs/messenger-platform/send-messages/message-tags>).
#[derive(Clone, Copy, Debug, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum MessageTag {
    /// A reminder or update of an event the person registered for.
    ConfirmedEventUpdate,
    /// An update about a purchase.
    PostPurchaseUpdate,
    /// A change to the person's account or application.
    AccountUpdate,
    /// A human agent answering within 7 days (needs the Human Agent permission).
    HumanAgent,
}

impl MessageTag {
    /// The tag as the Send API spells it.
    pub fn as_str(self) -> &'static str {
        match self {
            MessageTag::ConfirmedEventUpdate => "CONFIRMED_EVENT_UPDATE",
            MessageTag::PostPurchaseUpdate => "POST_PURCHASE_UPDATE",
            MessageTag::AccountUpdate => "ACCOUNT_UPDATE",
            MessageTag::HumanAgent => "HUMAN_AGENT",
        }
    }
}

/// `[channels.messenger]`.
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct MessengerSettings {
    /// The tag a reply outside the 24-hour window goes with; none: it is parked as
    /// `outside_window`.
    pub outside_window_tag: Option<MessageTag>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn segments_are_bounded_and_tags_read_as_meta_spells_them() {
        let mut problems = Vec::new();
        SmsSettings::default().validate(&mut problems);
        assert!(problems.is_empty());
        for bad in [0, 11] {
            let s = SmsSettings {
                max_segments: bad,
                help_text: None,
            };
            s.validate(&mut problems);
        }
        assert_eq!(problems.len(), 2);
        let m: MessengerSettings = toml::from_str("outside_window_tag = \"HUMAN_AGENT\"").unwrap();
        assert_eq!(
            m.outside_window_tag.map(MessageTag::as_str),
            Some("HUMAN_AGENT")
        );
        assert!(toml::from_str::<MessengerSettings>("outside_window_tag = \"PROMO\"").is_err());
    }
}
