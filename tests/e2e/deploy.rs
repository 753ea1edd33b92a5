//! The monitoring shipped in `k8s/components/monitoring` against a running fleet: its
//! `/metrics` passes `promtool check metrics`, and every metric name the dashboard and the
//! alert rules use is exported. The fleet runs with the Kubernetes ConfigMap's TOML
//! (`k8s/base/hermes.toml`, so that file is checked to load too) plus the MCP reference
//! server, so the MCP series exist.

use std::collections::BTreeSet;
use std::io::Write;
use std::path::PathBuf;
use std::process::{Command, Stdio};

use hermes::Service;
use hermes_testkit::{TestEnv, everything_server_toml, openai_answer, openai_tool_call};
use serde_json::json;
use wiremock::matchers::{body_string_contains, method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

fn repo_file(rel: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .join(rel)
}

/// Every `hermes_…` identifier in `text` (PromQL in YAML or JSON, and metric names quoted in
/// alert descriptions).
fn metric_names(text: &str) -> BTreeSet<String> {
    let bytes = text.as_bytes();
    let is_name = |b: u8| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_';
    let mut names = BTreeSet::new();
    let mut i = 0;
    while let Some(off) = text[i..].find("hermes_") {
        let start = i + off;
        let mut end = start + "hermes_".len();
        while end < bytes.len() && is_name(bytes[end]) {
            end += 1;
        }
        let preceded = start > 0 && (is_name(bytes[start - 1]) || bytes[start - 1] == b'-');
        if !preceded && end > start + "hermes_".len() {
            names.insert(text[start..end].to_string());
        }
        i = end;
    }
    names
}

/// The metric families in a Prometheus text exposition, from its `# TYPE` lines, with the
/// series names each family owns (`_bucket`, `_sum`, `_count` for histograms).
fn exported(exposition: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for line in exposition.lines() {
        let mut words = line.split_whitespace();
        if let (Some("#"), Some("TYPE"), Some(name), Some(kind)) =
            (words.next(), words.next(), words.next(), words.next())
        {
            out.insert(name.to_string());
            if kind == "histogram" {
                for suffix in ["_bucket", "_sum", "_count"] {
                    out.insert(format!("{name}{suffix}"));
                }
            }
        }
    }
    out
}

fn promtool_check_metrics(exposition: &str) -> (bool, String) {
    let mut child = Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("promtool runs (Debian package prometheus; scripts/check-deploy installs it)");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(exposition.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), text)
}

#[test]
fn metric_names_are_found_in_promql_and_prose() {
    let names = metric_names(
        r#"sum(rate(hermes_bus_messages_total{queue="$ns.router"}[5m])) / hermes_x_bucket, see hermes_outbox_lag_seconds. hermes.bus hermes-dashboard my_hermes_y"#,
    );
    let want: BTreeSet<String> = [
        "hermes_bus_messages_total",
        "hermes_x_bucket",
        "hermes_outbox_lag_seconds",
    ]
    .into_iter()
    .map(String::from)
    .collect();
    assert_eq!(names, want);
    let families = exported(
        "# HELP a_seconds x\n# TYPE a_seconds histogram\na_seconds_bucket{le=\"1\"} 0\n# TYPE b_total counter\n",
    );
    assert!(families.contains("a_seconds_bucket") && families.contains("b_total"));
    assert!(!families.contains("b_total_bucket"));
}

