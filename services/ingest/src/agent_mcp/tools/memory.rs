//! `memory.remember`: an open EXECUTE run writes what it learned about its user into the
//! user's memory ([`hermes_db::memory::remember_as_agent`]: a structural key replaces its
//! value, any other key adds a fact, stored with source `agent`), recorded as an
//! `activity_events` row, and the user's cached soul is dropped so the next message sees it.
//! Refused in the restricted engagement modes, once the run has its reply (`RUN_ENDED`), and
//! past `HERMES_AGENT_FACTS_PER_USER` facts for the user (`LIMIT_EXCEEDED`); its facts expire
//! after `HERMES_RETENTION_FACTS_DAYS` like extracted ones (docs/agents.md, memory).

use hermes_db::memory::{self, Remembered};
use hermes_telemetry::TenantLimit;
use serde_json::{Value, json};

use super::{
    Args, Call, MAX_MEMORY_VALUE, Tool, ensure_mutation_allowed, ensure_open, own_run, tx_error,
};
use crate::agent_mcp::errors::{ErrorCode, ToolError};

/// Whether `key` is a memory key: a lower-case letter, then up to 63 lower-case letters,
/// digits or `_` (the spelling of the structural keys).
fn valid_key(key: &str) -> bool {
    let mut chars = key.chars();
    key.len() <= 64
        && chars.next().is_some_and(|c| c.is_ascii_lowercase())
        && chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
}

/// `memory.remember`
pub async fn remember(call: &Call<'_>, args: &Args) -> Result<Value, ToolError> {
    let run_id = args.run_id()?;
    let key = args
        .opt_str("key")?
        .ok_or_else(|| ToolError::invalid("key is required"))?
        .to_string();
    if !valid_key(&key) {
        return Err(ToolError::invalid(
            "key must be a lower-case letter then up to 63 lower-case letters, digits or _",
        ));
    }
    let value = args.text("value", MAX_MEMORY_VALUE)?;
    let mut client = call.db().await?;
    let tx = client.transaction().await.map_err(tx_error)?;
    let run = own_run(&tx, call, run_id).await?;
    ensure_open(&run)?;
    ensure_mutation_allowed(&run, Tool::MemoryRemember)?;
    let user = run
        .user_id
        .ok_or_else(|| ToolError::invalid("the run has no user to remember for"))?;
    let max = call.app.ctx.config.tenants.agent_facts_per_user;
    let remembered = memory::remember_as_agent(&tx, user, &key, &value, max).await?;
    if let Remembered::Full { held } = remembered {
        call.app.ctx.metrics.agents.refused(TenantLimit::AgentFacts);
        return Err(ToolError::new(
            ErrorCode::LimitExceeded,
            format!(
                "the user holds {held} facts remembered by agents, the most allowed (HERMES_AGENT_FACTS_PER_USER={max}); nothing was stored"
            ),
        )
        .with("limit", "HERMES_AGENT_FACTS_PER_USER")
        .with("max", max)
        .with("held", held));
    }
    // The activity event says which agent and run it was.
    hermes_db::agents::record_activity(
        &tx,
        run.id,
        Some(call.agent.id),
        Some(user),
        "memory.remembered",
        &json!({
            "key": key,
            "structural": memory::is_structural(&key),
            "refreshed": remembered == Remembered::Refreshed,
        }),
    )
    .await?;
    tx.commit().await.map_err(tx_error)?;
    hermes_cache::soul::invalidate(&call.app.ctx.cache, &call.app.ctx.alerts, user).await;
    Ok(json!({
        "runId": run.id,
        "key": key,
        "structural": memory::is_structural(&key),
        "remembered": true,
        "refreshed": remembered == Remembered::Refreshed,
    }))
}

#[cfg(test)]
mod tests {
    use super::valid_key;

    #[test]
    fn memory_keys_are_lower_case_identifiers() {
        assert!(valid_key("diet"));
        assert!(valid_key("favorite_venue2"));
        assert!(!valid_key("Diet"));
        assert!(!valid_key("2diet"));
        assert!(!valid_key(""));
        assert!(!valid_key(&"a".repeat(65)));
        assert!(!valid_key("diet-plan"));
    }
}
