-- Each model call of a run with its own model, tokens, cost, time and failure
-- (docs/console.md, "A run's page"). Written by the statement that closes the run, so the
-- hot path gains no statement; NULL for runs no model answered and for runs closed before
-- this column existed. Nullable with no default: adding it rewrites no row.
ALTER TABLE agent_runs ADD COLUMN model_calls jsonb;
