//! Keys of the REST channel. Only a SHA-256 of each key is stored; the key itself is shown
//! once, at creation. A key may carry the callback URL its runs' answers are POSTed to, and
//! has its own callback signing secret (Standard Webhooks, `whsec_…`), stored sealed with
//! HERMES_SECRET_KEYS and shown once at creation and at each rotation.

use hermes_net::keyring::KeyRing;
use hermes_types::ids::{AgentId, ApiKeyId};
use rand::RngCore;
use sha2::{Digest, Sha256};

use super::{Client, DbError};

/// A key as stored (without the key).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ApiKey {
    pub id: ApiKeyId,
    pub name: String,
    pub prefix: String,
    pub callback_url: Option<String>,
    pub created_at: chrono::DateTime<chrono::Utc>,
    pub revoked: bool,
    /// The callback signing secret as a Fernet token (open it with HERMES_SECRET_KEYS).
    pub callback_secret_sealed: Option<String>,
    /// The surfaces the key may call.
    pub scopes: Vec<KeyScope>,
    /// Its request rate and budgets.
    pub limits: KeyLimits,
    /// The agent this key speaks for on the MCP surface (docs/agents.md, "The agent's side");
    /// `None`: a key of people or scripts, refused by the agent tools.
    pub agent_id: Option<AgentId>,
    /// The local-host toolsets (or tools) its API and job runs may be offered; empty: none
    /// (docs/security.md, "Keys and tenants").
    pub toolsets: Vec<String>,
}

/// A surface a key may call (docs/security.md, keys and tenants).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum KeyScope {
    /// The REST channel: `POST /v1/messages`, `GET /v1/runs/{id}` (its own runs).
    Messages,
    /// The OpenAI-compatible API: `/v1/chat/completions`, `/v1/models`.
    Chat,
    /// Scheduled jobs: `/api/jobs` (its own jobs only).
    Jobs,
    /// The operator MCP server at `/mcp` (docs/operator-mcp.md): every conversation of the
    /// install, sending to any known chat, answering approvals. Never a default.
    Operator,
    /// A2A per workspace: `POST /workspaces/{id}/a2a` and its agent card (docs/a2a.md), its
    /// own tasks only.
    A2a,
}

impl KeyScope {
    pub const ALL: [KeyScope; 5] = [
        KeyScope::Messages,
        KeyScope::Chat,
        KeyScope::Jobs,
        KeyScope::Operator,
        KeyScope::A2a,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            KeyScope::Messages => "messages",
            KeyScope::Chat => "chat",
            KeyScope::Jobs => "jobs",
            KeyScope::Operator => "operator",
            KeyScope::A2a => "a2a",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|k| k.as_str() == s)
    }
}

impl std::fmt::Display for KeyScope {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::str::FromStr for KeyScope {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        Self::parse(s)
            .ok_or_else(|| format!("{s:?} is not a scope (messages, chat, jobs, operator, a2a)"))
    }
}

/// What a key may use (`None`: no limit of that kind). Tokens and dollars count every
/// model call made for the key's messages, on both surfaces.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct KeyLimits {
    pub requests_per_minute: Option<u32>,
    pub daily_tokens: Option<u64>,
    pub monthly_tokens: Option<u64>,
    pub daily_micro_usd: Option<u64>,
    pub monthly_micro_usd: Option<u64>,
}

impl KeyLimits {
    /// Whether any token or dollar budget applies (else the gateway meters nothing).
    pub fn has_budget(&self) -> bool {
        self.daily_tokens.is_some()
            || self.monthly_tokens.is_some()
            || self.daily_micro_usd.is_some()
            || self.monthly_micro_usd.is_some()
    }
}

impl ApiKey {
    /// The callback signing secret, opened with `ring`; `None` when the key has none or no
    /// key of the ring opens it.
    pub fn callback_secret(&self, ring: Option<&KeyRing>) -> Option<Vec<u8>> {
        ring?.open(self.callback_secret_sealed.as_deref()?)
    }
}

/// A new callback signing secret: `whsec_` and the base64 of 32 random bytes, the form
/// Standard Webhooks libraries take.
pub fn generate_secret() -> String {
    let mut bytes = [0u8; 32];
    rand::rng().fill_bytes(&mut bytes);
    hermes_net::signing::standard_secret(&bytes)
}

/// The hash a key is stored and looked up by.
pub fn hash(key: &str) -> String {
    hex::encode(Sha256::digest(key.as_bytes()))
}

/// A new random key: `hk_` and 40 hex characters (160 bits).
pub fn generate() -> String {
    let mut bytes = [0u8; 20];
    rand::rng().fill_bytes(&mut bytes);
    format!("hk_{}", hex::encode(bytes))
}

/// A key just made: the record, the key and its callback signing secret (both shown once).
pub struct Created {
    pub key: ApiKey,
    pub secret_key: String,
    /// `None` when no ring was given to seal one (a key without a callback needs none).
    pub callback_secret: Option<String>,
}

