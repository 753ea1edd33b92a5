//! Workspaces over HTTP (docs/agents.md, "Workspaces over HTTP"), as the multi-provider
//! document writes them: `POST /workspaces {name, role, runtime, model}`, `GET
//! /workspaces/{id}` (its `status`: `provisioning` until the provider of its model has a
//! key, then `ready`), `PUT /settings/secrets` (the install's global provider keys) and
//! `PUT /workspaces/{id}/secrets` (the workspace's own, where an empty value clears the
//! global key for that workspace). Only the operator key or a key with the `operator` scope
//! reaches them. Secrets are sealed with HERMES_SECRET_KEYS and never echoed; ingest never
//! opens them: a workspace's status is read from which keys are present.

use axum::Json;
use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use hermes_config::WorkspaceSecrets;
use hermes_db::workspace_api::{self, Profile};
use hermes_db::{DbError, GenericClient, workspaces};
use hermes_net::keyring::KeyRing;
use hermes_runtime::http::{ApiError, ApiErrorCode};
use hermes_types::ids::WorkspaceId;
use hermes_types::model_ref::ModelRef;
use serde::Deserialize;
use serde_json::{Value, json};

use crate::{AppState, api_body};

/// The one runtime a workspace here runs: Hermes's own agent loop.
const RUNTIME: &str = "hermes";
/// Longest workspace name, role and secret value accepted.
const MAX_NAME_CHARS: usize = 100;
const MAX_ROLE_CHARS: usize = 2_000;
const MAX_SECRET_BYTES: usize = 8 * 1024;

type Answer = Result<Response, ApiError>;

/// `POST /workspaces`'s body.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct NewWorkspace {
    name: String,
    #[serde(default)]
    role: Option<String>,
    #[serde(default)]
    runtime: Option<String>,
    #[serde(default)]
    model: Option<String>,
    /// Whether its runs may delegate to other workspaces (docs/a2a.md).
    #[serde(default)]
    orchestrator: bool,
}

/// A `PUT …/secrets` body: one secret.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Secret {
    key: String,
    value: String,
}

fn bad(message: impl Into<String>) -> ApiError {
    ApiError::bad_request(ApiErrorCode::InvalidRequest, message)
}

fn not_found() -> ApiError {
    ApiError::new(
        StatusCode::NOT_FOUND,
        ApiErrorCode::NotFound,
        "no such workspace",
    )
}

fn unavailable<E>(_: E) -> ApiError {
    ApiError::unavailable("cannot reach the workspace store right now")
}

/// A JSON body of type `T`, within the API's body limit.
fn parse<T: for<'de> Deserialize<'de>>(
    app: &AppState,
    body: Result<Bytes, BytesRejection>,
) -> Result<T, ApiError> {
    let body = api_body(app.ctx.config.ingest.max_body_bytes, body)?;
    serde_json::from_slice(&body)
        .map_err(|e| ApiError::bad_request(ApiErrorCode::InvalidJson, e.to_string()))
}

/// The body's fields, checked: (name, profile).
fn checked(new: NewWorkspace) -> Result<(String, Profile), ApiError> {
    let name = new.name.trim().to_string();
    if name.is_empty() || name.chars().count() > MAX_NAME_CHARS {
        return Err(bad(format!(
            "name must be 1 to {MAX_NAME_CHARS} characters"
        )));
    }
    let role = new
        .role
        .map(|r| r.trim().to_string())
        .filter(|r| !r.is_empty());
    if role
        .as_ref()
        .is_some_and(|r| r.chars().count() > MAX_ROLE_CHARS)
    {
        return Err(bad(format!(
            "role is longer than {MAX_ROLE_CHARS} characters"
        )));
    }
    let runtime = new.runtime.unwrap_or_else(|| RUNTIME.into());
    if runtime != RUNTIME {
        return Err(bad(format!(
            "runtime {runtime:?} is not served here (runtimes: {RUNTIME})"
        )));
    }
    let model = match new.model {
        Some(m) => Some(
            m.parse::<ModelRef>()
                .map_err(|e| ApiError::bad_request(ApiErrorCode::UnknownProvider, e.to_string()))?
                .to_string(),
        ),
        None => None,
    };
    Ok((
        name,
        Profile {
            runtime: Some(runtime),
            model,
            role,
            orchestrator: new.orchestrator,
        },
    ))
}

