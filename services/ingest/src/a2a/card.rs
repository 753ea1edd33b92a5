//! A workspace's agent card (docs/a2a.md), `GET /workspaces/{id}/a2a/.well-known/agent-card.json`:
//! one document both protocol versions read. It lists two JSON-RPC interfaces at the
//! workspace's A2A URL in 1.0's `supportedInterfaces` (`1.0` and `0.3`), and keeps 0.3's own
//! fields beside them (`url`, `preferredTransport`, `protocolVersion`,
//! `additionalInterfaces`, `security`), which a 1.0 reader passes by and a 0.3 reader needs.
//! The URL is the one the caller reached (its `Host`, and `X-Forwarded-Proto` behind a
//! proxy that ends TLS).

use axum::http::HeaderMap;
use axum::http::header::HOST;
use hermes_db::workspace_api::Profile;
use hermes_db::workspaces::Workspace;
use serde_json::{Value, json};

use super::rpc::Version;

/// The workspace's A2A URL as the caller reached this replica.
pub fn a2a_url(headers: &HeaderMap, workspace: &Workspace) -> String {
    let host = headers
        .get(HOST)
        .and_then(|h| h.to_str().ok())
        .filter(|h| !h.is_empty() && h.chars().all(|c| c.is_ascii_graphic()))
        .unwrap_or("localhost");
    let scheme = match headers
        .get("x-forwarded-proto")
        .and_then(|h| h.to_str().ok())
    {
        Some("https") => "https",
        _ => "http",
    };
    format!("{scheme}://{host}/workspaces/{}/a2a", workspace.id)
}

/// The card of `workspace`, served at `url`.
pub fn card(workspace: &Workspace, profile: &Profile, url: &str) -> Value {
    let description = profile
        .role
        .clone()
        .unwrap_or_else(|| format!("The Hermes agent of the workspace {}.", workspace.name));
    let interface = |version: Version| json!({"url": url, "protocolBinding": "JSONRPC", "protocolVersion": version.as_str()});
    json!({
        "name": workspace.name,
        "description": description,
        "version": env!("CARGO_PKG_VERSION"),
        "provider": {"organization": "Hermes", "url": url},
        // 1.0: every interface, the preferred first.
        "supportedInterfaces": [interface(Version::V10), interface(Version::V03)],
        // 0.3: the main interface and its version.
        "url": url,
        "preferredTransport": "JSONRPC",
        "protocolVersion": "0.3.0",
        "additionalInterfaces": [{"url": url, "transport": "JSONRPC"}],
        "capabilities": {"streaming": true, "pushNotifications": false},
        "defaultInputModes": ["text/plain", "application/json"],
        "defaultOutputModes": ["text/plain"],
        "skills": [{
            "id": "answer",
            "name": "Answer",
            "description": format!(
                "Answers messages with the workspace's model{}; a contextId continues a conversation.",
                profile.model.as_deref().map(|m| format!(" ({m})")).unwrap_or_default()
            ),
            "tags": ["chat", "hermes"],
            "inputModes": ["text/plain", "application/json"],
            "outputModes": ["text/plain"],
        }],
        // An API key with the `a2a` scope, as a Bearer token (0.3's shape, which the 1.0
        // SDK maps to its own).
        "securitySchemes": {"bearer": {
            "type": "http",
            "scheme": "bearer",
            "description": "A Hermes API key with the a2a scope (hermes api-keys create --scope a2a)",
        }},
        "security": [{"bearer": []}],
    })
}

#[cfg(test)]
mod tests {
    use axum::http::HeaderValue;

    use super::*;

    fn workspace() -> Workspace {
        Workspace {
            orchestrator: false,
            id: hermes_types::ids::WorkspaceId::new(),
            slug: "axiom".into(),
            name: "Axiom".into(),
            key: "AXIOM".into(),
            key_set: false,
            signing_secret: false,
            daily_tokens: None,
            daily_micro_usd: None,
            agents: 0,
            created_at: chrono::Utc::now(),
        }
    }

    #[test]
    fn the_card_declares_both_versions_at_the_url_the_caller_reached() {
        let w = workspace();
        let mut headers = HeaderMap::new();
        headers.insert(HOST, HeaderValue::from_static("a2a.example:8080"));
        headers.insert("x-forwarded-proto", HeaderValue::from_static("https"));
        let url = a2a_url(&headers, &w);
        assert_eq!(
            url,
            format!("https://a2a.example:8080/workspaces/{}/a2a", w.id)
        );
        let c = card(&w, &Profile::default(), &url);
        let versions: Vec<&str> = c["supportedInterfaces"]
            .as_array()
            .unwrap()
            .iter()
            .map(|i| i["protocolVersion"].as_str().unwrap())
            .collect();
        assert_eq!(versions, ["1.0", "0.3"]);
        assert_eq!(c["url"], url.as_str());
        assert_eq!(c["capabilities"]["streaming"], true);
        assert_eq!(c["name"], "Axiom");
    }
}
