//! `hermes jobs` (also `hermes cron`): the scheduled jobs of every key and of the operator,
//! listed from PostgreSQL (docs/operations.md, scheduled jobs); made and changed through a
//! running ingest's `/api/jobs` (`jobs_api.rs`).

use hermes_config::Config;
use hermes_db::jobs;
use serde_json::json;

#[derive(clap::Subcommand)]
pub enum JobsCommand {
    /// List every job: owner, schedule, target, whether paused, next due time, last run.
    List {
        /// One JSON array instead of lines.
        #[arg(long)]
        json: bool,
    },
    /// Make an operator's job through ingest's /api/jobs (with API_SERVER_KEY).
    Create {
        #[command(flatten)]
        job: super::jobs_api::NewJob,
        #[command(flatten)]
        ingest: super::jobs_api::Ingest,
    },
    /// No run until resumed.
    Pause {
        id: String,
        #[command(flatten)]
        ingest: super::jobs_api::Ingest,
    },
    /// Runs again; the next due time counts from now.
    Resume {
        id: String,
        #[command(flatten)]
        ingest: super::jobs_api::Ingest,
    },
    /// One run now, out of schedule.
    Run {
        id: String,
        #[command(flatten)]
        ingest: super::jobs_api::Ingest,
    },
    /// Delete the job; its runs still open are asked to stop.
    Delete {
        id: String,
        #[command(flatten)]
        ingest: super::jobs_api::Ingest,
    },
}

pub async fn run(config: &Config, cmd: JobsCommand) -> anyhow::Result<()> {
    use super::jobs_api::{Change, change, create};
    let json = match cmd {
        JobsCommand::List { json } => json,
        JobsCommand::Create { job, ingest } => return create(config, &ingest, job).await,
        JobsCommand::Pause { id, ingest } => {
            return change(config, &ingest, &id, Change::Pause).await;
        }
        JobsCommand::Resume { id, ingest } => {
            return change(config, &ingest, &id, Change::Resume).await;
        }
        JobsCommand::Run { id, ingest } => return change(config, &ingest, &id, Change::Run).await,
        JobsCommand::Delete { id, ingest } => {
            return change(config, &ingest, &id, Change::Delete).await;
        }
    };
    let db = super::database(config, 1).await?;
    let client = db.get().await?;
    let all = jobs::list(&client, None).await?;
    let ids: Vec<_> = all.iter().map(|j| j.id).collect();
    let mut latest = jobs::last_runs(&client, &ids).await?;
    let mut rows = Vec::with_capacity(all.len());
    for job in &all {
        let last = latest.remove(&job.id);
        let schedule = serde_json::to_value(&job.spec.schedule)?;
        rows.push(json!({
            "id": job.id,
            "name": job.spec.name,
            "api_key_id": job.api_key_id,
            "schedule": schedule,
            "target": job.spec.target.kind().as_str(),
            "paused": job.paused,
            "next_run_at": job.next_run_at,
            "last_run": last.map(|r| json!({
                "run_id": r.run_id, "status": r.status.as_str(), "started_at": r.started_at,
            })),
        }));
    }
    if json {
        println!("{}", serde_json::Value::from(rows));
        return Ok(());
    }
    if rows.is_empty() {
        println!("no jobs");
    }
    for r in &rows {
        let owner = r["api_key_id"].as_str().unwrap_or("operator");
        let next = match r["next_run_at"].as_str() {
            Some(t) => format!("next {t}"),
            None => "PAUSED".into(),
        };
        let last = match r["last_run"]["status"].as_str() {
            Some(s) => format!("last run {s}"),
            None => "never ran".into(),
        };
        println!(
            "{}  {:<20} {}  {}  {}  {}  {}",
            r["id"].as_str().unwrap_or_default(),
            r["name"].as_str().unwrap_or_default(),
            owner,
            r["schedule"],
            r["target"].as_str().unwrap_or_default(),
            next,
            last
        );
    }
    Ok(())
}
