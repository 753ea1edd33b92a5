-- Hermes schema, version 22: a stage that commits outbox rows publishes them itself right
-- after its commit (docs/architecture.md §2, "the outbox"). Until `held_until` the relays
-- leave such a row to its writer; past it (the writer crashed or could not publish) any
-- relay sweeps it up. Rows written without a hold (NULL) are the relays' at once.
ALTER TABLE outbox ADD COLUMN held_until timestamptz;