const SECRET_KEYS: &str = "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_metric_of_the_dashboard_and_alerts_is_exported_and_promtool_clean() {
    let provider = MockServer::start().await;
    // The second model call of a run (it holds the tool result): the final answer.
    Mock::given(method("POST"))
        .and(path("/v1/chat/completions"))
        .and(body_string_contains("\"role\":\"tool\""))
        .respond_with(ResponseTemplate::new(200).set_body_json(openai_answer(
            "It is evening in Tokyo.",
            40,
            6,
        )))
        .with_priority(1)
        .mount(&provider)
        .await;
    // The very first call fails once, so the error and failure series exist.
    Mock::given(method("POST"))
        .and(path("/v1/chat/completions"))
        .respond_with(ResponseTemplate::new(500).set_body_string("upstream broke"))
        .with_priority(2)
        .up_to_n_times(1)
        .mount(&provider)
        .await;
    // Otherwise the model asks for current_time, so the tools stage runs.
    Mock::given(method("POST"))
        .and(path("/v1/chat/completions"))
        .respond_with(ResponseTemplate::new(200).set_body_json(openai_tool_call(
            "current_time",
            &json!({"timezone":"Asia/Tokyo"}),
        )))
        .with_priority(3)
        .mount(&provider)
        .await;

    // The ConfigMap's TOML, plus the MCP reference server so its gauge has a series.
    let mut env = TestEnv::new().await;
    let mut toml = std::fs::read_to_string(repo_file("k8s/base/hermes.toml")).unwrap();
    toml.push('\n');
    toml.push_str(&everything_server_toml("timeout = 10"));
    let config = std::env::temp_dir().join(format!("{}-deploy.toml", env.ns));
    std::fs::write(&config, toml).unwrap();
    env.openai_mock(&format!("{}/v1", provider.uri()))
        .set("HERMES_MODEL", "gpt-test")
        .set("HERMES_CONFIG", config.to_str().unwrap())
        .set("LLM_GLOBAL_DAILY_BUDGET_USD", "100.00")
        .set("HERMES_SECRET_KEYS", SECRET_KEYS);
    // An external agent, so the agent contract's series exist (they start at 0 per agent).
    env.external_agent(
        "victor",
        "https://agents.example/forge",
        "whsec_deploy",
        1,
        hermes_types::agent::EngagementMode::Execute,
    )
    .await;
    let fleet = env.start(&Service::ALL).await;

    // The first run meets the 500 (failed, or answered after a retry); the second one is
    // answered through a tool call.
    let _ = fleet.chat("what time is it in Tokyo?").await;
    let resp = fleet.chat("and now, what time is it in Tokyo?").await;
    assert_eq!(resp.status(), 200);
    let body: serde_json::Value = resp.json().await.unwrap();
    assert_eq!(
        body["choices"][0]["message"]["content"],
        "It is evening in Tokyo."
    );

    let exposition = fleet.metrics().await;
    let (clean, report) = promtool_check_metrics(&exposition);
    assert!(clean, "promtool check metrics:\n{report}");

    let families = exported(&exposition);
    let monitoring = repo_file("k8s/components/monitoring");
    let mut used = BTreeSet::new();
    for file in ["prometheusrule.yaml", "hermes-dashboard.json"] {
        let text = std::fs::read_to_string(monitoring.join(file)).unwrap();
        let names = metric_names(&text);
        assert!(!names.is_empty(), "{file} names no hermes_ metric");
        used.extend(names);
    }
    let missing: Vec<&String> = used.iter().filter(|n| !families.contains(*n)).collect();
    assert!(
        missing.is_empty(),
        "used by the dashboard or alerts but not exported: {missing:?}\n{exposition}"
    );
    // The spend alert compares these two; both exist once a cap is set and a call was paid.
    assert!(
        exposition.contains("hermes_llm_spend_cap_usd 100"),
        "{exposition}"
    );
    assert!(
        !exposition.contains("hermes_llm_spend_today_usd 0\n"),
        "a paid call moved today's spend:\n{exposition}"
    );

    fleet.stop().await.unwrap();
    let _ = std::fs::remove_file(config);
}

/// The image's dependency layer builds the workspace against stub crates: it must copy every
/// member's manifest and stub every member, or `docker build` fails on the first one missing
/// (shared/media, mcp_server, operator and presence once were).
#[test]
fn the_dockerfile_copies_and_stubs_every_workspace_member() {
    let manifest = std::fs::read_to_string(repo_file("Cargo.toml")).unwrap();
    let dockerfile = std::fs::read_to_string(repo_file("Dockerfile")).unwrap();
    let start = manifest.find("members = [").expect("workspace members");
    let end = start + manifest[start..].find(']').expect("end of members");
    let members: Vec<&str> = manifest[start..end]
        .lines()
        .skip(1)
        .filter_map(|l| l.trim().strip_prefix('"')?.split('"').next())
        .collect();
    assert!(members.len() > 10, "{members:?}");
    let from = dockerfile.find("RUN for crate in").expect("the stub loop");
    let to = from
        + dockerfile[from..]
            .find("; do")
            .expect("the stub loop's end");
    let stubs = dockerfile[from..to].replace('\\', " ");
    for member in members {
        assert!(
            dockerfile.contains(&format!("COPY {member}/Cargo.toml {member}/")),
            "the Dockerfile does not copy {member}/Cargo.toml"
        );
        assert!(
            stubs.split_whitespace().any(|w| w == member),
            "the Dockerfile does not stub {member}"
        );
    }
}
