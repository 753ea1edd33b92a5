-- Hermes schema, version 12: an agent's tool allowlist (docs/agents.md, "Engagement modes").
-- NULL: no list applies; otherwise the local-host toolsets or tool names its runs may use
-- (an empty list: none). Set with `hermes agents create|set --tool-allowlist`.
ALTER TABLE agents ADD COLUMN tool_allowlist text[];
