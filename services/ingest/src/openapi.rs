//! The OpenAPI 3.1 document of the fleet's whole HTTP surface, served at `/openapi.json`.
//!
//! The document is kept as one JSON fragment per area in `services/ingest/openapi/` (the
//! base with the shared components, then chat, REST, channels, health, admin, …), so each
//! area's routes and schemas sit together and are edited with the code that serves them.
//! They are merged once, at first use; two fragments that both describe the same operation
//! or the same component are a mistake the unit tests catch. The end-to-end test
//! `openapi::the_document_names_every_route_and_every_route_answers` keeps it true: every
//! route ingest mounts is in it, and every operation in it is served (docs/api.md).

use std::sync::LazyLock;

use axum::http::header::CONTENT_TYPE;
use axum::response::{IntoResponse, Response};
use serde_json::{Map, Value};

/// The fragments, base first: `(file name, contents)`.
const FRAGMENTS: &[(&str, &str)] = &[
    ("base.json", include_str!("../openapi/base.json")),
    ("health.json", include_str!("../openapi/health.json")),
    ("chat.json", include_str!("../openapi/chat.json")),
    ("rest.json", include_str!("../openapi/rest.json")),
    ("responses.json", include_str!("../openapi/responses.json")),
    ("runs.json", include_str!("../openapi/runs.json")),
    ("jobs.json", include_str!("../openapi/jobs.json")),
    (
        "workspaces.json",
        include_str!("../openapi/workspaces.json"),
    ),
    ("a2a.json", include_str!("../openapi/a2a.json")),
    ("agent_mcp.json", include_str!("../openapi/agent_mcp.json")),
    (
        "operator_mcp.json",
        include_str!("../openapi/operator_mcp.json"),
    ),
    ("discovery.json", include_str!("../openapi/discovery.json")),
    ("channels.json", include_str!("../openapi/channels.json")),
    ("forge.json", include_str!("../openapi/forge.json")),
    ("proxy.json", include_str!("../openapi/proxy.json")),
    ("console.json", include_str!("../openapi/console.json")),
    ("admin.json", include_str!("../openapi/admin.json")),
];

/// The merged document, serialized once.
static DOCUMENT: LazyLock<String> = LazyLock::new(|| match merged() {
    Ok(doc) => doc.to_string(),
    // The unit tests refuse a broken fragment, so this only guards a build that skipped them.
    Err(e) => {
        tracing::error!(error = %e, "the OpenAPI fragments do not merge");
        serde_json::json!({ "openapi": "3.1.0", "info": { "title": "Hermes", "version": "0", "description": e }, "paths": {} }).to_string()
    }
});

/// `GET /openapi.json`
pub async fn document() -> Response {
    ([(CONTENT_TYPE, "application/json")], DOCUMENT.as_str()).into_response()
}

/// The whole document: the base, with every fragment's paths and components added.
pub fn merged() -> Result<Value, String> {
    let mut fragments = FRAGMENTS.iter().map(|(name, text)| {
        serde_json::from_str::<Value>(text)
            .map_err(|e| format!("{name} is not JSON: {e}"))
            .map(|v| (*name, v))
    });
    let (_, mut doc) = fragments.next().ok_or("no base fragment")??;
    for fragment in fragments {
        let (name, fragment) = fragment?;
        add_paths(&mut doc, name, &fragment)?;
        add_components(&mut doc, name, &fragment)?;
    }
    Ok(doc)
}

/// Add `fragment`'s paths; a path may be split across fragments, an operation may not.
fn add_paths(doc: &mut Value, name: &str, fragment: &Value) -> Result<(), String> {
    let Some(paths) = fragment.get("paths").and_then(Value::as_object) else {
        return Ok(());
    };
    let into = object_at(doc, &["paths"]);
    for (path, item) in paths {
        let item = item
            .as_object()
            .ok_or_else(|| format!("{name}: {path} is not an object"))?;
        let target = into
            .entry(path.clone())
            .or_insert_with(|| Value::Object(Map::new()))
            .as_object_mut()
            .ok_or_else(|| format!("{name}: {path} is not an object"))?;
        for (key, value) in item {
            if target.insert(key.clone(), value.clone()).is_some() {
                return Err(format!("{name}: {key} {path} is described twice"));
            }
        }
    }
    Ok(())
}

