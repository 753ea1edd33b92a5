//! The API's routes, mounted through one list ([`Surface`]) that remembers each route it
//! mounts, and `GET /v1/capabilities`, whose feature flags are read from that list: a flag
//! is true only when the route that serves it is mounted (docs/api.md, capabilities).

use std::borrow::Cow;
use std::sync::Arc;

use axum::Json;
use axum::Router;
use axum::extract::State;
use axum::handler::Handler;
use axum::routing::{MethodFilter, on};
use serde_json::{Map, Value, json};

use crate::AppState;

/// An HTTP method of the API.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verb {
    Get,
    Post,
    Put,
    Patch,
    Delete,
}

impl Verb {
    pub fn as_str(self) -> &'static str {
        match self {
            Verb::Get => "GET",
            Verb::Post => "POST",
            Verb::Put => "PUT",
            Verb::Patch => "PATCH",
            Verb::Delete => "DELETE",
        }
    }

    fn filter(self) -> MethodFilter {
        match self {
            Verb::Get => MethodFilter::GET,
            Verb::Post => MethodFilter::POST,
            Verb::Put => MethodFilter::PUT,
            Verb::Patch => MethodFilter::PATCH,
            Verb::Delete => MethodFilter::DELETE,
        }
    }
}

/// One mounted route. Its path is a literal, or configured (`HERMES_FORGE_PATH`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Mounted {
    pub verb: Verb,
    pub path: Cow<'static, str>,
}

impl Mounted {
    /// Does this route serve `verb path`? Path parameters match whatever they are named.
    fn serves(&self, verb: Verb, path: &str) -> bool {
        self.verb == verb && shape(&self.path) == shape(path)
    }
}

/// A path with each `{parameter}` reduced to `{}`.
fn shape(path: &str) -> String {
    path.split('/')
        .map(|seg| if seg.starts_with('{') { "{}" } else { seg })
        .collect::<Vec<_>>()
        .join("/")
}

/// The capability flags of the seed, each with the route that serves it. Reading a flag
/// from the mounted routes is what keeps it from claiming a route that is not there.
pub const FEATURES: &[(&str, Verb, &str)] = &[
    ("chat_completions", Verb::Post, "/v1/chat/completions"),
    ("models", Verb::Get, "/v1/models"),
    ("responses_api", Verb::Post, "/v1/responses"),
    ("run_submission", Verb::Post, "/v1/runs"),
    ("run_status", Verb::Get, "/v1/runs/{id}"),
    ("run_events_sse", Verb::Get, "/v1/runs/{id}/events"),
    ("run_stop", Verb::Post, "/v1/runs/{id}/stop"),
    ("jobs", Verb::Get, "/api/jobs"),
    ("health_detailed", Verb::Get, "/health/detailed"),
];

/// A router that remembers the routes it mounts.
#[derive(Default)]
pub struct Surface {
    router: Router<AppState>,
    mounted: Vec<Mounted>,
}

impl Surface {
    /// Mount `handler` for `verb path` (a path may take several verbs).
    pub fn route<H, T>(mut self, verb: Verb, path: impl Into<Cow<'static, str>>, handler: H) -> Self
    where
        H: Handler<T, AppState>,
        T: 'static,
    {
        let path = path.into();
        self.router = self.router.route(&path, on(verb.filter(), handler));
        self.mounted.push(Mounted { verb, path });
        self
    }

    /// The routes mounted so far.
    pub fn mounted(&self) -> &[Mounted] {
        &self.mounted
    }

    /// The router of what was mounted.
    pub fn into_router(self) -> Router<AppState> {
        self.router
    }
}

/// What `GET /v1/capabilities` answers, computed once from the mounted routes.
pub struct Capabilities {
    features: Map<String, Value>,
    routes: Vec<String>,
}

impl Capabilities {
    /// The flags of `mounted` (every API route), plus `cors` and `idempotency` (every POST
    /// of the API goes through the idempotency middleware).
    pub fn new(mounted: &[Mounted], cors: bool) -> Self {
        let mut features = Map::new();
        for (flag, verb, path) in FEATURES {
            let served = mounted.iter().any(|m| m.serves(*verb, path));
            features.insert((*flag).into(), Value::Bool(served));
        }
        features.insert("cors".into(), Value::Bool(cors));
        let posts = mounted.iter().any(|m| m.verb == Verb::Post);
        features.insert("idempotency".into(), Value::Bool(posts));
        let routes = mounted
            .iter()
            .map(|m| format!("{} {}", m.verb.as_str(), m.path))
            .collect();
        Self { features, routes }
    }

    fn document(&self, app: &AppState) -> Value {
        json!({
            "object": "hermes.api_server.capabilities",
            "platform": "hermes",
            "model": app.ctx.config.ingest.api.model_name,
            "version": env!("CARGO_PKG_VERSION"),
            // Without API_SERVER_KEY (loopback only) a call without a key is the operator's.
            "auth": {"type": "bearer", "required": app.ctx.config.ingest.api_server_key.is_some()},
            "features": self.features,
            "routes": self.routes,
        })
    }
}

/// Mount `GET /v1/capabilities` on `surface`, describing `all` (every API route, this one
/// aside).
pub fn with_capabilities(surface: Surface, all: &[Mounted], cors: bool) -> Surface {
    let caps = Arc::new(Capabilities::new(all, cors));
    surface.route(
        Verb::Get,
        "/v1/capabilities",
        move |State(app): State<AppState>| {
            let caps = caps.clone();
            async move { Json(caps.document(&app)) }
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn flags(mounted: &[Mounted]) -> Map<String, Value> {
        Capabilities::new(mounted, false).features
    }

    #[test]
    fn a_flag_is_true_only_for_a_mounted_route() {
        let mounted = [
            Mounted {
                verb: Verb::Post,
                path: "/v1/chat/completions".into(),
            },
            Mounted {
                verb: Verb::Get,
                path: "/v1/runs/{run_id}".into(),
            },
            // The right path with the wrong verb serves nothing.
            Mounted {
                verb: Verb::Get,
                path: "/v1/responses".into(),
            },
        ];
        let f = flags(&mounted);
        assert_eq!(f["chat_completions"], true);
        assert_eq!(f["run_status"], true, "parameter names do not matter");
        assert_eq!(f["responses_api"], false);
        assert_eq!(f["run_stop"], false);
        assert_eq!(f["idempotency"], true);
        assert_eq!(f["cors"], false);
        assert!(!flags(&[])["idempotency"].as_bool().unwrap());
        for (flag, _, _) in FEATURES {
            assert!(f.contains_key(*flag), "{flag}");
        }
    }

    #[test]
    fn shapes_ignore_parameter_names_only() {
        assert_eq!(
            shape("/v1/runs/{id}/events"),
            shape("/v1/runs/{run}/events")
        );
        assert_ne!(shape("/v1/runs/{id}"), shape("/v1/runs/{id}/events"));
        assert_ne!(shape("/v1/runs"), shape("/v1/runs/{id}"));
    }
}
