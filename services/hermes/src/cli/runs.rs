//! `hermes runs show <run-id>`: one run read from PostgreSQL, with its model calls, every
//! message its answer became on its platform and what the user's phone reported about each
//! (docs/channels.md, statuses; docs/operations.md, runs), and the trace it was answered in
//! (docs/tracing.md).

use hermes_config::Config;
use hermes_db::platform_sends::{self, SendView};
use hermes_db::runs;
use hermes_types::ids::RunId;
use hermes_types::model::ModelCall;
use serde_json::json;

#[derive(clap::Subcommand)]
pub enum RunsCommand {
    /// A run's status, answer or error, its model calls, and its sends with their last
    /// reported status.
    Show {
        /// The run's id.
        run_id: String,
        /// One JSON object instead of lines.
        #[arg(long)]
        json: bool,
    },
}

pub async fn run(config: &Config, cmd: RunsCommand) -> anyhow::Result<()> {
    let RunsCommand::Show { run_id, json } = cmd;
    let id: RunId = run_id
        .parse()
        .map_err(|_| anyhow::anyhow!("{run_id:?} is not a run id"))?;
    let db = super::database(config, 1).await?;
    let client = db.get().await?;
    let Some(row) = runs::get(&client, id).await? else {
        anyhow::bail!("no run {id}");
    };
    let sends = platform_sends::of_run(&client, id).await?;
    let calls = runs::model_calls(&client, id).await?;
    let trace_id = runs::traceparent(&client, id)
        .await?
        .map(|t| t.trace_id().to_string());
    let trace_link = trace_id.as_deref().and_then(|t| config.traces.link_to(t));
    if json {
        let shown = json!({
            "run_id": row.id,
            "status": row.status.as_str(),
            "platform": row.platform.map(|p| p.as_str()),
            "error_code": row.error_code,
            "error_detail": row.error_detail,
            "created_at": row.created_at,
            "finished_at": row.finished_at,
            "trace_id": trace_id,
            "trace_link": trace_link,
            "model_calls": calls,
            "sends": sends,
        });
        println!("{shown}");
        return Ok(());
    }
    println!(
        "run {}  {}  {}  created {}",
        row.id,
        row.platform.map_or("-", |p| p.as_str()),
        row.status.as_str(),
        row.created_at.to_rfc3339()
    );
    // The run's trace (docs/tracing.md, "Logs and traces meet"): its id, and its page in
    // the tracing UI when `HERMES_TRACE_LINK` names one.
    match (&trace_id, &trace_link) {
        (Some(id), Some(link)) => println!("  trace {id}  {link}"),
        (Some(id), None) => println!("  trace {id}"),
        (None, _) => {}
    }
    if let Some(code) = &row.error_code {
        println!(
            "  error {code}: {}",
            row.error_detail.as_deref().unwrap_or("")
        );
    }
    for c in &calls {
        println!("  {}", call_line(c));
    }
    if sends.is_empty() {
        println!("  no sends recorded");
    }
    for s in &sends {
        println!("  {}", send_line(s));
    }
    Ok(())
}

/// One model call as a line: round, model, tokens and cost or the failure, time.
fn call_line(c: &ModelCall) -> String {
    let what = match c.error {
        Some(code) => format!("failed {}", code.as_str()),
        None => format!(
            "{} in {} out {} micro-USD",
            c.usage.input_tokens, c.usage.output_tokens, c.usage.cost_micro_usd
        ),
    };
    format!(
        "model call {} {} {}  {what}  {} ms",
        c.round,
        c.model,
        c.at.to_rfc3339(),
        c.ms
    )
}

/// One send as a line: part, platform id, status and when, the error of a failure.
fn send_line(s: &SendView) -> String {
    let when = s.status_at.unwrap_or(s.sent_at).to_rfc3339();
    let error = match (s.error_code, &s.error_title) {
        (Some(code), title) => format!("  error {code} {}", title.as_deref().unwrap_or("")),
        (None, _) => String::new(),
    };
    format!(
        "part {} {} {}  {} {when}{error}",
        s.part, s.platform, s.platform_message_id, s.status
    )
}
