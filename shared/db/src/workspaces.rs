//! Workspaces (docs/agents.md, "Workspaces"): created, listed, shown and changed by
//! `hermes workspaces`, each with its slug, its contract key, its synthetic signing secret and
//! the daily budget of its Forge runs; and their provider secrets
//! (docs/models-and-budgets.md): a workspace value of a provider key overrides the global one,
//! an empty value clears it. Values are stored as Fernet tokens under HERMES_SECRET_KEYS and
//! only ever decrypted by the llm stage.

use hermes_types::ids::WorkspaceId;

use super::{DbError, GenericClient};
use hermes_config::WorkspaceSecrets;
use hermes_net::keyring::KeyRing;

/// Longest workspace key derived from a slug.
const DERIVED_KEY_CHARS: usize = 10;

/// The key a workspace without one of its own goes by (the contract's `workspace.key`, the
/// prefix of issue keys): its slug's letters and digits in upper case (`axiom` → `AXIOM`),
/// at most ten; `WS` if none.
pub fn derived_key(slug: &str) -> String {
    let key: String = slug
        .chars()
        .filter(char::is_ascii_alphanumeric)
        .take(DERIVED_KEY_CHARS)
        .map(|c| c.to_ascii_uppercase())
        .collect();
    if key.is_empty() { "WS".into() } else { key }
}

/// Whether `slug` may name a workspace: 1 to 40 lower-case letters, digits, `-` or `_`,
/// starting with a letter.
pub fn valid_slug(slug: &str) -> bool {
    slug.len() <= 40
        && slug.starts_with(|c: char| c.is_ascii_lowercase())
        && slug
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '_')
}

/// Whether `key` may be a workspace's key: an upper-case letter, then up to nine upper-case
/// letters or digits (as migration 0027 checks).
pub fn valid_key(key: &str) -> bool {
    key.len() <= DERIVED_KEY_CHARS
        && key.starts_with(|c: char| c.is_ascii_uppercase())
        && key
            .chars()
            .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit())
}

/// One workspace as `hermes workspaces` shows it (never a secret).
#[derive(Clone, Debug, serde::Serialize)]
pub struct Workspace {
    pub id: WorkspaceId,
    pub slug: String,
    pub name: String,
    /// The contract's `workspace.key`: its own, else derived from the slug.
    pub key: String,
    /// Whether the key is its own (`--key`) rather than derived.
    pub key_set: bool,
    /// Whether it has a synthetic signing secret.
    pub signing_secret: bool,
    /// Tokens its Forge runs may use per UTC day (None: the install's; 0: no limit).
    pub daily_tokens: Option<i64>,
    /// Micro-dollars its Forge runs may spend per UTC day (None: the install's; 0: no limit).
    pub daily_micro_usd: Option<i64>,
    /// Whether its runs may delegate to other workspaces' agents with
    /// `delegate_task_async` (docs/a2a.md, "Delegating to other workspaces").
    pub orchestrator: bool,
    /// Its agents.
    pub agents: i64,
    pub created_at: chrono::DateTime<chrono::Utc>,
}

const WORKSPACE_COLUMNS: &str = "w.id, w.slug, w.name, w.key, w.webhook_secret_enc IS NOT NULL,     w.daily_tokens, w.daily_micro_usd,     (SELECT count(*) FROM agents a WHERE a.workspace_id = w.id), w.created_at, w.orchestrator";

fn workspace_from(r: &tokio_postgres::Row) -> Workspace {
    let slug: String = r.get(1);
    let own: Option<String> = r.get(3);
    Workspace {
        id: r.get(0),
        key: own.clone().unwrap_or_else(|| derived_key(&slug)),
        key_set: own.is_some(),
        slug,
        name: r.get(2),
        signing_secret: r.get(4),
        daily_tokens: r.get(5),
        daily_micro_usd: r.get(6),
        agents: r.get(7),
        created_at: r.get(8),
        orchestrator: r.get(9),
    }
}

/// A workspace to create.
pub struct NewWorkspace<'a> {
    pub slug: &'a str,
    pub name: &'a str,
    /// Its own key (None: derived from the slug).
    pub key: Option<&'a str>,
    /// Its synthetic signing secret, already sealed.
    pub signing_secret_sealed: Option<&'a str>,
    pub daily_tokens: Option<i64>,
    pub daily_micro_usd: Option<i64>,
    /// Whether its runs may delegate ([`Workspace::orchestrator`]).
    pub orchestrator: bool,
}

