//! What workspaces over HTTP add (docs/agents.md, "Workspaces over HTTP"): a workspace made
//! by `POST /workspaces` keeps the runtime, model and role it was asked for, and the
//! install's global provider secrets (`PUT /settings/secrets`) are kept sealed beside the
//! workspaces' own, which override them (`workspaces::provider_secrets` merges the two).

use hermes_net::keyring::KeyRing;
use hermes_types::ids::WorkspaceId;

use super::workspaces::{self, NewWorkspace, Workspace};
use super::{DbError, GenericClient};

/// What a workspace was made for.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Profile {
    pub runtime: Option<String>,
    /// As the caller wrote it (`provider:model`), checked where it entered.
    pub model: Option<String>,
    pub role: Option<String>,
    /// Whether its runs may delegate (docs/a2a.md, "Delegating to other workspaces").
    pub orchestrator: bool,
}

/// The slug of a workspace named `name`: its letters and digits in lower case, runs of
/// anything else as one `-`, at most 40 characters, starting with a letter (`ws-` is put
/// before a name that does not).
pub fn slug_of(name: &str) -> String {
    let mut slug = String::new();
    for c in name.trim().chars() {
        if c.is_ascii_alphanumeric() {
            slug.push(c.to_ascii_lowercase());
        } else if !slug.is_empty() && !slug.ends_with('-') {
            slug.push('-');
        }
    }
    let slug = slug.trim_end_matches('-');
    let slug = if slug.starts_with(|c: char| c.is_ascii_lowercase()) {
        slug.to_string()
    } else {
        format!("ws-{slug}")
    };
    slug.chars()
        .take(40)
        .collect::<String>()
        .trim_end_matches('-')
        .to_string()
}

/// Create the workspace `name` with its profile; a name whose slug is taken is refused.
pub async fn create(
    client: &impl GenericClient,
    name: &str,
    profile: &Profile,
) -> Result<Workspace, DbError> {
    let slug = slug_of(name);
    let made = workspaces::create(
        client,
        &NewWorkspace {
            slug: &slug,
            name: name.trim(),
            key: None,
            signing_secret_sealed: None,
            daily_tokens: None,
            daily_micro_usd: None,
            orchestrator: profile.orchestrator,
        },
    )
    .await?;
    client
        .execute(
            "UPDATE workspaces SET runtime = $2, model = $3, role = $4 WHERE id = $1",
            &[&made.id, &profile.runtime, &profile.model, &profile.role],
        )
        .await?;
    Ok(made)
}

/// A workspace and its profile, by id.
pub async fn by_id(
    client: &impl GenericClient,
    id: WorkspaceId,
) -> Result<Option<(Workspace, Profile)>, DbError> {
    let Some(row) = client
        .query_opt(
            "SELECT slug, runtime, model, role FROM workspaces WHERE id = $1",
            &[&id],
        )
        .await?
    else {
        return Ok(None);
    };
    let slug: String = row.get(0);
    Ok(workspaces::by_slug(client, &slug).await?.map(|w| {
        let profile = Profile {
            runtime: row.get(1),
            model: row.get(2),
            role: row.get(3),
            orchestrator: w.orchestrator,
        };
        (w, profile)
    }))
}

/// Set (or, with an empty value, remove) a global provider secret, sealed with `keys`.
pub async fn set_global_secret(
    client: &impl GenericClient,
    name: &str,
    value: &str,
    keys: Option<&KeyRing>,
) -> Result<(), DbError> {
    if value.trim().is_empty() {
        client
            .execute("DELETE FROM global_secrets WHERE name = $1", &[&name])
            .await?;
        return Ok(());
    }
    let keys = keys.ok_or_else(|| {
        DbError::Refused("HERMES_SECRET_KEYS is not set: it encrypts secrets at rest".into())
    })?;
    client
        .execute(
            "INSERT INTO global_secrets (name, value_enc) VALUES ($1, $2)
             ON CONFLICT (name) DO UPDATE SET value_enc = $2, updated_at = now()",
            &[&name, &keys.seal(value.trim().as_bytes())],
        )
        .await?;
    Ok(())
}

/// The names of the global provider secrets.
pub async fn global_secret_names(client: &impl GenericClient) -> Result<Vec<String>, DbError> {
    Ok(client
        .query("SELECT name FROM global_secrets ORDER BY name", &[])
        .await?
        .iter()
        .map(|r| r.get(0))
        .collect())
}

#[cfg(test)]
mod tests {
    use super::slug_of;

    #[test]
    fn a_name_becomes_a_valid_slug() {
        assert_eq!(slug_of("hermes-anthropic"), "hermes-anthropic");
        assert_eq!(slug_of("  My Team's Bot!  "), "my-team-s-bot");
        assert_eq!(slug_of("42 agents"), "ws-42-agents");
        assert_eq!(slug_of("!!!"), "ws");
        assert!(slug_of(&"x".repeat(90)).len() <= 40);
        for name in ["hermes-anthropic", "My Team's Bot!", "42 agents", "Ünïcode"] {
            assert!(super::workspaces::valid_slug(&slug_of(name)), "{name}");
        }
    }
}
