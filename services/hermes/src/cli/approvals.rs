//! `hermes approvals`: the tool calls waiting for an operator (docs/operator-mcp.md,
//! approvals): list them, show one, allow or deny it. An answer is taken once
//! (`hermes_db::approvals::answer`): a call answered before, by another operator or by its
//! timeout, is reported with who answered it and how, and the command exits non-zero.

use anyhow::{Context, bail};
use chrono::Utc;
use clap::{Args, Subcommand};
use hermes_config::Config;
use hermes_db::Db;
use hermes_db::approvals::{self, Answered, Approval, Status};
use hermes_types::ids::ApprovalId;
use hermes_types::model::Verdict;
use serde_json::{Value, json};

#[derive(Subcommand)]
pub enum ApprovalsCommand {
    /// List the calls waiting now, oldest first: id, waited, left, tool, run, sender.
    List {
        /// At most this many.
        #[arg(long, default_value_t = 100)]
        limit: i64,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Print one call, waiting or answered, with its arguments.
    Show {
        #[arg(value_name = "ID")]
        id: ApprovalId,
    },
    /// Let the call run; its run resumes once no call of its round waits.
    Allow(Answer),
    /// Refuse the call: the model is told it was denied (and why, with --reason).
    Deny(Answer),
}

/// Which call, and why.
#[derive(Args)]
pub struct Answer {
    #[arg(value_name = "ID")]
    id: ApprovalId,
    /// Why, kept with the answer (and shown to the model with a denial).
    #[arg(long)]
    reason: Option<String>,
}

pub async fn run(config: &Config, cmd: ApprovalsCommand) -> anyhow::Result<()> {
    let db = Db::new(&config.database_url, 1)?;
    match cmd {
        ApprovalsCommand::List { limit, json } => {
            let open = approvals::list_open(&db.get().await?, limit).await?;
            if json {
                let rows: Vec<Value> = open.iter().map(to_json).collect();
                println!("{}", serde_json::to_string_pretty(&rows)?);
            } else if open.is_empty() {
                println!("no tool call waits for approval");
            } else {
                println!(
                    "{:<36}  {:>7}  {:>7}  {:<24}  {:<36}  sender",
                    "id", "waited", "left", "tool", "run"
                );
                for a in &open {
                    let now = Utc::now();
                    println!(
                        "{:<36}  {:>6}s  {:>6}s  {:<24}  {:<36}  {}:{}",
                        a.id,
                        (now - a.created_at).num_seconds().max(0),
                        (a.deadline_at - now).num_seconds().max(0),
                        a.tool,
                        a.run_id,
                        a.platform,
                        a.sender_id
                    );
                }
            }
            Ok(())
        }
        ApprovalsCommand::Show { id } => {
            let Some(a) = approvals::get(&db.get().await?, id).await? else {
                bail!("no approval {id}");
            };
            println!("{}", serde_json::to_string_pretty(&to_json(&a))?);
            Ok(())
        }
        ApprovalsCommand::Allow(answer) => respond(&db, answer, Verdict::Allowed).await,
        ApprovalsCommand::Deny(answer) => respond(&db, answer, Verdict::Denied).await,
    }
}

/// Who answers from this shell: `cli:$USER`.
pub fn operator() -> String {
    let user = std::env::var("USER")
        .or_else(|_| std::env::var("USERNAME"))
        .unwrap_or_else(|_| "unknown".into());
    format!("cli:{user}")
}

async fn respond(db: &Db, answer: Answer, verdict: Verdict) -> anyhow::Result<()> {
    let by = operator();
    let answered = decide(db, answer.id, verdict, &by, answer.reason.as_deref()).await?;
    match answered {
        Answered::Decided { approval, resumed } => {
            println!(
                "{} {} ({}) of run {}{}",
                verdict.as_str(),
                approval.id,
                approval.tool,
                approval.run_id,
                if resumed {
                    ": the run resumes"
                } else {
                    ": the run does not resume yet (another call of its round waits, or the run has ended)"
                }
            );
            Ok(())
        }
        Answered::AlreadyDecided(a) => bail!("{}", already(&a)),
        Answered::PastDeadline { approval, .. } => bail!("{}", past_deadline(&approval)),
        Answered::NotFound => bail!("no approval {}", answer.id),
    }
}

/// Answer call `id` in a transaction of its own (the CLI's and the tests' way in).
pub async fn decide(
    db: &Db,
    id: ApprovalId,
    verdict: Verdict,
    by: &str,
    reason: Option<&str>,
) -> anyhow::Result<Answered> {
    let mut client = db.get().await?;
    let tx = client.transaction().await?;
    let answered = approvals::answer(&tx, id, verdict, Some(by), reason)
        .await
        .with_context(|| format!("answering approval {id}"))?;
    tx.commit().await?;
    Ok(answered)
}

/// What an operator is told of an allow that came after the call's deadline.
pub fn past_deadline(a: &Approval) -> String {
    format!(
        "approval {} could not be allowed: its deadline passed at {}; it was denied as timed out",
        a.id,
        a.deadline_at.to_rfc3339()
    )
}

/// What an operator is told of a call answered before.
pub fn already(a: &Approval) -> String {
    let when = a
        .decided_at
        .map(|t| t.to_rfc3339())
        .unwrap_or_else(|| "?".into());
    match (a.status, a.decided_by.as_deref()) {
        (Status::Decided(Verdict::TimedOut), _) => {
            format!("approval {} timed out at {when}: nothing changed", a.id)
        }
        (status, by) => format!(
            "approval {} was already {} by {} at {when}: nothing changed",
            a.id,
            status.as_str(),
            by.unwrap_or("the sweeper")
        ),
    }
}

fn to_json(a: &Approval) -> Value {
    json!({
        "id": a.id,
        "run_id": a.run_id,
        "round": a.round,
        "call_id": a.call_id,
        "tool": a.tool,
        "arguments": a.arguments,
        "status": a.status.as_str(),
        "decided_by": a.decided_by,
        "reason": a.reason,
        "created_at": a.created_at,
        "deadline_at": a.deadline_at,
        "decided_at": a.decided_at,
        "platform": a.platform,
        "sender_id": a.sender_id,
        "agent": a.agent,
    })
}
