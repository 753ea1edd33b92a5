//! The OpenAPI document at `/openapi.json` is true to the running fleet: every route ingest
//! mounts is described in it, and every operation it describes is served (docs/api.md).

use hermes::Service;
use hermes_channels::inbound::Auth;
use hermes_testkit::{KEY, TestEnv};
use serde_json::Value;

/// The routes ingest's source mounts, as `(path)`: every `.route("…"` literal under
/// services/ingest/src, and every chat platform's webhook route as the channels crate
/// registers them (ingest mounts each the same way). Reading the source and the
/// registration is what keeps a new route from being forgotten in the document: axum
/// cannot list a router's routes.
fn mounted_paths() -> Vec<String> {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../services/ingest/src");
    let mut out = Vec::new();
    let mut dirs = vec![root];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                dirs.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                let text = std::fs::read_to_string(&path).unwrap();
                for piece in text.split(".route(").skip(1) {
                    // `.route("/path", …)` of axum, or `.route(Verb::Get, "/path", …)` of the
                    // API's route list.
                    let mut piece = piece.trim_start();
                    if let Some(after) = piece.strip_prefix("Verb::") {
                        piece = after
                            .split_once(',')
                            .map_or("", |(_, rest)| rest)
                            .trim_start();
                    }
                    if let Some(rest) = piece.strip_prefix('"')
                        && let Some(end) = rest.find('"')
                    {
                        out.push(rest[..end].to_string());
                    }
                }
            }
        }
    }
    let config = hermes_config::Config::from_lookup(&|_| None, None).unwrap();
    for hook in hermes_channels::inbound::webhooks(&config) {
        out.push(hook.path().to_string());
        if let Auth::Token { in_path: true } = hook.auth() {
            out.push(format!("{}/{{token}}", hook.path()));
        }
    }
    out.sort();
    out.dedup();
    out
}

/// `path` with each `{param}` filled with a value that names nothing.
fn concrete(path: &str) -> String {
    let mut out = String::new();
    let mut rest = path;
    while let Some(start) = rest.find('{') {
        out.push_str(&rest[..start]);
        let end = rest[start..]
            .find('}')
            .map_or(rest.len(), |e| start + e + 1);
        out.push_str("00000000-0000-7000-8000-000000000000");
        rest = &rest[end..];
    }
    out.push_str(rest);
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_document_names_every_route_and_every_route_answers() {
    let mut env = TestEnv::new().await;
    // The Forge route is mounted only with a secret, proxy mode's answers only on an edge, and
    // the console only when asked for.
    crate::forge_wakes::forge_env(&mut env);
    env.set("HERMES_CONSOLE", "true");
    env.set("GATEWAY_PROXY_URL", "http://127.0.0.1:9")
        .set("GATEWAY_PROXY_KEY", "hk_upstream")
        .set("GATEWAY_PROXY_SECRET", "whsec_c2VjcmV0");
    let fleet = env.start(&[Service::Ingest]).await;
    let http = reqwest::Client::new();

    let resp = http.get(fleet.url("/openapi.json")).send().await.unwrap();
    assert_eq!(resp.status(), 200);
    assert_eq!(resp.headers()["content-type"], "application/json");
    let doc: Value = resp.json().await.unwrap();
    assert_eq!(doc["openapi"], "3.1.0");
    let operations = hermes_ingest::openapi::operations(&doc);

    // Every mounted route is in the document.
    let documented: Vec<&str> = doc["paths"]
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    for path in mounted_paths() {
        assert!(
            documented.contains(&path.as_str()),
            "{path} is served but not in the OpenAPI document"
        );
    }

    // Every described operation is served: never the router's own 404 or a 405.
    for (method, path, server) in &operations {
        let base = match server {
            Some(_) => format!("http://{}", fleet.admin),
            None => format!("http://{}", fleet.http),
        };
        let url = format!("{base}{}", concrete(path));
        let method = reqwest::Method::from_bytes(method.as_bytes()).unwrap();
        let resp = http
            .request(method.clone(), &url)
            .bearer_auth(KEY)
            .header("content-type", "application/json")
            .body("{}")
            .send()
            .await
            .unwrap();
        let status = resp.status();
        // `GET /v1/runs` is described as answering 405, and does.
        let documented = doc["paths"][path][method.as_str().to_lowercase()]["responses"]
            .get(status.as_str())
            .is_some();
        assert!(
            status != 405 || documented,
            "{method} {path} is described but not allowed"
        );
        assert!(
            status.as_u16() < 500 || status == 503,
            "{method} {path}: {status}"
        );
        if status == 404 {
            let body: Value = resp.json().await.unwrap_or(Value::Null);
            assert_ne!(
                body["error"]["message"], "no such route",
                "{method} {path} is described but not served"
            );
        }
    }
    fleet.stop().await.unwrap();
}

#[test]
fn filling_path_parameters_keeps_the_rest_of_the_path() {
    assert_eq!(
        concrete("/v1/runs/{id}/events"),
        "/v1/runs/00000000-0000-7000-8000-000000000000/events"
    );
    assert_eq!(concrete("/health"), "/health");
    let mounted = mounted_paths();
    for path in [
        "/v1/chat/completions",
        "/v1/capabilities",
        "/api/jobs/{id}/run",
        "/health",
    ] {
        assert!(
            mounted.contains(&path.to_string()),
            "{path} not found in {mounted:?}"
        );
    }
}

/// The schemathesis program: `HERMES_SCHEMATHESIS` (scripts/test installs a pinned one and
/// sets it), else `schemathesis` on PATH.
fn schemathesis() -> Option<String> {
    if let Ok(path) = std::env::var("HERMES_SCHEMATHESIS") {
        return Some(path);
    }
    std::process::Command::new("schemathesis")
        .arg("--version")
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|_| "schemathesis".to_string())
}

