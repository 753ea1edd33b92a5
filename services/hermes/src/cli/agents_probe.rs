//! `hermes agents probe <profileKey>`: the Forge contract's runtime diagnostics (docs/agents.md,
//! "Probing an agent's runtime"), as a dispatcher runs them against a managed Hermes-style
//! runtime: `GET /v1/models` with the runtime's bearer (the gateway base and token are right)
//! and `GET /v1/runs`, which must answer 405 (the structured runs route exists; only `POST`
//! starts a run, so nothing is started). Each check is reported. A probe is diagnostic only:
//! it never marks the agent present (presence comes from heartbeats and delivered wakes).

use std::io::Read;
use std::time::Duration;

use anyhow::Context;
use hermes_db::agents::Agent;
use reqwest::StatusCode;
use url::Url;

/// How long each probe request may take.
const PROBE_TIMEOUT: Duration = Duration::from_secs(10);
/// Largest probe answer read (its models are counted, nothing else).
const MAX_ANSWER_BYTES: usize = 1 << 20;

/// One check's verdict.
struct Check {
    path: &'static str,
    expected: &'static str,
    outcome: Result<String, String>,
}

/// The base URL probed: `--base-url`, else the origin of the agent's webhook URL.
fn base_of(agent: &Agent, base_url: Option<&str>) -> anyhow::Result<Url> {
    let base = match base_url {
        Some(b) => Url::parse(b).context("--base-url is not a URL")?,
        None => {
            let hook = agent.webhook_url.as_deref().with_context(|| {
                format!(
                    "agent {} has no webhook URL (pull-only or internal): give --base-url",
                    agent.profile_key
                )
            })?;
            let mut u = Url::parse(hook).context("the agent's webhook URL is not a URL")?;
            u.set_path("");
            u.set_query(None);
            u
        }
    };
    anyhow::ensure!(
        matches!(base.scheme(), "http" | "https"),
        "the runtime's base URL must be http or https"
    );
    Ok(base)
}

/// The bearer read from standard input (kept out of shell history and process lists).
fn bearer_from_stdin() -> anyhow::Result<String> {
    let mut token = String::new();
    std::io::stdin()
        .read_to_string(&mut token)
        .context("reading the bearer from standard input")?;
    let token = token.trim().to_string();
    anyhow::ensure!(!token.is_empty(), "no bearer on standard input");
    Ok(token)
}

/// `GET {base}{path}`: the status and (at most [`MAX_ANSWER_BYTES`] of) the body.
async fn get(
    http: &reqwest::Client,
    base: &Url,
    path: &str,
    bearer: Option<&str>,
) -> Result<(StatusCode, Vec<u8>), String> {
    let url = base
        .join(path.trim_start_matches('/'))
        .map_err(|e| e.to_string())?;
    let mut req = http.get(url);
    if let Some(b) = bearer {
        req = req.bearer_auth(b);
    }
    let resp = req.send().await.map_err(|e| format!("unreachable: {e}"))?;
    let status = resp.status();
    let body = resp.bytes().await.unwrap_or_default();
    Ok((status, body[..body.len().min(MAX_ANSWER_BYTES)].to_vec()))
}

/// Probe the runtime of `agent` and print each check; an error when one failed.
pub async fn probe(agent: &Agent, base_url: Option<&str>, token_stdin: bool) -> anyhow::Result<()> {
    let base = base_of(agent, base_url)?;
    let bearer = token_stdin.then(bearer_from_stdin).transpose()?;
    let http = reqwest::Client::builder()
        .timeout(PROBE_TIMEOUT)
        .redirect(reqwest::redirect::Policy::none())
        .build()?;
    let models = match get(&http, &base, "/v1/models", bearer.as_deref()).await {
        Ok((status, body)) if status.is_success() => {
            let listed = serde_json::from_slice::<serde_json::Value>(&body)
                .ok()
                .and_then(|v| v["data"].as_array().map(Vec::len));
            match listed {
                Some(n) => Ok(format!("{status}, {n} models")),
                None => Err(format!("{status}, but not a model list")),
            }
        }
        Ok((status, _)) => Err(status.to_string()),
        Err(e) => Err(e),
    };
    let runs = match get(&http, &base, "/v1/runs", bearer.as_deref()).await {
        Ok((StatusCode::METHOD_NOT_ALLOWED, _)) => {
            Ok("405 Method Not Allowed: the runs route exists".to_string())
        }
        Ok((status, _)) => Err(status.to_string()),
        Err(e) => Err(e),
    };
    let checks = [
        Check {
            path: "GET /v1/models",
            expected: "2xx with the bearer",
            outcome: models,
        },
        Check {
            path: "GET /v1/runs",
            expected: "405",
            outcome: runs,
        },
    ];
    println!(
        "probing agent {} at {base} ({})",
        agent.profile_key,
        if bearer.is_some() {
            "with its bearer"
        } else {
            "without a bearer"
        }
    );
    let mut failed = 0;
    for c in &checks {
        match &c.outcome {
            Ok(what) => println!("  ok    {:<16} {what}", c.path),
            Err(what) => {
                failed += 1;
                println!("  FAIL  {:<16} {what} (expected {})", c.path, c.expected);
            }
        }
    }
    println!("(diagnostic only: the agent's presence is unchanged)");
    anyhow::ensure!(failed == 0, "{failed} of {} checks failed", checks.len());
    Ok(())
}
