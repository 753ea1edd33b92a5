//! Where each hop of a call goes: the agent's pinned backend first, then the tier's logical
//! models, each on its own backend (`backend` in `[models]`) or the default provider, with
//! the keys of the request's workspace (its secrets override the global ones; an empty
//! value clears one). Workspace secrets are read from PostgreSQL and cached briefly, so a
//! change applies within [`WORKSPACE_TTL`] without a restart. A workspace whose secrets
//! cannot be read gets no hops at all: calling with the global keys instead would hand it a
//! key it may have cleared on purpose (docs/security.md, keys and tenants).

use std::sync::Arc;
use std::time::Duration;

use hermes_config::{BackendKind, Config, WorkspaceSecrets};
use hermes_db::workspaces;
use hermes_net::keyring::KeyRing;
use hermes_types::ids::WorkspaceId;
use hermes_types::model::LlmRequest;
use hermes_types::ttl_cache::TtlCache;

use crate::chain::{Hop, Unusable};

/// The provider secrets of a request (its workspace's over the install's global ones) could
/// not be read (PostgreSQL away, or a value no key of HERMES_SECRET_KEYS opens).
#[derive(Debug, thiserror::Error)]
#[error("the provider secrets of {} cannot be read: {error}", scope(.workspace))]
pub struct SecretsUnreadable {
    /// The request's workspace; `None`: the global secrets alone.
    pub workspace: Option<WorkspaceId>,
    #[source]
    pub error: hermes_db::DbError,
}
use crate::providers::{Backend, HttpClient};

/// What a request's secrets belong to, for a message.
fn scope(workspace: &Option<WorkspaceId>) -> String {
    workspace.map_or("the install".into(), |w| format!("workspace {w}"))
}

/// How long a workspace's secrets are trusted before they are read again.
pub const WORKSPACE_TTL: Duration = Duration::from_secs(30);

/// Builds the hops of calls; shared by every call of the process.
#[derive(Clone)]
pub struct Backends {
    http: HttpClient,
    config: Arc<Config>,
    db: Option<hermes_db::Db>,
    keys: Option<KeyRing>,
    /// By workspace; `None` holds the global secrets alone.
    workspaces: Arc<TtlCache<Option<WorkspaceId>, Arc<WorkspaceSecrets>>>,
}

/// Workspaces whose secrets are remembered at once.
const WORKSPACES_CACHED: usize = 10_000;

impl Backends {
    /// Backends of `config`; workspace secrets come from `db` (none: global keys only).
    pub fn new(config: Arc<Config>, db: Option<hermes_db::Db>) -> anyhow::Result<Self> {
        let keys = KeyRing::new(&config.router.secret_keys);
        Ok(Self {
            http: HttpClient::new()?,
            config,
            db,
            keys,
            workspaces: Arc::new(TtlCache::new(WORKSPACE_TTL, WORKSPACES_CACHED)),
        })
    }

    /// Refuse to start without a usable default provider (one line naming the variables).
    pub fn check(&self) -> anyhow::Result<BackendKind> {
        self.config
            .llm
            .provider
            .resolve(None)
            .map(|r| r.kind)
            .map_err(anyhow::Error::msg)
    }

    /// The backend `kind` with the workspace's key, for a health check.
    pub fn pinned(
        &self,
        kind: BackendKind,
        workspace: Option<&WorkspaceSecrets>,
    ) -> Result<Backend, String> {
        let resolved = self.config.llm.provider.pinned(kind, workspace)?;
        Ok(Backend::build(
            &self.http,
            resolved,
            &self.config.llm.provider,
        ))
    }

    /// The hops of `req`, in order; none when its workspace's secrets cannot be read.
    pub async fn hops(
        &self,
        req: &LlmRequest,
    ) -> Result<Vec<Result<Hop, Unusable>>, SecretsUnreadable> {
        let secrets = self.workspace_secrets(req.workspace).await?;
        let ws = secrets.as_deref();
        let provider = &self.config.llm.provider;
        let mut hops = Vec::with_capacity(req.chain.len() + 1);
        if let Some(o) = &req.backend {
            let label = format!("agent:{}", o.backend);
            // Priced when the pinned model is one of the model map's.
            let prices = self
                .config
                .models
                .values()
                .find(|m| m.id == o.model)
                .cloned();
            let max_tokens = prices.as_ref().map_or(1024, |p| p.max_output_tokens);
            hops.push(match provider.pinned(o.backend, ws) {
                Ok(r) => Ok(Hop {
                    label,
                    backend: Backend::build(&self.http, r, provider),
                    model_id: o.model.clone(),
                    max_tokens,
                    prices,
                }),
                Err(why) => Err(Unusable { label, why }),
            });
        }
        let default = provider.resolve(ws);
        for name in &req.chain {
            let Some(spec) = self.config.models.get(name) else {
                hops.push(Err(Unusable {
                    label: name.clone(),
                    why: "not in [models]".into(),
                }));
                continue;
            };
            let resolved = match spec.backend {
                Some(kind) => provider.pinned(kind, ws),
                None => default.clone(),
            };
            hops.push(match resolved {
                Ok(r) => {
                    let pinned = spec.backend.is_some();
                    let model_id = match (&provider.model_override, r.kind) {
                        (_, BackendKind::Mock) => "mock".to_string(),
                        (Some(m), _) if !pinned => m.clone(),
                        _ => spec.id.clone(),
                    };
                    // The mock answers for free whatever model it stands in for.
                    let prices = (r.kind != BackendKind::Mock).then(|| spec.clone());
                    Ok(Hop {
                        label: name.clone(),
                        backend: Backend::build(&self.http, r, provider),
                        model_id,
                        max_tokens: spec.max_output_tokens,
                        prices,
                    })
                }
                Err(why) => Err(Unusable {
                    label: name.clone(),
                    why,
                }),
            });
        }
        Ok(hops)
    }

    /// The provider secrets of workspace `ws` over the install's global ones, or the global
    /// ones alone (cached; `None` without a database, where only the environment's keys
    /// exist). An unreadable store is an error, never the environment's keys.
    async fn workspace_secrets(
        &self,
        ws: Option<WorkspaceId>,
    ) -> Result<Option<Arc<WorkspaceSecrets>>, SecretsUnreadable> {
        if let Some(s) = self.workspaces.get(&ws) {
            return Ok(Some(s));
        }
        let Some(db) = self.db.as_ref() else {
            return Ok(None);
        };
        let loaded = async {
            let client = db.get().await?;
            workspaces::provider_secrets(&client, ws, self.keys.as_ref()).await
        }
        .await;
        match loaded {
            Ok(s) => {
                let s = Arc::new(s);
                self.workspaces.insert(ws, s.clone());
                Ok(Some(s))
            }
            Err(error) => {
                tracing::warn!(workspace = ?ws, %error, "provider secrets unreadable; the call is not made");
                Err(SecretsUnreadable {
                    workspace: ws,
                    error,
                })
            }
        }
    }
}
