//! Users and the channels that reach them: created by operators (`hermes users`,
//! `hermes channels link`), resolved by the router for every message.

use chrono::{DateTime, Utc};
use hermes_types::ids::{AgentId, ApiKeyId, SessionId, UserId, WorkspaceId};

use super::{Client, DbError, Transaction, credits};
use hermes_types::model::{Platform, Tier};

/// A user, as the router and the CLI see it.
#[derive(Clone, Debug, serde::Serialize)]
pub struct User {
    pub id: UserId,
    pub workspace_id: WorkspaceId,
    pub display_name: Option<String>,
    pub tier: Tier,
    pub credits: i64,
    pub referral_code: String,
    /// The agent this user is assigned to, if any.
    pub agent_id: Option<AgentId>,
    pub created_at: DateTime<Utc>,
}

/// A sender on a platform, resolved to its user.
#[derive(Clone, Debug)]
pub struct Resolved {
    pub user: User,
    pub activated: bool,
    /// The agent this channel is assigned to, if any (wins over the user's).
    pub channel_agent_id: Option<AgentId>,
}

const USER_COLUMNS: &str = "u.id, u.workspace_id, u.display_name, u.tier, u.credits, u.referral_code, u.agent_id, u.created_at";

fn user_from(row: &tokio_postgres::Row) -> Result<User, DbError> {
    let tier: String = row.get("tier");
    Ok(User {
        id: row.get("id"),
        workspace_id: row.get("workspace_id"),
        display_name: row.get("display_name"),
        tier: tier.parse().map_err(DbError::Invalid)?,
        credits: row.get("credits"),
        referral_code: row.get("referral_code"),
        agent_id: row.get("agent_id"),
        created_at: row.get("created_at"),
    })
}

/// The user behind `sender_id` on `platform` as seen by `api_key` (a REST sender belongs
/// to the key it was linked under; `None` is the operator key and every chat platform),
/// with the channel's activation flag, and in the same round trip the user's latest
/// session on `chat_id` of that platform with its last activity (the router decides
/// whether it is still live).
pub async fn resolve_with_session(
    client: &Client,
    platform: Platform,
    api_key: Option<ApiKeyId>,
    sender_id: &str,
    chat_id: &str,
) -> Result<Option<(Resolved, Option<(SessionId, DateTime<Utc>)>)>, DbError> {
    let sql = format!(
        "SELECT {USER_COLUMNS}, c.activated, c.agent_id AS channel_agent_id,
                s.id AS session_id, s.last_activity_at
         FROM user_channels c JOIN users u ON u.id = c.user_id
         LEFT JOIN LATERAL (SELECT id, last_activity_at FROM sessions
                            WHERE user_id = u.id AND platform = c.platform AND channel_id = $3
                            ORDER BY last_activity_at DESC LIMIT 1) s ON true
         WHERE c.platform = $1 AND c.sender_id = $2
           AND COALESCE(c.api_key_id, '00000000-0000-0000-0000-000000000000'::uuid)
             = COALESCE($4::uuid, '00000000-0000-0000-0000-000000000000'::uuid)"
    );
    let row = client
        .query_opt(
            &crate::stmt(client, &sql).await?,
            &[&platform.as_str(), &sender_id, &chat_id, &api_key],
        )
        .await?;
    row.map(|r| {
        let session = r
            .get::<_, Option<SessionId>>("session_id")
            .map(|id| (id, r.get::<_, DateTime<Utc>>("last_activity_at")));
        Ok((
            Resolved {
                user: user_from(&r)?,
                activated: r.get("activated"),
                channel_agent_id: r.get("channel_agent_id"),
            },
            session,
        ))
    })
    .transpose()
}

/// A user to create.
pub struct NewUser<'a> {
    pub workspace: &'a str,
    pub display_name: Option<&'a str>,
    pub tier: Tier,
    /// Opening balance, written as a `grant` ledger row.
    pub credits: i64,
}