/// Create a workspace; a slug or key already taken is refused.
pub async fn create(
    client: &impl GenericClient,
    w: &NewWorkspace<'_>,
) -> Result<Workspace, DbError> {
    let taken = client
        .query_opt(
            "SELECT slug FROM workspaces WHERE slug = $1 OR key = $2",
            &[&w.slug, &w.key],
        )
        .await?;
    if let Some(row) = taken {
        let slug: String = row.get(0);
        return Err(DbError::Refused(if slug == w.slug {
            format!("a workspace {slug:?} already exists")
        } else {
            format!(
                "workspace {slug:?} has the key {:?} already",
                w.key.unwrap_or_default()
            )
        }));
    }
    client
        .execute(
            "INSERT INTO workspaces (slug, name, key, webhook_secret_enc, daily_tokens,
                                     daily_micro_usd, orchestrator)
             VALUES ($1, $2, $3, $4, $5, $6, $7)",
            &[
                &w.slug,
                &w.name,
                &w.key,
                &w.signing_secret_sealed,
                &w.daily_tokens,
                &w.daily_micro_usd,
                &w.orchestrator,
            ],
        )
        .await?;
    by_slug(client, w.slug)
        .await?
        .ok_or_else(|| DbError::NotFound("workspace vanished after insert".into()))
}

/// Every workspace, by slug.
pub async fn list(client: &impl GenericClient) -> Result<Vec<Workspace>, DbError> {
    Ok(client
        .query(
            &format!("SELECT {WORKSPACE_COLUMNS} FROM workspaces w ORDER BY w.slug"),
            &[],
        )
        .await?
        .iter()
        .map(workspace_from)
        .collect())
}

/// The workspace with `slug`.
pub async fn by_slug(
    client: &impl GenericClient,
    slug: &str,
) -> Result<Option<Workspace>, DbError> {
    Ok(client
        .query_opt(
            &format!("SELECT {WORKSPACE_COLUMNS} FROM workspaces w WHERE w.slug = $1"),
            &[&slug],
        )
        .await?
        .map(|r| workspace_from(&r)))
}

/// Changes `hermes workspaces set` can make; `None` leaves a field alone, `Some(None)`
/// returns it to the install's (or the derived) value.
#[derive(Default)]
pub struct WorkspaceUpdate<'a> {
    pub name: Option<&'a str>,
    pub key: Option<Option<&'a str>>,
    pub daily_tokens: Option<Option<i64>>,
    pub daily_micro_usd: Option<Option<i64>>,
    pub orchestrator: Option<bool>,
}

/// Apply `u` to the workspace; a key taken by another is refused.
pub async fn update(
    client: &impl GenericClient,
    id: WorkspaceId,
    u: &WorkspaceUpdate<'_>,
) -> Result<(), DbError> {
    if let Some(Some(key)) = u.key {
        let taken = client
            .query_opt(
                "SELECT slug FROM workspaces WHERE key = $1 AND id <> $2",
                &[&key, &id],
            )
            .await?;
        if let Some(row) = taken {
            return Err(DbError::Refused(format!(
                "workspace {:?} has the key {key:?} already",
                row.get::<_, String>(0)
            )));
        }
    }
    client
        .execute(
            "UPDATE workspaces SET name = COALESCE($2, name),
                 key = CASE WHEN $3 THEN $4 ELSE key END,
                 daily_tokens = CASE WHEN $5 THEN $6 ELSE daily_tokens END,
                 daily_micro_usd = CASE WHEN $7 THEN $8 ELSE daily_micro_usd END,
                 orchestrator = COALESCE($9, orchestrator)
             WHERE id = $1",
            &[
                &id,
                &u.name,
                &u.key.is_some(),
                &u.key.flatten(),
                &u.daily_tokens.is_some(),
                &u.daily_tokens.flatten(),
                &u.daily_micro_usd.is_some(),
                &u.daily_micro_usd.flatten(),
                &u.orchestrator,
            ],
        )
        .await?;
    Ok(())
}

/// The id of the workspace with `slug`.
pub async fn id_by_slug(
    client: &impl GenericClient,
    slug: &str,
) -> Result<Option<WorkspaceId>, DbError> {
    Ok(client
        .query_opt("SELECT id FROM workspaces WHERE slug = $1", &[&slug])
        .await?
        .map(|r| r.get(0)))
}

/// Whether the workspace has a synthetic signing secret (what wakes of its agents without a
/// secret of their own are signed with, docs/agents.md, "Signed agent webhooks").
pub async fn has_signing_secret(
    client: &impl GenericClient,
    workspace: WorkspaceId,
) -> Result<bool, DbError> {
    Ok(client
        .query_opt(
            "SELECT 1 FROM workspaces WHERE id = $1 AND webhook_secret_enc IS NOT NULL",
            &[&workspace],
        )
        .await?
        .is_some())
}

