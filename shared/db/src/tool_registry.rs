//! The registry of runnable tools: the tools service publishes what it can run (its
//! built-ins at once, each MCP server's tools as the server connects, and removes the
//! toolsets no longer configured); the router reads it to decide what to offer the model.
//! Every change sends `NOTIFY hermes_tool_registry` at commit, so routers drop their copy
//! at once (docs/tools-and-mcp.md, "The registry").

use super::{Client, DbError};
use hermes_types::model::ToolSpec;

/// The notification channel of registry changes (the payload is empty: a database holds
/// one namespace's registry).
pub const CHANNEL: &str = "hermes_tool_registry";

/// Replace the registry entries of `toolsets` with `specs` (one transaction).
pub async fn publish(
    client: &mut Client,
    toolsets: &[&str],
    specs: &[ToolSpec],
) -> Result<(), DbError> {
    let tx = client.transaction().await?;
    tx.execute(
        "DELETE FROM tool_registry WHERE toolset = ANY($1)",
        &[&toolsets],
    )
    .await?;
    for s in specs {
        tx.execute(
            "INSERT INTO tool_registry (name, description, parameters, toolset) VALUES ($1, $2, $3, $4)
             ON CONFLICT (name) DO UPDATE SET description = EXCLUDED.description,
                 parameters = EXCLUDED.parameters, toolset = EXCLUDED.toolset, updated_at = now()",
            &[&s.name, &s.description, &s.parameters, &s.toolset],
        )
        .await?;
    }
    tx.execute("SELECT pg_notify($1, '')", &[&CHANNEL]).await?;
    tx.commit().await?;
    Ok(())
}

/// Remove every toolset but `keep` (the built-ins and the servers configured now): what a
/// server removed from the configuration left behind would otherwise be offered for ever
/// and end as `unknown_tool`. Returns the number of tools removed.
pub async fn retain(client: &mut Client, keep: &[&str]) -> Result<u64, DbError> {
    let tx = client.transaction().await?;
    let removed = tx
        .execute(
            "DELETE FROM tool_registry WHERE NOT (toolset = ANY($1))",
            &[&keep],
        )
        .await?;
    if removed > 0 {
        tx.execute("SELECT pg_notify($1, '')", &[&CHANNEL]).await?;
    }
    tx.commit().await?;
    Ok(removed)
}

/// Every registered tool, by name.
pub async fn list(client: &Client) -> Result<Vec<ToolSpec>, DbError> {
    let rows = client
        .query(
            "SELECT name, description, parameters, toolset FROM tool_registry ORDER BY name",
            &[],
        )
        .await?;
    Ok(rows
        .iter()
        .map(|r| ToolSpec {
            name: r.get(0),
            description: r.get(1),
            parameters: r.get(2),
            toolset: r.get(3),
        })
        .collect())
}