/// Create a user with a fresh referral code and its opening grant.
pub async fn create(tx: &Transaction<'_>, new: &NewUser<'_>) -> Result<User, DbError> {
    let workspace: Option<WorkspaceId> = tx
        .query_opt(
            &crate::stmt(tx, "SELECT id FROM workspaces WHERE slug = $1").await?,
            &[&new.workspace],
        )
        .await?
        .map(|r| r.get(0));
    let workspace =
        workspace.ok_or_else(|| DbError::NotFound(format!("no workspace {:?}", new.workspace)))?;
    let id = UserId::new();
    let code = referral_code(id);
    tx.execute(
        &crate::stmt(
            tx,
            "INSERT INTO users (id, workspace_id, display_name, tier, referral_code)
         VALUES ($1, $2, $3, $4, $5)",
        )
        .await?,
        &[
            &id,
            &workspace,
            &new.display_name,
            &new.tier.as_str(),
            &code,
        ],
    )
    .await?;
    if new.credits > 0 {
        credits::adjust(
            tx,
            id,
            new.credits,
            credits::Reason::Grant,
            Some("opening balance"),
        )
        .await?;
    }
    get(tx, id)
        .await?
        .ok_or_else(|| DbError::NotFound("user vanished after insert".into()))
}

/// A short, readable code derived from the id's random bits (unique by the index).
fn referral_code(id: UserId) -> String {
    const ALPHABET: &[u8] = b"ABCDEFGHJKLMNPQRSTUVWXYZ23456789";
    let bytes = id.as_uuid().into_bytes();
    // The last 8 bytes of a v7 uuid are random; 8 symbols of 5 bits use 40 of them.
    let mut bits = u64::from_be_bytes(bytes[8..16].try_into().unwrap_or([0; 8]));
    let mut code = String::from("HRM-");
    for _ in 0..8 {
        code.push(ALPHABET[(bits & 31) as usize] as char);
        bits >>= 5;
    }
    code
}

/// One user by id.
pub async fn get(client: &impl super::GenericClient, id: UserId) -> Result<Option<User>, DbError> {
    client
        .query_opt(
            &format!("SELECT {USER_COLUMNS} FROM users u WHERE u.id = $1"),
            &[&id],
        )
        .await?
        .map(|r| user_from(&r))
        .transpose()
}

/// A channel of a user, as listed by `hermes users show`.
#[derive(Clone, Debug, serde::Serialize)]
pub struct Channel {
    pub platform: String,
    pub sender_id: String,
    pub activated: bool,
    pub agent_id: Option<AgentId>,
    /// The REST key this sender belongs to (`None`: the operator key, or a chat platform).
    pub api_key_id: Option<ApiKeyId>,
}

/// The channels linked to a user.
pub async fn channels(client: &Client, user_id: UserId) -> Result<Vec<Channel>, DbError> {
    Ok(client
        .query(
            &crate::stmt(
                client,
                "SELECT platform, sender_id, activated, agent_id, api_key_id FROM user_channels
             WHERE user_id = $1 ORDER BY platform, sender_id",
            )
            .await?,
            &[&user_id],
        )
        .await?
        .iter()
        .map(|r| Channel {
            platform: r.get(0),
            sender_id: r.get(1),
            activated: r.get(2),
            agent_id: r.get(3),
            api_key_id: r.get(4),
        })
        .collect())
}

/// Where a channel is linked: the platform, and for the REST channel the key whose
/// callers may post as the sender (`None`: the operator key only). A sender id names a
/// person only within its key, so two customers' `alice` are two people.
#[derive(Clone, Copy, Debug)]
pub struct ChannelScope {
    pub platform: Platform,
    pub api_key: Option<ApiKeyId>,
}

impl From<Platform> for ChannelScope {
    fn from(platform: Platform) -> Self {
        Self {
            platform,
            api_key: None,
        }
    }
}

/// Whether `sender_id` on the chat `platform` is a linked, activated channel: a chat a
/// scheduled job may be answered in (docs/api.md, jobs).
pub async fn chat_linked(
    client: &impl super::GenericClient,
    platform: Platform,
    sender_id: &str,
) -> Result<bool, DbError> {
    Ok(client
        .query_opt(
            "SELECT 1 FROM user_channels
             WHERE platform = $1 AND sender_id = $2 AND api_key_id IS NULL AND activated",
            &[&platform.as_str(), &sender_id],
        )
        .await?
        .is_some())
}

