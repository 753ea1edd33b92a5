//! Where a Slack answer goes: a conversation (`C…`, `G…`, `D…`) and, when the answer
//! belongs in a thread, the thread's parent message (its `ts`). Both travel as the run's
//! chat id, `{channel}` or `{channel}:{thread ts}`, so every part of the answer, a draft's
//! edits and the session all follow the thread without the stages knowing Slack
//! (docs/channels.md, "Slack").

use std::fmt;
use std::str::FromStr;

/// A Slack message timestamp (`ts`, `thread_ts`): seconds and microseconds since the epoch,
/// written `1355517523.000005`. It is the message's id within its conversation.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Ts {
    secs: u64,
    micros: u32,
}

impl Ts {
    /// The timestamp `secs.micros` (micros below 1,000,000).
    pub fn new(secs: u64, micros: u32) -> Option<Self> {
        (micros < 1_000_000).then_some(Self { secs, micros })
    }

    /// Its seconds part.
    pub fn secs(self) -> u64 {
        self.secs
    }
}

impl fmt::Display for Ts {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{:06}", self.secs, self.micros)
    }
}

impl FromStr for Ts {
    type Err = ();

    /// `digits.digits`, the fraction six digits long, as Slack writes it.
    fn from_str(s: &str) -> Result<Self, ()> {
        let (secs, micros) = s.split_once('.').ok_or(())?;
        let digits = |d: &str| !d.is_empty() && d.bytes().all(|b| b.is_ascii_digit());
        if !digits(secs) || !digits(micros) || micros.len() != 6 || secs.len() > 19 {
            return Err(());
        }
        let secs = secs.parse().map_err(|_| ())?;
        let micros = micros.parse().map_err(|_| ())?;
        Ts::new(secs, micros).ok_or(())
    }
}

/// A Slack conversation, and the thread an answer goes in.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SlackChat {
    /// The conversation's id (`C…` channel, `G…` private channel, `D…` direct message).
    pub channel: String,
    /// The thread's parent message, when the answer goes in a thread.
    pub thread: Option<Ts>,
}

impl SlackChat {
    /// The run's chat id: `{channel}`, or `{channel}:{thread ts}`.
    pub fn chat_id(&self) -> String {
        match self.thread {
            Some(ts) => format!("{}:{ts}", self.channel),
            None => self.channel.clone(),
        }
    }

    /// The chat id read back; `None` when it is not one [`SlackChat::chat_id`] writes.
    pub fn parse(chat_id: &str) -> Option<Self> {
        let (channel, thread) = match chat_id.split_once(':') {
            Some((channel, ts)) => (channel, Some(ts.parse().ok()?)),
            None => (chat_id, None),
        };
        is_conversation_id(channel).then(|| Self {
            channel: channel.to_string(),
            thread,
        })
    }
}

/// Whether `id` can be a Slack conversation id (`C…`, `D…`, `G…`): letters and digits only,
/// so a chat id made of it reads back as the same conversation.
pub fn is_conversation_id(id: &str) -> bool {
    !id.is_empty() && id.bytes().all(|b| b.is_ascii_alphanumeric())
}

/// The conversation of a chat id: what Slack paces its posts by (one message a second per
/// channel, <https://api.slack.com/methods/chat.postMessage#rate_limiting>), whatever thread
/// they go in.
pub fn pacing_key(chat_id: &str) -> &str {
    chat_id
        .split_once(':')
        .map_or(chat_id, |(channel, _)| channel)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamps_read_and_write_as_slack_does() {
        let ts: Ts = "1355517523.000005".parse().unwrap();
        assert_eq!(ts.to_string(), "1355517523.000005");
        assert_eq!(ts.secs(), 1_355_517_523);
        for bad in [
            "",
            "1",
            "1.5",
            "1.0000005",
            "a.000001",
            ".000001",
            "1.00000x",
            "-1.000001",
        ] {
            assert!(bad.parse::<Ts>().is_err(), "{bad:?}");
        }
        assert!("99999999999999999999.000001".parse::<Ts>().is_err());
    }

    #[test]
    fn a_chat_id_names_the_conversation_and_its_thread() {
        let threaded = SlackChat {
            channel: "C0LAN2Q65".into(),
            thread: Some("1515449522.000016".parse().unwrap()),
        };
        assert_eq!(threaded.chat_id(), "C0LAN2Q65:1515449522.000016");
        assert_eq!(SlackChat::parse(&threaded.chat_id()), Some(threaded));
        let dm = SlackChat::parse("D024BE91L").unwrap();
        assert_eq!((dm.channel.as_str(), dm.thread), ("D024BE91L", None));
        for bad in ["", "C1:", "C1:x", ":1.000001", "C-1", "C1:1.000001:2"] {
            assert_eq!(SlackChat::parse(bad), None, "{bad:?}");
        }
        assert_eq!(pacing_key("C0LAN2Q65:1515449522.000016"), "C0LAN2Q65");
        assert_eq!(pacing_key("D024BE91L"), "D024BE91L");
    }
}
