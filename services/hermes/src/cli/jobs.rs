//! `hermes jobs`: the scheduled jobs of every key and of the operator, read from PostgreSQL
//! (docs/operations.md, scheduled jobs). Jobs are made and changed through `/api/jobs`.

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
}

pub async fn run(config: &Config, cmd: JobsCommand) -> anyhow::Result<()> {
    let db = super::database(config, 1).await?;
    let client = db.get().await?;
    let JobsCommand::List { json } = cmd;
    let all = jobs::list(&client, None).await?;
    let mut rows = Vec::with_capacity(all.len());
    for job in &all {
        let last = jobs::last_run(&client, job.id).await?;
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