/// Property-based requests generated from the document against the whole running fleet:
/// no answer is a server error, and every answer matches what the document says of it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn schemathesis_finds_no_server_error_and_no_answer_outside_the_document() {
    let Some(program) = schemathesis() else {
        assert!(
            std::env::var_os("CI").is_none(),
            "schemathesis is missing: scripts/test installs it (tests/schemathesis/requirements.txt)"
        );
        eprintln!("schemathesis not installed: skipped (scripts/test installs it)");
        return;
    };
    let mut env = TestEnv::new().await;
    crate::forge_wakes::forge_env(&mut env);
    let fleet = env
        .start(&[
            Service::Ingest,
            Service::Router,
            Service::Llm,
            Service::Tools,
            Service::Delivery,
        ])
        .await;
    // Schemathesis keeps a cache of what it found in its working directory: a directory of
    // the run's own, removed after, so no run replays another's or leaves files in the tree.
    let workdir = tempfile_dir();
    let out = tokio::process::Command::new(&program)
        .current_dir(&workdir)
        .args([
            "run",
            "--generation-database",
            "none",
            &fleet.url("/openapi.json"),
            "--checks",
            "not_a_server_error,status_code_conformance,content_type_conformance,response_schema_conformance",
            "--exclude-tag",
            "admin",
            "--max-examples",
            "20",
            "--max-time",
            "60",
            "--request-timeout",
            "40",
            "--seed",
            "1",
            "--no-color",
            "--warnings",
            "off",
            "-H",
            &format!("Authorization: Bearer {KEY}"),
        ])
        .output()
        .await
        .expect("schemathesis runs");
    let report = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let _ = std::fs::remove_dir_all(&workdir);
    eprintln!("{report}");
    fleet.stop().await.unwrap();
    assert!(
        out.status.success(),
        "schemathesis found problems:\n{report}"
    );
}

/// An empty directory of this run's own under the system's temporary directory.
fn tempfile_dir() -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("hermes-schemathesis-{}", uuid::Uuid::now_v7()));
    std::fs::create_dir_all(&dir).expect("a temporary directory");
    dir
}