/// Store `sealed` (a Fernet token) as the workspace's synthetic signing secret: only when it
/// has none, unless `replace`. True if stored.
pub async fn set_signing_secret(
    client: &impl GenericClient,
    workspace: WorkspaceId,
    sealed: &str,
    replace: bool,
) -> Result<bool, DbError> {
    Ok(client
        .execute(
            "UPDATE workspaces SET webhook_secret_enc = $2
             WHERE id = $1 AND ($3 OR webhook_secret_enc IS NULL)",
            &[&workspace, &sealed, &replace],
        )
        .await?
        == 1)
}

/// Set (or, with an empty value, clear) one secret of a workspace. A value is sealed with
/// `keys`; clearing stores no secret, so it needs none.
pub async fn set_secret(
    client: &impl GenericClient,
    workspace: WorkspaceId,
    name: &str,
    value: &str,
    keys: Option<&KeyRing>,
) -> Result<(), DbError> {
    let stored = match (value.trim(), keys) {
        ("", _) => String::new(),
        (v, Some(keys)) => keys.seal(v.as_bytes()),
        (_, None) => {
            return Err(DbError::Refused(
                "HERMES_SECRET_KEYS is not set: it encrypts workspace secrets at rest".into(),
            ));
        }
    };
    client
        .execute(
            "INSERT INTO workspace_secrets (workspace_id, name, value_enc) VALUES ($1, $2, $3) \
             ON CONFLICT (workspace_id, name) DO UPDATE SET value_enc = $3, updated_at = now()",
            &[&workspace, &name, &stored],
        )
        .await?;
    Ok(())
}

/// Remove a secret: the global value applies again. True if there was one.
pub async fn unset_secret(
    client: &impl GenericClient,
    workspace: WorkspaceId,
    name: &str,
) -> Result<bool, DbError> {
    Ok(client
        .execute(
            "DELETE FROM workspace_secrets WHERE workspace_id = $1 AND name = $2",
            &[&workspace, &name],
        )
        .await?
        == 1)
}

/// Names of a workspace's secrets and whether each clears (empty) or overrides.
pub async fn secret_names(
    client: &impl GenericClient,
    workspace: WorkspaceId,
) -> Result<Vec<(String, bool)>, DbError> {
    Ok(client
        .query(
            "SELECT name, value_enc = '' FROM workspace_secrets WHERE workspace_id = $1 ORDER BY name",
            &[&workspace],
        )
        .await?
        .iter()
        .map(|r| (r.get(0), r.get(1)))
        .collect())
}

/// A workspace's secrets over the install's global ones (`global_secrets`), decrypted; the
/// global ones alone without a workspace. A token no key opens is an error naming the
/// secret, never a silent fallback to the environment's key.
pub async fn provider_secrets(
    client: &impl GenericClient,
    workspace: Option<WorkspaceId>,
    keys: Option<&KeyRing>,
) -> Result<WorkspaceSecrets, DbError> {
    // The install's global secrets first, then the workspace's own over them (an empty
    // workspace value clears a global one); without a workspace, the global ones alone.
    let rows = client
        .query(
            "SELECT name, value_enc FROM global_secrets
              WHERE name NOT IN (SELECT name FROM workspace_secrets WHERE workspace_id = $1)
             UNION ALL
             SELECT name, value_enc FROM workspace_secrets WHERE workspace_id = $1",
            &[&workspace],
        )
        .await?;
    let mut out = WorkspaceSecrets::new();
    for r in rows {
        let name: String = r.get(0);
        let token: String = r.get(1);
        let value = if token.is_empty() {
            String::new()
        } else {
            let plain = keys.and_then(|k| k.open(&token)).ok_or_else(|| {
                DbError::Refused(format!(
                    "provider secret {name} cannot be decrypted with HERMES_SECRET_KEYS"
                ))
            })?;
            String::from_utf8(plain)
                .map_err(|_| DbError::Invalid(format!("provider secret {name} is not text")))?
        };
        out.insert(name, value);
    }
    Ok(out)
}

/// Whether workspace `id` is an orchestrator (false when there is no such workspace).
pub async fn is_orchestrator(
    client: &impl GenericClient,
    id: WorkspaceId,
) -> Result<bool, DbError> {
    Ok(client
        .query_opt(
            &crate::stmt(client, "SELECT orchestrator FROM workspaces WHERE id = $1").await?,
            &[&id],
        )
        .await?
        .is_some_and(|r| r.get(0)))
}
