//! Identifier newtypes. Every id that crosses a service boundary has its own type so a
//! run id can never be passed where a message id is expected.

use std::fmt;
use std::str::FromStr;

use bytes::BytesMut;
use postgres_types::{FromSql, IsNull, ToSql, Type, to_sql_checked};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

/// What a failed conversion to or from a PostgreSQL value reports.
type SqlError = Box<dyn std::error::Error + Sync + Send>;

macro_rules! uuid_id {
    ($(#[$doc:meta])* $name:ident) => {
        $(#[$doc])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
        #[serde(transparent)]
        pub struct $name(pub Uuid);

        impl $name {
            /// A new time-ordered (v7) id, so ids sort by creation time in indexes and logs.
            pub fn new() -> Self {
                Self(Uuid::now_v7())
            }

            /// The underlying UUID.
            pub fn as_uuid(&self) -> Uuid {
                self.0
            }
        }

        impl Default for $name {
            fn default() -> Self {
                Self::new()
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                self.0.fmt(f)
            }
        }

        impl FromStr for $name {
            type Err = uuid::Error;
            fn from_str(s: &str) -> Result<Self, Self::Err> {
                Uuid::parse_str(s).map(Self)
            }
        }

        impl From<Uuid> for $name {
            fn from(u: Uuid) -> Self {
                Self(u)
            }
        }

        // Stored as PostgreSQL `uuid`, so rows and parameters carry the typed id.
        impl ToSql for $name {
            fn to_sql(&self, ty: &Type, out: &mut BytesMut) -> Result<IsNull, SqlError> {
                self.0.to_sql(ty, out)
            }

            fn accepts(ty: &Type) -> bool {
                <Uuid as ToSql>::accepts(ty)
            }

            to_sql_checked!();
        }

        impl<'a> FromSql<'a> for $name {
            fn from_sql(ty: &Type, raw: &'a [u8]) -> Result<Self, SqlError> {
                Uuid::from_sql(ty, raw).map(Self)
            }

            fn accepts(ty: &Type) -> bool {
                <Uuid as FromSql>::accepts(ty)
            }
        }
    };
}

uuid_id!(
    /// One unit of work from an inbound message to its final reply (an AgentRun).
    RunId
);
uuid_id!(
    /// One bus message; the idempotency key every consumer records.
    MessageId
);
uuid_id!(
    /// A person known to the router (`users`), whichever channels they write from.
    UserId
);
uuid_id!(
    /// One conversation window of a user (`sessions`); a new one starts after a quiet spell.
    SessionId
);
uuid_id!(
    /// An agent (`agents`): the fleet's own persona or an external agent runtime.
    AgentId
);
uuid_id!(
    /// A tenant (`workspaces`): its agents, keys and provider secrets belong together.
    WorkspaceId
);
uuid_id!(
    /// An API key of the REST channel (`api_keys`).
    ApiKeyId
);
uuid_id!(
    /// One signed wake owed to an external agent (`webhook_deliveries`).
    DeliveryId
);
uuid_id!(
    /// A streamed answer an external agent is writing (`agent_drafts`): the same id from
    /// `chat.startDraft` to `chat.finalizeDraft`, so the final text replaces the draft.
    DraftId
);
uuid_id!(
    /// A tool call waiting for an operator's approval (`tool_approvals`, docs/operator-mcp.md).
    ApprovalId
);
uuid_id!(
    /// A response of the OpenAI Responses API (`responses`); on the wire `resp_` and the
    /// UUID's 32 hex digits, as OpenAI's ids look (see [`ResponseId::wire`]).
    ResponseId
);

impl MessageId {
    /// The id of a message named after `base` (another message's id, or a run's) and `tag`
    /// (the kind of message it is for `base`): every copy gets the same id, so publishing it
    /// twice makes one message for its consumer's idempotency record.
    pub fn derived(base: Uuid, tag: u128) -> Self {
        Self(Uuid::from_u128(base.as_u128() ^ tag))
    }
}

impl ResponseId {
    /// The id as API callers see it: `resp_` and 32 lowercase hex digits.
    pub fn wire(&self) -> String {
        format!("resp_{}", self.0.simple())
    }

    /// An id as callers send it back (`None` for anything this fleet never handed out).
    pub fn parse_wire(s: &str) -> Option<Self> {
        let hex = s.strip_prefix("resp_")?;
        (hex.len() == 32)
            .then(|| Uuid::try_parse(hex).ok().map(Self))
            .flatten()
    }
}
uuid_id!(
    /// A scheduled job (`jobs`): a prompt run on a schedule for its owner (docs/api.md, jobs).
    JobId
);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_derived_message_id_is_stable_per_base_and_tag() {
        let base = Uuid::now_v7();
        assert_eq!(MessageId::derived(base, 7), MessageId::derived(base, 7));
        assert_ne!(MessageId::derived(base, 7), MessageId::derived(base, 8));
        assert_ne!(MessageId::derived(base, 7).as_uuid(), base);
        assert_ne!(
            MessageId::derived(base, 7),
            MessageId::derived(Uuid::now_v7(), 7)
        );
    }

    #[test]
    fn ids_round_trip_through_text_and_json() {
        let id = RunId::new();
        let parsed: RunId = id.to_string().parse().unwrap();
        assert_eq!(parsed, id);
        let json = serde_json::to_string(&id).unwrap();
        assert_eq!(json, format!("\"{id}\""));
        assert!("not-a-uuid".parse::<MessageId>().is_err());
    }

    #[test]
    fn response_ids_look_like_openai_ones_and_parse_back() {
        let id = ResponseId::new();
        let wire = id.wire();
        assert!(wire.starts_with("resp_") && wire.len() == 37, "{wire}");
        assert_eq!(ResponseId::parse_wire(&wire), Some(id));
        for bad in ["resp_", "resp_xyz", &id.to_string(), &wire[5..]] {
            assert_eq!(ResponseId::parse_wire(bad), None, "{bad}");
        }
        let dashed = format!("resp_{id}");
        assert_eq!(ResponseId::parse_wire(&dashed), None);
    }

    #[test]
    fn v7_ids_sort_by_creation() {
        let a = MessageId::new();
        let b = MessageId::new();
        assert!(a < b);
    }
}
