-- Hermes schema, version 4: commits whose process runs its own outbox relay wake it
-- directly and skip NOTIFY. NOTIFY takes a database-wide lock at commit and holds it
-- across the WAL flush, so under load it serialized every committing stage. Writers
-- without a local relay (other tools, manual inserts) still notify, and the relays'
-- one-second poll remains the backstop.
CREATE OR REPLACE FUNCTION outbox_notify() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF coalesce(current_setting('hermes.local_relay', true), '') <> 'on' THEN
        PERFORM pg_notify('hermes_outbox', '');
    END IF;
    RETURN NULL;
END $$;