/// Add `fragment`'s components (schemas, headers, responses, …); each name once.
fn add_components(doc: &mut Value, name: &str, fragment: &Value) -> Result<(), String> {
    let Some(components) = fragment.get("components").and_then(Value::as_object) else {
        return Ok(());
    };
    for (kind, entries) in components {
        let entries = entries
            .as_object()
            .ok_or_else(|| format!("{name}: components.{kind} is not an object"))?;
        let into = object_at(doc, &["components", kind]);
        for (entry, value) in entries {
            if into.insert(entry.clone(), value.clone()).is_some() {
                return Err(format!(
                    "{name}: components.{kind}.{entry} is defined twice"
                ));
            }
        }
    }
    Ok(())
}

/// The object at `path` inside `doc`, created empty where missing.
fn object_at<'a>(doc: &'a mut Value, path: &[&str]) -> &'a mut Map<String, Value> {
    let mut at = doc;
    for key in path {
        if !at.is_object() {
            *at = Value::Object(Map::new());
        }
        at = at
            .as_object_mut()
            .expect("made an object above")
            .entry(key.to_string())
            .or_insert_with(|| Value::Object(Map::new()));
    }
    if !at.is_object() {
        *at = Value::Object(Map::new());
    }
    at.as_object_mut().expect("made an object above")
}

/// Every `(METHOD, path)` the document describes, with the server it is served on (`None`:
/// ingest's public port; `Some(url)`: a path-level server such as the admin port).
pub fn operations(doc: &Value) -> Vec<(String, String, Option<String>)> {
    const METHODS: &[&str] = &["get", "put", "post", "delete", "options", "head", "patch"];
    let mut out = Vec::new();
    if let Some(paths) = doc.get("paths").and_then(Value::as_object) {
        for (path, item) in paths {
            let server = item
                .pointer("/servers/0/url")
                .and_then(Value::as_str)
                .map(str::to_string);
            for method in METHODS {
                if item.get(*method).is_some() {
                    out.push((method.to_uppercase(), path.clone(), server.clone()));
                }
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_fragments_merge_without_describing_anything_twice() {
        let doc = merged().expect("fragments merge");
        assert_eq!(doc["openapi"], "3.1.0");
        assert!(operations(&doc).len() >= 10);
    }

    #[test]
    fn every_reference_names_a_defined_component() {
        let doc = merged().unwrap();
        let mut refs = Vec::new();
        collect_refs(&doc, &mut refs);
        assert!(!refs.is_empty());
        for r in refs {
            let pointer = r
                .strip_prefix('#')
                .unwrap_or_else(|| panic!("{r} is not local"));
            assert!(doc.pointer(pointer).is_some(), "{r} names nothing");
        }
    }

    #[test]
    fn every_operation_has_an_id_a_tag_and_documents_its_errors() {
        let doc = merged().unwrap();
        let mut ids = std::collections::HashSet::new();
        for (method, path, _) in operations(&doc) {
            let op = &doc["paths"][&path][method.to_lowercase()];
            let id = op["operationId"].as_str().unwrap_or_default();
            assert!(!id.is_empty(), "{method} {path} has no operationId");
            assert!(ids.insert(id.to_string()), "operationId {id} twice");
            assert!(op["tags"].is_array(), "{method} {path} has no tag");
            let responses = op["responses"].as_object().unwrap();
            assert!(
                responses.contains_key("default") || responses.keys().any(|s| s.starts_with('5')),
                "{method} {path} documents no error answer"
            );
        }
    }

    #[test]
    fn a_second_description_of_one_operation_is_refused() {
        let mut doc = serde_json::json!({ "paths": { "/a": { "get": {} } } });
        let again = serde_json::json!({ "paths": { "/a": { "get": {}, "post": {} } } });
        assert!(add_paths(&mut doc, "x.json", &again).is_err());
        let other = serde_json::json!({ "paths": { "/a": { "post": {} } } });
        assert!(add_paths(&mut doc, "y.json", &other).is_ok());
        assert_eq!(operations(&doc).len(), 2);
    }

    fn collect_refs(v: &Value, out: &mut Vec<String>) {
        match v {
            Value::Object(m) => {
                for (k, v) in m {
                    match (k.as_str(), v) {
                        ("$ref", Value::String(s)) => out.push(s.clone()),
                        _ => collect_refs(v, out),
                    }
                }
            }
            Value::Array(a) => a.iter().for_each(|v| collect_refs(v, out)),
            _ => {}
        }
    }
}
