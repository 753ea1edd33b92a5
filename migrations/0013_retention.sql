-- Retention and erasure (docs/security.md): indexes the sweeper walks by age, a ledger
-- reason for the rows that summarise older ones, and runs that outlive their session.

-- The sweeper deletes oldest first, in small batches: each family needs its age index.
CREATE INDEX IF NOT EXISTS agent_runs_closed_age ON agent_runs (created_at)
    WHERE status IN ('completed', 'failed');
CREATE INDEX IF NOT EXISTS agent_runs_user ON agent_runs (user_id);
CREATE INDEX IF NOT EXISTS activity_events_age ON activity_events (created_at);
CREATE INDEX IF NOT EXISTS activity_events_user ON activity_events (user_id);
CREATE INDEX IF NOT EXISTS webhook_deliveries_age ON webhook_deliveries (created_at)
    WHERE status <> 'pending';
CREATE INDEX IF NOT EXISTS message_statuses_age ON message_statuses (recorded_at);
CREATE INDEX IF NOT EXISTS interactions_age ON interactions (created_at);
CREATE INDEX IF NOT EXISTS sessions_idle ON sessions (last_activity_at);
CREATE INDEX IF NOT EXISTS credit_ledger_age ON credit_ledger (created_at);
CREATE INDEX IF NOT EXISTS user_memory_extracted_age ON user_memory (updated_at)
    WHERE source = 'extracted' AND NOT structural;

-- A `summary` row stands for the older rows it replaced: their summed delta and the
-- balance after the last of them, so the ledger still adds up to the balance.
ALTER TABLE credit_ledger DROP CONSTRAINT IF EXISTS credit_ledger_reason_check;
ALTER TABLE credit_ledger ADD CONSTRAINT credit_ledger_reason_check
    CHECK (reason IN ('grant', 'charge', 'refund', 'adjust', 'summary'));

-- A run may be kept longer than its conversation: removing the session clears the link.
ALTER TABLE agent_runs DROP CONSTRAINT IF EXISTS agent_runs_session_id_fkey;
ALTER TABLE agent_runs ADD CONSTRAINT agent_runs_session_id_fkey
    FOREIGN KEY (session_id) REFERENCES sessions (id) ON DELETE SET NULL;