/// Store a new key; its callback signing secret is generated and sealed with `ring`.
pub async fn create(
    client: &Client,
    name: &str,
    callback_url: Option<&str>,
    ring: Option<&KeyRing>,
) -> Result<Created, DbError> {
    if callback_url.is_some() && ring.is_none() {
        return Err(DbError::Refused(
            "HERMES_SECRET_KEYS is not set: it seals the secret callbacks are signed with".into(),
        ));
    }
    let key = generate();
    let id = ApiKeyId::new();
    let prefix = key[..7].to_string();
    let callback_secret = ring.map(|_| generate_secret());
    let sealed = ring
        .zip(callback_secret.as_deref())
        .map(|(r, s)| r.seal(s.as_bytes()));
    let row = client
        .query_one(
            "INSERT INTO api_keys (id, name, key_hash, key_prefix, callback_url, callback_secret_enc)
             VALUES ($1, $2, $3, $4, $5, $6)
             RETURNING created_at",
            &[&id, &name, &hash(&key), &prefix, &callback_url, &sealed],
        )
        .await?;
    let record = ApiKey {
        id,
        name: name.to_string(),
        prefix,
        callback_url: callback_url.map(str::to_string),
        created_at: row.get(0),
        revoked: false,
        callback_secret_sealed: sealed,
        scopes: vec![KeyScope::Messages],
        limits: KeyLimits::default(),
        agent_id: None,
        toolsets: Vec::new(),
    };
    Ok(Created {
        key: record,
        secret_key: key,
        callback_secret,
    })
}

/// Give a live key a new callback signing secret (sealed with `ring`) and return it, to
/// show once; the old one stops signing at once. `None` when no live key has that id.
pub async fn rotate_secret(
    client: &Client,
    id: ApiKeyId,
    ring: &KeyRing,
) -> Result<Option<String>, DbError> {
    let secret = generate_secret();
    let n = client
        .execute(
            "UPDATE api_keys SET callback_secret_enc = $2 WHERE id = $1 AND revoked_at IS NULL",
            &[&id, &ring.seal(secret.as_bytes())],
        )
        .await?;
    Ok((n == 1).then_some(secret))
}

const COLUMNS: &str =
    "id, name, key_prefix, callback_url, created_at, revoked_at, callback_secret_enc,
     scopes, requests_per_minute, daily_tokens, monthly_tokens, daily_micro_usd, monthly_micro_usd,
     agent_id, toolsets";

/// A non-negative amount column as `u64`.
fn amount(r: &tokio_postgres::Row, i: usize) -> Option<u64> {
    r.get::<_, Option<i64>>(i)
        .and_then(|n| u64::try_from(n).ok())
}

fn to_i64(n: Option<u64>) -> Result<Option<i64>, DbError> {
    n.map(|n| i64::try_from(n).map_err(|_| DbError::Invalid(format!("{n} is out of range"))))
        .transpose()
}

/// Set the surfaces a key may call (at least one). False when no key has that id.
pub async fn set_scopes(
    client: &Client,
    id: ApiKeyId,
    scopes: &[KeyScope],
) -> Result<bool, DbError> {
    if scopes.is_empty() {
        return Err(DbError::Refused("a key needs at least one scope".into()));
    }
    let names: Vec<&str> = scopes.iter().map(|s| s.as_str()).collect();
    let n = client
        .execute(
            "UPDATE api_keys SET scopes = $2 WHERE id = $1",
            &[&id, &names],
        )
        .await?;
    Ok(n == 1)
}

/// Link a key to the agent it speaks for on the MCP surface (docs/agents.md, "The agent's
/// side"). False when no key has that id.
pub async fn set_agent(client: &Client, id: ApiKeyId, agent: AgentId) -> Result<bool, DbError> {
    let n = client
        .execute(
            "UPDATE api_keys SET agent_id = $2 WHERE id = $1",
            &[&id, &agent],
        )
        .await?;
    Ok(n == 1)
}

/// Grant a key the local-host toolsets (or tools) its API and job runs may be offered,
/// replacing what it had (empty: none). False when no key has that id.
pub async fn set_toolsets(
    client: &Client,
    id: ApiKeyId,
    toolsets: &[String],
) -> Result<bool, DbError> {
    let n = client
        .execute(
            "UPDATE api_keys SET toolsets = $2 WHERE id = $1",
            &[&id, &toolsets],
        )
        .await?;
    Ok(n == 1)
}

/// The local-host toolsets (or tools) key `id` was granted (`None`: no such key).
pub async fn toolsets_of(
    client: &impl crate::GenericClient,
    id: ApiKeyId,
) -> Result<Option<Vec<String>>, DbError> {
    Ok(client
        .query_opt(
            &crate::stmt(client, "SELECT toolsets FROM api_keys WHERE id = $1").await?,
            &[&id],
        )
        .await?
        .map(|r| r.get(0)))
}

