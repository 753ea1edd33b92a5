//! The registry of runnable tools: the tools service publishes what it can run at start;
//! the router reads it to decide what to offer the model.

use super::{Client, DbError};
use hermes_types::model::ToolSpec;

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
    tx.commit().await?;
    Ok(())
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