/// Link (or re-link) a sender to a user. Returns false when the sender already belongs to
/// another user in that scope (an operator must unlink it there first).
pub async fn link_channel(
    client: &Client,
    user_id: UserId,
    scope: ChannelScope,
    sender_id: &str,
    activated: bool,
    agent_id: Option<AgentId>,
) -> Result<bool, DbError> {
    if scope.api_key.is_some() && scope.platform != Platform::Rest {
        return Err(DbError::Refused(
            "only a REST sender is linked under an API key".into(),
        ));
    }
    let n = client
        .execute(
            &crate::stmt(
                client,
                "INSERT INTO user_channels (user_id, platform, sender_id, activated, agent_id, api_key_id)
             VALUES ($1, $2, $3, $4, $5, $6)
             ON CONFLICT (platform, COALESCE(api_key_id, '00000000-0000-0000-0000-000000000000'::uuid), sender_id) DO UPDATE
                SET activated = EXCLUDED.activated, agent_id = EXCLUDED.agent_id
                WHERE user_channels.user_id = EXCLUDED.user_id",
            )
            .await?,
            &[
                &user_id,
                &scope.platform.as_str(),
                &sender_id,
                &activated,
                &agent_id,
                &scope.api_key,
            ],
        )
        .await?;
    Ok(n == 1)
}

/// Change a user's tier, name or assigned agent (`None` leaves a field as it is).
pub async fn update(
    client: &Client,
    user_id: UserId,
    tier: Option<Tier>,
    display_name: Option<&str>,
    agent_id: Option<Option<AgentId>>,
) -> Result<bool, DbError> {
    let n = client
        .execute(
            &crate::stmt(
                client,
                "UPDATE users SET tier = COALESCE($2, tier),
                              display_name = COALESCE($3, display_name),
                              agent_id = CASE WHEN $4 THEN $5 ELSE agent_id END,
                              updated_at = now()
             WHERE id = $1",
            )
            .await?,
            &[
                &user_id,
                &tier.map(Tier::as_str),
                &display_name,
                &agent_id.is_some(),
                &agent_id.flatten(),
            ],
        )
        .await?;
    Ok(n == 1)
}

/// Users newest first, `limit` at a time, before user `before` (the last of the page
/// before; user ids are UUID v7, so the primary key pages them).
pub async fn page(
    client: &Client,
    before: Option<UserId>,
    limit: i64,
) -> Result<Vec<User>, DbError> {
    client
        .query(
            &format!(
                "SELECT {USER_COLUMNS} FROM users u WHERE $1::uuid IS NULL OR u.id < $1
                 ORDER BY u.id DESC LIMIT $2"
            ),
            &[&before, &limit.clamp(1, 1000)],
        )
        .await?
        .iter()
        .map(user_from)
        .collect()
}

/// The user a chat platform's sender is linked to (the REST channel's senders, which belong
/// to keys, are found by their user's id instead).
pub async fn of_chat_sender(
    client: &Client,
    platform: Platform,
    sender_id: &str,
) -> Result<Option<UserId>, DbError> {
    Ok(client
        .query_opt(
            "SELECT user_id FROM user_channels
             WHERE platform = $1
               AND COALESCE(api_key_id, '00000000-0000-0000-0000-000000000000'::uuid)
                   = '00000000-0000-0000-0000-000000000000'::uuid
               AND sender_id = $2",
            &[&platform.as_str(), &sender_id],
        )
        .await?
        .map(|r| r.get(0)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn referral_codes_are_readable_and_differ() {
        let a = referral_code(UserId::new());
        let b = referral_code(UserId::new());
        assert_eq!(a.len(), 12);
        assert!(a.starts_with("HRM-"));
        assert!(
            a[4..]
                .chars()
                .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit())
        );
        assert!(!a.contains('O') && !a.contains('0') && !a.contains('1') && !a.contains('I'));
        assert_ne!(a, b);
    }
}
