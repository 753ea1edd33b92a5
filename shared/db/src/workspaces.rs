//! Workspaces and their provider secrets (docs/models-and-budgets.md): a workspace value of a provider key
//! overrides the global one, an empty value clears it. Values are stored as Fernet tokens
//! under HERMES_SECRET_KEYS and only ever decrypted by the llm stage.

use hermes_types::ids::WorkspaceId;

use super::{DbError, GenericClient};
use hermes_config::WorkspaceSecrets;
use hermes_net::keyring::KeyRing;

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

/// A workspace's secrets, decrypted. A token no key opens is an error naming the secret,
/// never a silent fallback to the global key.
pub async fn provider_secrets(
    client: &impl GenericClient,
    workspace: WorkspaceId,
    keys: Option<&KeyRing>,
) -> Result<WorkspaceSecrets, DbError> {
    let rows = client
        .query(
            "SELECT name, value_enc FROM workspace_secrets WHERE workspace_id = $1",
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
                    "workspace secret {name} cannot be decrypted with HERMES_SECRET_KEYS"
                ))
            })?;
            String::from_utf8(plain)
                .map_err(|_| DbError::Invalid(format!("workspace secret {name} is not text")))?
        };
        out.insert(name, value);
    }
    Ok(out)
}
