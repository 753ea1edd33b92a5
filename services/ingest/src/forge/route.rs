//! Where a verified wake goes: the internal agent of its profile key, in the workspace the
//! Forge named when this install has one of that slug, else in `HERMES_FORGE_WORKSPACE`
//! (Forge workspaces and Hermes workspaces are separate namespaces; an install serving one
//! Forge usually routes everything to one workspace). An unknown key is a 404 and an
//! external agent's key a 409: Hermes answers wakes only for agents it runs itself.

use axum::http::StatusCode;
use hermes_db::agents::{self, Agent};
use hermes_db::{Client, workspaces};
use hermes_runtime::http::{ApiError, ApiErrorCode};
use hermes_types::agent::AgentKind;

fn unavailable(e: impl std::fmt::Display) -> ApiError {
    tracing::warn!(error = %e, "cannot read the agent of a Forge wake");
    ApiError::unavailable("cannot look up the agent right now; retry shortly")
}

/// The slug of the workspace a wake routes into.
async fn workspace_of(
    client: &Client,
    named: Option<&str>,
    fallback: &str,
) -> Result<String, ApiError> {
    if let Some(slug) = named
        && workspaces::id_by_slug(client, slug)
            .await
            .map_err(unavailable)?
            .is_some()
    {
        return Ok(slug.to_string());
    }
    Ok(fallback.to_string())
}

/// The internal agent `profile_key` names, or the refusal to answer.
pub async fn internal_agent(
    client: &Client,
    workspace: Option<&str>,
    fallback: &str,
    profile_key: &str,
) -> Result<Agent, ApiError> {
    let slug = workspace_of(client, workspace, fallback).await?;
    let agent = agents::by_key(client, &slug, profile_key)
        .await
        .map_err(unavailable)?
        .ok_or_else(|| {
            ApiError::new(
                StatusCode::NOT_FOUND,
                ApiErrorCode::UnknownAgent,
                format!("no agent has the profile key {profile_key:?} in the workspace {slug:?}"),
            )
        })?;
    if agent.kind == AgentKind::External {
        return Err(ApiError::new(
            StatusCode::CONFLICT,
            ApiErrorCode::ExternalAgent,
            format!(
                "{profile_key:?} is an external agent of this Hermes (woken by webhook itself); Forge wakes are answered only by internal agents"
            ),
        ));
    }
    Ok(agent)
}
