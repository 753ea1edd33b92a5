//! Where a Teams answer goes: a conversation on the regional Connector service the activity
//! came from (its `serviceUrl`). Both travel as the run's chat id,
//! `{serviceUrl}|{conversation id}`, so every part of the answer, the typing indicator and
//! the session follow the conversation without the stages knowing Teams
//! (docs/channels.md, "Microsoft Teams"). `|` cannot stand in a URL unescaped, so the first
//! one ends the service URL.

use url::Url;

/// The longest conversation id kept (Teams' are about 100 characters; a channel thread's a
/// little more).
const MAX_CONVERSATION_CHARS: usize = 512;

/// A Teams conversation and the Connector service that holds it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TeamsChat {
    /// The activity's `serviceUrl` (`https://smba.trafficmanager.net/amer/`).
    pub service_url: Url,
    /// The conversation's id (`a:1…` personal, `19:…@thread.tacv2;messageid=…` a channel
    /// thread, `19:…@thread.v2` a group chat).
    pub conversation: String,
}

impl TeamsChat {
    /// The run's chat id: `{serviceUrl}|{conversation id}`.
    pub fn chat_id(&self) -> String {
        format!("{}|{}", self.service_url, self.conversation)
    }

    /// The chat id read back; `None` when it is not one [`TeamsChat::chat_id`] writes.
    pub fn parse(chat_id: &str) -> Option<Self> {
        let (service, conversation) = chat_id.split_once('|')?;
        let service_url = Url::parse(service).ok()?;
        is_conversation_id(conversation).then(|| Self {
            service_url,
            conversation: conversation.to_owned(),
        })
    }

    /// `{serviceUrl}v3/conversations/{id}/activities`, or the reply to the activity
    /// `reply_to` under it. The ids are percent-encoded whole, as Microsoft's SDKs send them
    /// (a channel thread's `;messageid=` is not a path parameter).
    pub fn activities_url(&self, reply_to: Option<&str>) -> Option<Url> {
        let base = self.service_url.as_str().trim_end_matches('/');
        let mut url = format!(
            "{base}/v3/conversations/{}/activities",
            encoded(&self.conversation)
        );
        if let Some(id) = reply_to {
            url = format!("{url}/{}", encoded(id));
        }
        Url::parse(&url).ok()
    }
}

/// `s` with every byte but RFC 3986's unreserved ones percent-encoded.
fn encoded(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => {
                char::from(b).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// Whether `id` can be a conversation id: printable, no `|`, not too long.
pub fn is_conversation_id(id: &str) -> bool {
    !id.is_empty()
        && id.chars().count() <= MAX_CONVERSATION_CHARS
        && id.bytes().all(|b| b.is_ascii_graphic() && b != b'|')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_chat_id_names_the_service_and_the_conversation() {
        let chat = TeamsChat {
            service_url: "https://smba.trafficmanager.net/amer/".parse().unwrap(),
            conversation: "19:abc@thread.tacv2;messageid=1612345".into(),
        };
        let id = chat.chat_id();
        assert_eq!(
            id,
            "https://smba.trafficmanager.net/amer/|19:abc@thread.tacv2;messageid=1612345"
        );
        assert_eq!(TeamsChat::parse(&id), Some(chat.clone()));
        assert_eq!(
            chat.activities_url(Some("1612345")).unwrap().as_str(),
            "https://smba.trafficmanager.net/amer/v3/conversations/19%3Aabc%40thread.tacv2%3Bmessageid%3D1612345/activities/1612345"
        );
        for bad in [
            "",
            "a:1",
            "not a url|a:1",
            "https://x/|",
            "https://x/|a b",
            "https://x/|a|b",
        ] {
            assert_eq!(TeamsChat::parse(bad), None, "{bad:?}");
        }
    }
}
