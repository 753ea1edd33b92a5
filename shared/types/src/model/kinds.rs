//! The small enums every stage names: subscription tiers and platforms.

use serde::{Deserialize, Serialize};

/// Subscription tier: chooses the model chain and the budgets.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, PartialOrd, Ord)]
#[serde(rename_all = "kebab-case")]
pub enum Tier {
    Free,
    Starter,
    Pro,
    VenueGrowth,
}

impl Tier {
    pub const ALL: [Tier; 4] = [Tier::Free, Tier::Starter, Tier::Pro, Tier::VenueGrowth];

    pub fn as_str(self) -> &'static str {
        match self {
            Tier::Free => "free",
            Tier::Starter => "starter",
            Tier::Pro => "pro",
            Tier::VenueGrowth => "venue-growth",
        }
    }
}

impl std::str::FromStr for Tier {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Tier::ALL
            .into_iter()
            .find(|t| t.as_str() == s)
            .ok_or_else(|| {
                format!("unknown tier {s:?} (expected free, starter, pro or venue-growth)")
            })
    }
}

/// Where a message came in, and so where its answer goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Platform {
    /// The OpenAI-compatible HTTP API: the caller waits on the run's event stream.
    Api,
    /// The generic REST channel (`POST /v1/messages`): answered by callback or polling.
    Rest,
    Telegram,
    /// WhatsApp, through the Cloud API or 360dialog.
    Whatsapp,
    Instagram,
    /// Slack, through the Events API over HTTP.
    Slack,
    /// SMS (and MMS) through Twilio's Programmable Messaging: the chat is the phone number.
    Sms,
    /// Facebook Messenger, through Meta's Messenger Platform (a Facebook Page's inbox).
    Messenger,
    /// Microsoft Teams, through the Bot Framework: the chat is a conversation on a regional
    /// Connector service.
    Teams,
    /// Discord, through interactions over HTTP: the chat is a channel (or a DM channel).
    Discord,
    /// A Forge's signed wake (`POST /agents/forge`): an internal agent runs the agent loop
    /// against the Forge's MCP surface and acts through its tools. No user, no credit, no
    /// session; the run's final text goes nowhere (docs/agents.md, "Hermes as a Forge agent").
    Forge,
}

impl Platform {
    pub const ALL: [Platform; 11] = [
        Platform::Api,
        Platform::Rest,
        Platform::Telegram,
        Platform::Whatsapp,
        Platform::Instagram,
        Platform::Slack,
        Platform::Sms,
        Platform::Messenger,
        Platform::Teams,
        Platform::Discord,
        Platform::Forge,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Platform::Api => "api",
            Platform::Rest => "rest",
            Platform::Telegram => "telegram",
            Platform::Whatsapp => "whatsapp",
            Platform::Instagram => "instagram",
            Platform::Slack => "slack",
            Platform::Sms => "sms",
            Platform::Messenger => "messenger",
            Platform::Teams => "teams",
            Platform::Discord => "discord",
            Platform::Forge => "forge",
        }
    }

    pub fn parse(s: &str) -> Option<Platform> {
        Platform::ALL.into_iter().find(|p| p.as_str() == s)
    }

    /// A messaging platform whose replies are sent to a chat (not an HTTP caller).
    pub fn is_chat(self) -> bool {
        matches!(
            self,
            Platform::Telegram
                | Platform::Whatsapp
                | Platform::Instagram
                | Platform::Slack
                | Platform::Sms
                | Platform::Messenger
                | Platform::Teams
                | Platform::Discord
        )
    }
}
