//! `hermes jobs create|pause|resume|run|delete` (also spelled `hermes cron …`, as the source
//! document's CLI is): changes to scheduled jobs go through a running ingest's `/api/jobs` with
//! the operator's key, so that every rule of the API (schedule checks, the shortest interval,
//! the chat target's checks, the log line of each change) applies to them once, in one place
//! (docs/operations.md, "Scheduled jobs").

use std::time::Duration;

use hermes_config::Config;
use secrecy::ExposeSecret;
use serde_json::{Value, json};

/// How long one call to ingest may take.
const CALL_TIMEOUT: Duration = Duration::from_secs(15);

/// Where a job's answer goes.
#[derive(Clone, Copy, Debug, clap::ValueEnum)]
pub enum Target {
    /// Kept on the job's run, read with `GET /v1/runs/{id}`.
    Stored,
    /// Posted to the owning key's callback URL (an operator's job has none).
    Callback,
    /// Sent to a linked chat: `--platform` and `--chat-id`.
    Chat,
}

/// What `hermes jobs create` takes.
#[derive(clap::Args)]
pub struct NewJob {
    /// A name for people.
    #[arg(long)]
    pub name: String,
    /// The prompt each run is given.
    #[arg(long)]
    pub prompt: String,
    /// "every 30m", "2h", a 5-field cron expression in UTC ("0 8 * * 1-5"), or the API's
    /// JSON object ('{"cron": "0 9 * * *", "timezone": "Europe/Paris"}').
    #[arg(long)]
    pub schedule: String,
    /// Where each run's answer goes.
    #[arg(long, value_enum, default_value = "stored")]
    pub target: Target,
    /// The chat target's platform (`telegram`, `whatsapp`, …).
    #[arg(long, required_if_eq("target", "chat"))]
    pub platform: Option<String>,
    /// The chat target's chat id.
    #[arg(long, required_if_eq("target", "chat"))]
    pub chat_id: Option<String>,
    /// A logical model tried first.
    #[arg(long)]
    pub model: Option<String>,
    /// Only tools of these toolsets are offered (comma-separated).
    #[arg(long, value_delimiter = ',')]
    pub toolsets: Option<Vec<String>>,
}

/// Where ingest is: `--url`, else this configuration's `HERMES_HTTP_ADDR` on loopback.
#[derive(clap::Args)]
pub struct Ingest {
    /// Ingest's base URL (default: http://127.0.0.1:<port of HERMES_HTTP_ADDR>).
    #[arg(long, global = true)]
    pub url: Option<String>,
}

/// A change to one job, by id.
#[derive(Clone, Copy, Debug)]
pub enum Change {
    Pause,
    Resume,
    Run,
    Delete,
}

/// `POST /api/jobs` with `job`; prints the job as ingest answered it.
pub async fn create(config: &Config, ingest: &Ingest, job: NewJob) -> anyhow::Result<()> {
    let body = json!({
        "name": job.name,
        "prompt": job.prompt,
        "schedule": schedule_value(&job.schedule),
        "target": target_value(&job),
        "model": job.model,
        "toolsets": job.toolsets,
    });
    let answer = call(
        config,
        ingest,
        reqwest::Method::POST,
        "/api/jobs",
        Some(body),
    )
    .await?;
    println!("{}", serde_json::to_string_pretty(&answer)?);
    Ok(())
}

/// One change to job `id`; prints what ingest answered.
pub async fn change(
    config: &Config,
    ingest: &Ingest,
    id: &str,
    change: Change,
) -> anyhow::Result<()> {
    let id = path_segment(id);
    let (method, path) = match change {
        Change::Pause => (reqwest::Method::POST, format!("/api/jobs/{id}/pause")),
        Change::Resume => (reqwest::Method::POST, format!("/api/jobs/{id}/resume")),
        Change::Run => (reqwest::Method::POST, format!("/api/jobs/{id}/run")),
        Change::Delete => (reqwest::Method::DELETE, format!("/api/jobs/{id}")),
    };
    let answer = call(config, ingest, method, &path, None).await?;
    println!("{}", serde_json::to_string_pretty(&answer)?);
    Ok(())
}

/// A schedule as the API takes it: a JSON object given as such, else the text itself.
fn schedule_value(text: &str) -> Value {
    match serde_json::from_str::<Value>(text) {
        Ok(v @ Value::Object(_)) => v,
        _ => Value::String(text.to_string()),
    }
}

fn target_value(job: &NewJob) -> Value {
    match job.target {
        Target::Stored => json!({"type": "stored"}),
        Target::Callback => json!({"type": "callback"}),
        Target::Chat => json!({
            "type": "chat", "platform": job.platform, "chat_id": job.chat_id,
        }),
    }
}

/// A job id as one path segment: only the characters ids have pass.
fn path_segment(id: &str) -> String {
    id.chars()
        .filter(|c| c.is_ascii_alphanumeric() || *c == '-' || *c == '_')
        .collect()
}

/// One call to ingest with the operator's key; an error answer becomes the error, with the
/// API's own message.
async fn call(
    config: &Config,
    ingest: &Ingest,
    method: reqwest::Method,
    path: &str,
    body: Option<Value>,
) -> anyhow::Result<Value> {
    let key = config.ingest.api_server_key.as_ref().ok_or_else(|| {
        anyhow::anyhow!("API_SERVER_KEY is not set: the jobs API needs the operator's key")
    })?;
    let base = match &ingest.url {
        Some(url) => url.trim_end_matches('/').to_string(),
        None => format!("http://127.0.0.1:{}", config.ingest.http_addr.port()),
    };
    let client = reqwest::Client::builder().timeout(CALL_TIMEOUT).build()?;
    let mut request = client
        .request(method, format!("{base}{path}"))
        .bearer_auth(key.expose_secret());
    if let Some(body) = body {
        request = request.json(&body);
    }
    let response = request
        .send()
        .await
        .map_err(|e| anyhow::anyhow!("ingest at {base} did not answer: {}", e.without_url()))?;
    let status = response.status();
    let answer: Value = response.json().await.unwrap_or(Value::Null);
    if status.is_success() {
        return Ok(answer);
    }
    let message = answer["error"]["message"].as_str().unwrap_or("no message");
    let code = answer["error"]["code"].as_str().unwrap_or("unknown");
    anyhow::bail!("ingest refused it: {status} {code}: {message}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_schedule_is_sent_as_an_object_when_it_is_one_and_as_text_otherwise() {
        assert_eq!(schedule_value("every 30m"), json!("every 30m"));
        assert_eq!(
            schedule_value(r#"{"cron": "0 9 * * *"}"#),
            json!({"cron": "0 9 * * *"})
        );
        assert_eq!(schedule_value("0 8 * * 1-5"), json!("0 8 * * 1-5"));
    }

    #[test]
    fn an_id_cannot_leave_its_path_segment() {
        assert_eq!(path_segment("job_01/../../v1/runs"), "job_01v1runs");
    }
}
