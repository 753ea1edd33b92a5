-- Hermes schema, version 6: what a run's model calls cost, in micro-dollars (an integer, so
-- sums over runs are exact), from the per-model prices in [models].
ALTER TABLE agent_runs ADD COLUMN cost_micro_usd bigint NOT NULL DEFAULT 0;
