//! The vocabulary of agents and their dispatch (docs/agents.md): kinds, tones, presence,
//! engagement modes and how a run's agent was chosen. Stored as text in PostgreSQL, so each
//! enum has one spelling shared by the database, the CLI and the wire.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

/// Generates `as_str`, `ALL`, `Display` and `FromStr` for a fieldless enum with fixed spellings.
macro_rules! spelled {
    ($ty:ident { $($variant:ident => $text:literal),+ $(,)? }) => {
        impl $ty {
            /// Every value, in declaration order.
            pub const ALL: &'static [$ty] = &[$($ty::$variant),+];

            /// The spelling used in the database, the CLI and on the wire.
            pub fn as_str(self) -> &'static str {
                match self { $($ty::$variant => $text),+ }
            }
        }

        impl fmt::Display for $ty {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(self.as_str())
            }
        }

        impl FromStr for $ty {
            type Err = String;

            fn from_str(s: &str) -> Result<Self, String> {
                Self::ALL
                    .iter()
                    .copied()
                    .find(|v| v.as_str().eq_ignore_ascii_case(s))
                    .ok_or_else(|| {
                        let all: Vec<&str> = Self::ALL.iter().map(|v| v.as_str()).collect();
                        format!("{s:?} is not one of {}", all.join(", "))
                    })
            }
        }
    };
}

/// Who answers for an agent: the fleet's own models, or an external runtime woken by webhook.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum AgentKind {
    Internal,
    External,
}
spelled!(AgentKind { Internal => "internal", External => "external" });

/// The four tones of an agent's personality.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Tone {
    Chill,
    #[default]
    Friendly,
    Professional,
    Hype,
}
spelled!(Tone { Chill => "chill", Friendly => "friendly", Professional => "professional", Hype => "hype" });

impl Tone {
    /// How the tone is put to the model.
    pub fn instruction(self) -> &'static str {
        match self {
            Tone::Chill => "Keep it relaxed and easy-going; short sentences, no pressure.",
            Tone::Friendly => "Be warm and helpful, like a friend who knows the answer.",
            Tone::Professional => "Be precise, courteous and to the point.",
            Tone::Hype => "Bring energy and enthusiasm; celebrate the user's plans.",
        }
    }
}

/// Presence of an agent; BUSY and OFFLINE agents are skipped by round robin.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "UPPERCASE")]
pub enum AgentStatus {
    Online,
    Busy,
    Offline,
}
spelled!(AgentStatus { Online => "ONLINE", Busy => "BUSY", Offline => "OFFLINE" });

/// What a run may do (docs/agents.md): EXECUTE may use local host tools; the others may not.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "UPPERCASE")]
pub enum EngagementMode {
    #[default]
    Execute,
    Review,
    Research,
    Discuss,
}
spelled!(EngagementMode { Execute => "EXECUTE", Review => "REVIEW", Research => "RESEARCH", Discuss => "DISCUSS" });

/// The version of the dispatch contract runs carry downstream.
pub const CONTRACT_VERSION: &str = "2026-06-06.2";

/// How the agent of a run was chosen.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum DispatchMode {
    /// The channel or the user is assigned to an agent.
    Assigned,
    /// The text named an agent with `@profileKey`.
    Mention,
    /// The eligible agent dispatched to longest ago.
    RoundRobin,
    /// No agent is configured: the built-in persona of the configuration answers.
    Default,
}
spelled!(DispatchMode { Assigned => "ASSIGNED", Mention => "MENTION", RoundRobin => "ROUND_ROBIN", Default => "DEFAULT" });

/// Why an external agent is woken: the `X-Forge-Event` header and the envelope's `kind`
/// (docs/agents.md, "Signed agent webhooks").
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum WakeEvent {
    /// A run that no person's chat message started was assigned to the agent.
    AgentAssigned,
    /// A person posted a chat message (Telegram, WhatsApp, Instagram, Slack, the REST channel)
    /// that the agent is to answer.
    ChatMessagePosted,
}
spelled!(WakeEvent { AgentAssigned => "AGENT_ASSIGNED", ChatMessagePosted => "CHAT_MESSAGE_POSTED" });

impl WakeEvent {
    /// The event of a run that came in on `platform`: a person's chat message is
    /// `CHAT_MESSAGE_POSTED`, as the contract names a chat message addressed to an agent;
    /// any other run (the API's) is `AGENT_ASSIGNED`.
    pub fn of_run(platform: crate::model::Platform) -> Self {
        use crate::model::Platform;
        match platform {
            Platform::Telegram
            | Platform::Whatsapp
            | Platform::Instagram
            | Platform::Slack
            | Platform::Sms
            | Platform::Messenger
            | Platform::Teams
            | Platform::Discord
            | Platform::Rest => WakeEvent::ChatMessagePosted,
            Platform::Api | Platform::Forge => WakeEvent::AgentAssigned,
        }
    }
}

/// The dispatch record of a run: `{ mode, chosen, reason }`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Dispatch {
    pub mode: DispatchMode,
    /// The chosen agent's profile key (`default` for the built-in persona).
    pub chosen: String,
    pub reason: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spellings_round_trip_through_text_and_json() {
        for m in EngagementMode::ALL {
            assert_eq!(m.as_str().parse::<EngagementMode>().unwrap(), *m);
            assert_eq!(serde_json::to_value(m).unwrap(), m.as_str());
        }
        for s in AgentStatus::ALL {
            assert_eq!(serde_json::to_value(s).unwrap(), s.as_str());
        }
        for d in DispatchMode::ALL {
            assert_eq!(serde_json::to_value(d).unwrap(), d.as_str());
        }
        for e in WakeEvent::ALL {
            assert_eq!(serde_json::to_value(e).unwrap(), e.as_str());
        }
        assert_eq!("Hype".parse::<Tone>().unwrap(), Tone::Hype);
        assert!(
            "loud"
                .parse::<Tone>()
                .unwrap_err()
                .contains("chill, friendly")
        );
    }

    #[test]
    fn a_persons_chat_message_wakes_as_chat_message_posted() {
        use crate::model::Platform;
        for p in [
            Platform::Telegram,
            Platform::Whatsapp,
            Platform::Instagram,
            Platform::Slack,
            Platform::Rest,
        ] {
            assert_eq!(WakeEvent::of_run(p), WakeEvent::ChatMessagePosted);
        }
        assert_eq!(WakeEvent::of_run(Platform::Api), WakeEvent::AgentAssigned);
        assert_eq!(WakeEvent::ChatMessagePosted.as_str(), "CHAT_MESSAGE_POSTED");
    }
}