/// A secret's name: the form every stored secret has.
fn check_key(key: &str) -> Result<(), ApiError> {
    let ok = key.len() <= 64
        && key.starts_with(|c: char| c.is_ascii_uppercase())
        && key
            .chars()
            .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_');
    if !ok {
        return Err(bad(
            "key must be an upper-case name of letters, digits and _ (at most 64), e.g. ANTHROPIC_API_KEY",
        ));
    }
    Ok(())
}

fn check_secret(secret: &Secret) -> Result<(), ApiError> {
    check_key(&secret.key)?;
    if secret.value.len() > MAX_SECRET_BYTES {
        return Err(bad(format!(
            "value is longer than {MAX_SECRET_BYTES} bytes"
        )));
    }
    Ok(())
}

/// A refusal of the store (a taken name, no HERMES_SECRET_KEYS) as the caller's 4xx.
fn refused(e: DbError) -> ApiError {
    match e {
        DbError::Refused(why) => {
            ApiError::new(StatusCode::CONFLICT, ApiErrorCode::InvalidRequest, why)
        }
        other => unavailable(other),
    }
}

/// The workspace's status and, while `provisioning`, the key it waits for: the provider of
/// its model (else the default provider) needs a key, from the workspace, the install's
/// global secrets or the environment, and an empty workspace value clears a global one.
async fn status(
    app: &AppState,
    client: &impl GenericClient,
    id: WorkspaceId,
    model: Option<&str>,
) -> Result<(&'static str, Option<String>), DbError> {
    let mut present = WorkspaceSecrets::new();
    for name in workspace_api::global_secret_names(client).await? {
        present.insert(name, "set".into());
    }
    for (name, cleared) in workspaces::secret_names(client, id).await? {
        present.insert(name, if cleared { String::new() } else { "set".into() });
    }
    let provider = &app.ctx.config.llm.provider;
    let resolved = match model.and_then(|m| m.parse::<ModelRef>().ok()) {
        Some(r) => provider
            .pinned(r.provider, Some(&present))
            .map_err(|_| r.provider.key_var().unwrap_or_default().to_string()),
        None => provider
            .resolve(Some(&present))
            .map_err(|_| "a provider key".to_string()),
    };
    Ok(match resolved {
        Ok(_) => ("ready", None),
        Err(waiting) => ("provisioning", Some(waiting)),
    })
}

/// A workspace as the API shows it (never a secret).
async fn view(app: &AppState, client: &impl GenericClient, id: WorkspaceId) -> Answer {
    let (w, profile) = workspace_api::by_id(client, id)
        .await
        .map_err(unavailable)?
        .ok_or_else(not_found)?;
    let (status, waiting) = status(app, client, id, profile.model.as_deref())
        .await
        .map_err(unavailable)?;
    let secrets: Vec<Value> = workspaces::secret_names(client, id)
        .await
        .map_err(unavailable)?
        .into_iter()
        .map(|(key, cleared)| json!({"key": key, "cleared": cleared}))
        .collect();
    Ok(Json(json!({
        "id": w.id.to_string(),
        "name": w.name,
        "slug": w.slug,
        "key": w.key,
        "role": profile.role,
        "runtime": profile.runtime,
        "orchestrator": profile.orchestrator,
        "model": profile.model,
        "status": status,
        "waiting_for": waiting,
        "secrets": secrets,
        "created_at": w.created_at,
    }))
    .into_response())
}

fn respond(answer: Answer) -> Response {
    answer.unwrap_or_else(|e| e.into_response())
}

/// `POST /workspaces`: 201 with the workspace, `provisioning` or `ready`.
pub async fn create(State(app): State<AppState>, body: Result<Bytes, BytesRejection>) -> Response {
    respond(
        async {
            let (name, profile) = checked(parse(&app, body)?)?;
            let client = app.ctx.db.get().await.map_err(unavailable)?;
            let w = workspace_api::create(&client, &name, &profile)
                .await
                .map_err(refused)?;
            tracing::info!(workspace = %w.id, slug = w.slug, "workspace created over HTTP");
            let shown = view(&app, &client, w.id).await?;
            Ok((StatusCode::CREATED, shown).into_response())
        }
        .await,
    )
}

