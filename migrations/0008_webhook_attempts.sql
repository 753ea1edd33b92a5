-- Hermes schema, version 8: signed agent webhooks (seed 000's push direction). Every attempt
-- is recorded on its webhook_deliveries row; agents may ask for Standard Webhooks headers.

ALTER TABLE agents
    ADD COLUMN standard_webhooks boolean NOT NULL DEFAULT false;

ALTER TABLE webhook_deliveries
    -- The HTTP status of the last attempt (none when no answer came back).
    ADD COLUMN last_status_code integer,
    ADD COLUMN last_attempt_at  timestamptz,
    -- When the queued retry of a failed attempt is due; none once delivered or failed.
    ADD COLUMN next_attempt_at  timestamptz;