/// Replace a key's rate and budgets. False when no key has that id.
pub async fn set_limits(client: &Client, id: ApiKeyId, l: &KeyLimits) -> Result<bool, DbError> {
    let rate = l
        .requests_per_minute
        .map(|r| i32::try_from(r).map_err(|_| DbError::Invalid(format!("{r} is out of range"))))
        .transpose()?;
    let n = client
        .execute(
            "UPDATE api_keys SET requests_per_minute = $2, daily_tokens = $3, monthly_tokens = $4,
                daily_micro_usd = $5, monthly_micro_usd = $6 WHERE id = $1",
            &[
                &id,
                &rate,
                &to_i64(l.daily_tokens)?,
                &to_i64(l.monthly_tokens)?,
                &to_i64(l.daily_micro_usd)?,
                &to_i64(l.monthly_micro_usd)?,
            ],
        )
        .await?;
    Ok(n == 1)
}

fn from_row(r: &tokio_postgres::Row) -> ApiKey {
    ApiKey {
        id: r.get(0),
        name: r.get(1),
        prefix: r.get(2),
        callback_url: r.get(3),
        created_at: r.get(4),
        revoked: r
            .get::<_, Option<chrono::DateTime<chrono::Utc>>>(5)
            .is_some(),
        callback_secret_sealed: r.get(6),
        scopes: r
            .get::<_, Vec<String>>(7)
            .iter()
            .filter_map(|s| KeyScope::parse(s))
            .collect(),
        limits: KeyLimits {
            requests_per_minute: r
                .get::<_, Option<i32>>(8)
                .and_then(|n| u32::try_from(n).ok()),
            daily_tokens: amount(r, 9),
            monthly_tokens: amount(r, 10),
            daily_micro_usd: amount(r, 11),
            monthly_micro_usd: amount(r, 12),
        },
        agent_id: r.get(13),
        toolsets: r.get(14),
    }
}

/// The live key whose hash matches `key`.
pub async fn find(client: &Client, key: &str) -> Result<Option<ApiKey>, DbError> {
    let row = client
        .query_opt(
            &format!("SELECT {COLUMNS} FROM api_keys WHERE key_hash = $1 AND revoked_at IS NULL"),
            &[&hash(key)],
        )
        .await?;
    Ok(row.as_ref().map(from_row))
}

/// A key by id, live or revoked.
pub async fn get(client: &Client, id: ApiKeyId) -> Result<Option<ApiKey>, DbError> {
    let row = client
        .query_opt(
            &format!("SELECT {COLUMNS} FROM api_keys WHERE id = $1"),
            &[&id],
        )
        .await?;
    Ok(row.as_ref().map(from_row))
}

pub async fn list(client: &Client) -> Result<Vec<ApiKey>, DbError> {
    let rows = client
        .query(
            &format!("SELECT {COLUMNS} FROM api_keys ORDER BY created_at"),
            &[],
        )
        .await?;
    Ok(rows.iter().map(from_row).collect())
}

/// What a run's REST callback is made of, besides its outcome.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CallbackOf {
    /// The sealed signing secret of the key that sent the run (`None`: it has none).
    pub sealed_secret: Option<String>,
    /// The caller's own `message_id` of the message, echoed back so it can match the answer
    /// without keeping run ids (what proxy mode relies on, docs/api.md "Proxy mode").
    pub message_id: Option<String>,
}

/// [`CallbackOf`] run `run` (the default when there is no such run, or no key). Read at
/// each callback, so a rotation of the secret applies at once.
pub async fn callback_of_run(
    client: &Client,
    run: hermes_types::ids::RunId,
) -> Result<CallbackOf, DbError> {
    let row = client
        .query_opt(
            &crate::stmt(
                client,
                "SELECT k.callback_secret_enc, r.external_message_id
                 FROM agent_runs r JOIN api_keys k ON k.id = r.api_key_id
                 WHERE r.id = $1",
            )
            .await?,
            &[&run.as_uuid()],
        )
        .await?;
    Ok(row
        .map(|r| CallbackOf {
            sealed_secret: r.get(0),
            message_id: r.get(1),
        })
        .unwrap_or_default())
}

/// Revoke a key; false when no live key has that id.
pub async fn revoke(client: &Client, id: ApiKeyId) -> Result<bool, DbError> {
    let n = client
        .execute(
            "UPDATE api_keys SET revoked_at = now() WHERE id = $1 AND revoked_at IS NULL",
            &[&id],
        )
        .await?;
    Ok(n == 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_random_and_hashed() {
        let (a, b) = (generate(), generate());
        assert_ne!(a, b);
        assert!(a.starts_with("hk_") && a.len() == 43);
        assert_eq!(hash(&a).len(), 64);
        assert_ne!(hash(&a), hash(&b));
    }
}
