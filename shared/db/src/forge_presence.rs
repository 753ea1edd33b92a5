//! What Hermes's presence towards a Forge reads (docs/agents.md, "Presence towards the
//! Forge"): how many Forge runs the agent the Forge knows as a profile key has open, to
//! tell the Forge BUSY while they fill its `maxConcurrent`.

use super::{DbError, GenericClient, stmt};
use crate::runs::CLOSED_SQL;

/// The open runs woken by a Forge (`platform = 'forge'`) of the agents whose profile key is
/// `profile_key` (compared in lower case, as a wake's routing does), in every workspace.
pub async fn open_runs(c: &impl GenericClient, profile_key: &str) -> Result<i64, DbError> {
    let sql = format!(
        "SELECT count(*) FROM agent_runs r JOIN agents a ON a.id = r.agent_id
          WHERE r.platform = 'forge' AND r.status NOT IN {CLOSED_SQL}
            AND a.profile_key = lower($1)"
    );
    let row = c.query_one(&stmt(c, &sql).await?, &[&profile_key]).await?;
    Ok(row.get(0))
}