/// `GET /workspaces/{id}`.
pub async fn get(State(app): State<AppState>, Path(id): Path<String>) -> Response {
    respond(
        async {
            let id: WorkspaceId = id.parse().map_err(|_| not_found())?;
            let client = app.ctx.db.get().await.map_err(unavailable)?;
            view(&app, &client, id).await
        }
        .await,
    )
}

/// `PUT /settings/secrets {key, value}`: set a global provider key (an empty value removes
/// it, so the environment's applies again).
pub async fn put_global(
    State(app): State<AppState>,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    respond(
        async {
            let secret: Secret = parse(&app, body)?;
            check_secret(&secret)?;
            let keys = KeyRing::new(&app.ctx.config.router.secret_keys);
            let client = app.ctx.db.get().await.map_err(unavailable)?;
            workspace_api::set_global_secret(&client, &secret.key, &secret.value, keys.as_ref())
                .await
                .map_err(refused)?;
            let set = !secret.value.trim().is_empty();
            tracing::info!(
                key = secret.key,
                set,
                "global provider secret changed over HTTP"
            );
            Ok(Json(json!({"key": secret.key, "set": set})).into_response())
        }
        .await,
    )
}

/// `PUT /workspaces/{id}/secrets {key, value}`: set a workspace's provider key; an empty
/// value clears the global key for that workspace.
pub async fn put_workspace(
    State(app): State<AppState>,
    Path(id): Path<String>,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    respond(
        async {
            let id: WorkspaceId = id.parse().map_err(|_| not_found())?;
            let secret: Secret = parse(&app, body)?;
            check_secret(&secret)?;
            let keys = KeyRing::new(&app.ctx.config.router.secret_keys);
            let client = app.ctx.db.get().await.map_err(unavailable)?;
            workspace_api::by_id(&client, id)
                .await
                .map_err(unavailable)?
                .ok_or_else(not_found)?;
            workspaces::set_secret(&client, id, &secret.key, &secret.value, keys.as_ref())
                .await
                .map_err(refused)?;
            let cleared = secret.value.trim().is_empty();
            tracing::info!(workspace = %id, key = secret.key, cleared, "workspace provider secret changed over HTTP");
            Ok(Json(json!({"workspace": id.to_string(), "key": secret.key, "cleared": cleared}))
                .into_response())
        }
        .await,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn new(name: &str, runtime: Option<&str>, model: Option<&str>) -> NewWorkspace {
        NewWorkspace {
            name: name.into(),
            role: None,
            runtime: runtime.map(Into::into),
            model: model.map(Into::into),
            orchestrator: false,
        }
    }

    #[test]
    fn a_body_is_checked_field_by_field() {
        let (name, p) = checked(new(
            " hermes-anthropic ",
            Some("hermes"),
            Some("anthropic:claude-sonnet-4-5"),
        ))
        .unwrap();
        assert_eq!(name, "hermes-anthropic");
        assert_eq!(p.model.as_deref(), Some("anthropic:claude-sonnet-4-5"));
        assert_eq!(p.runtime.as_deref(), Some("hermes"));
        assert!(checked(new("", None, None)).is_err());
        assert!(checked(new("w", Some("langgraph"), None)).is_err());
        let e = checked(new("w", None, Some("acme:model-1"))).unwrap_err();
        assert_eq!(e.code, ApiErrorCode::UnknownProvider);
        assert!(e.message.contains("anthropic"), "{}", e.message);
        assert!(
            checked(new("w", None, Some("claude-haiku"))).is_err(),
            "provider:model"
        );
    }

    #[test]
    fn a_secret_key_is_an_upper_case_name() {
        assert!(check_key("ANTHROPIC_API_KEY").is_ok());
        for bad in ["", "anthropic", "1KEY", "A-B", &"K".repeat(65)] {
            assert!(check_key(bad).is_err(), "{bad}");
        }
    }
}
