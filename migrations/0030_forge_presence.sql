-- Presence towards a Forge (docs/agents.md, "Presence towards the Forge"): the tools
-- replica that holds a lease named for a Forge MCP server is the one that calls its
-- `agents.heartbeat`, so a fleet of replicas sends one heartbeat an interval, not one each.
-- A lease is held until `expires_at`; its holder renews it on every heartbeat and deletes it
-- on a graceful stop, and a crashed holder's lease is taken once it has expired.
CREATE TABLE leases (
    name        text PRIMARY KEY,
    holder      text NOT NULL,
    expires_at  timestamptz NOT NULL
);
