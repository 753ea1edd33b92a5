-- The router's own PostgreSQL work for one message, as `hermes bench router --with-floor`
-- replays it through pgbench (docs/performance.md, Router). THESE STATEMENTS MUST FOLLOW THE
-- ROUTER'S: the prepare's reads (users::resolve_with_session, the session history) and the
-- commit's statements (the charge, the session, the dispatch check, the run with its
-- interaction, event and activity, the idempotency record with the outbox row), in the
-- order and transactions the router runs them with a warm soul, cached facts and a cached
-- tool catalog. When the router's statements change, capture them again (a scratch
-- database URL with `?options=-clog_statement%3Dall`, then the PostgreSQL log) and change
-- them here.
--
-- `{m}` is the message's place in its commit group of `{g}` (the generator repeats each
-- section per message); `:users` and `:body_len` come from pgbench's `-D`. A group's users
-- are distinct and ascending (message m picks from the m-th of g slices of the users), so
-- concurrent groups lock their rows in one order and never deadlock, as the router's group
-- commit orders its messages by user. Ids the router makes itself
-- are gen_random_uuid() here, taken with the first read so they cost no extra round trip.
-- The outbox row's stage is `floor` (the router writes `llm`) so that the bench's relay,
-- still running, does not publish these rows: the floor is PostgreSQL's work alone.
-- @prepare
\set u{m} random(1 + {m} * :users / {g}, ({m} + 1) * :users / {g})
SELECT u.id AS uid{m}, u.workspace_id AS wid{m}, u.display_name, u.tier, u.credits, u.referral_code,
       u.agent_id, u.created_at, c.activated, c.agent_id AS channel_agent_id,
       s.id AS sid{m}, s.last_activity_at,
       gen_random_uuid() AS rid{m}, gen_random_uuid() AS mid{m}, gen_random_uuid() AS oid{m}
  FROM user_channels c JOIN users u ON u.id = c.user_id
  LEFT JOIN LATERAL (SELECT id, last_activity_at FROM sessions
                     WHERE user_id = u.id AND platform = c.platform AND channel_id = 'bench-' || (:u{m})::text
                     ORDER BY last_activity_at DESC LIMIT 1) s ON true
 WHERE c.platform = 'rest' AND c.sender_id = 'bench-' || (:u{m})::text
   AND COALESCE(c.api_key_id, '00000000-0000-0000-0000-000000000000'::uuid)
     = COALESCE(NULL::uuid, '00000000-0000-0000-0000-000000000000'::uuid)
\gset
SELECT direction, text FROM (
    SELECT id, direction, text FROM interactions
    WHERE session_id = :sid{m} ORDER BY id DESC LIMIT 20
) recent ORDER BY id;
-- @commit
WITH u AS (SELECT id, credits FROM users WHERE id = :uid{m} FOR UPDATE),
     done AS (SELECT 1 FROM credit_ledger WHERE run_id = :rid{m} AND reason = 'charge'),
     upd AS (UPDATE users SET credits = users.credits - 1, updated_at = now()
             FROM u WHERE users.id = u.id AND u.credits >= 1
               AND NOT EXISTS (SELECT 1 FROM done)
             RETURNING users.credits),
     led AS (INSERT INTO credit_ledger (user_id, run_id, reason, delta, balance_after)
             SELECT :uid{m}, :rid{m}, 'charge', -1, credits FROM upd
             RETURNING balance_after)
SELECT u.credits, (SELECT balance_after FROM led), EXISTS (SELECT 1 FROM done)
FROM u;
UPDATE sessions SET last_activity_at = GREATEST(last_activity_at, now())
 WHERE id = (SELECT id FROM sessions
             WHERE user_id = :uid{m} AND platform = 'rest' AND channel_id = 'bench-' || (:u{m})::text
             ORDER BY last_activity_at DESC LIMIT 1)
   AND last_activity_at >= now() - interval '12 hours'
RETURNING id, started_at;
SELECT EXISTS (SELECT 1 FROM agents a WHERE a.workspace_id = :wid{m} AND a.status = 'ONLINE'
  AND (a.kind <> 'external' OR coalesce(a.last_heartbeat_at, a.created_at) >= now() - make_interval(secs => 900::float8))
  AND (cardinality(a.capabilities) = 0 OR '*' = ANY (a.capabilities) OR 'general' = ANY (a.capabilities)));
WITH r AS (INSERT INTO agent_runs (id, platform, sender_id, chat_id,
                                   external_message_id, status, tier, input_text, metadata,
                                   api_key_id, traceparent, user_id, agent_id, session_id, dispatch,
                                   engagement_mode, contract_version, credits_charged, provenance)
           VALUES (:rid{m}, 'rest', 'bench-' || (:u{m})::text, 'bench-' || (:u{m})::text, NULL, 'routed', 'free',
                   'find me a quiet sushi place near the beach', NULL, NULL, NULL, :uid{m}, NULL, :sid{m},
                   '{"mode": "DEFAULT", "chosen": "default", "reason": "no agents configured: default persona"}',
                   'EXECUTE', '2026-06-06.2', 1,
                   '{"tools": [], "intent": "general", "cost_usd": 0.0, "tokens_in": 0, "tokens_out": 0, "llm_backend": null, "soul_load_ms": 1, "tool_exec_ms": 0, "llm_cache_hit": false, "cost_micro_usd": 0, "schema_tokens_saved": 0, "semantic_recall_used": true}')
           ON CONFLICT DO NOTHING RETURNING id),
     i AS (INSERT INTO interactions (run_id, user_id, session_id, direction, text, meta)
           SELECT id, :uid{m}, :sid{m}, 'inbound', 'find me a quiet sushi place near the beach', '{"intent": "general"}' FROM r
           ON CONFLICT (run_id, direction) DO NOTHING
           RETURNING id, run_id, user_id, session_id, direction, text),
     e AS (INSERT INTO events (kind, workspace_id, platform, chat_id, session_id, run_id, body)
           SELECT 'message', u.workspace_id, s.platform, s.channel_id, l.session_id, l.run_id,
                  jsonb_build_object('direction', l.direction, 'message_id', l.id,
                    'user_id', l.user_id, 'text', left(l.text, 1000),
                    'truncated', length(l.text) > 1000)
           FROM i l JOIN sessions s ON s.id = l.session_id
           JOIN users u ON u.id = l.user_id),
     a AS (INSERT INTO activity_events (run_id, agent_id, user_id, kind, data)
           SELECT id, NULL, :uid{m}, 'run.dispatched',
                  '{"dispatch": {"mode": "DEFAULT", "chosen": "default", "reason": "no agents configured: default persona"}, "engagement_mode": "EXECUTE"}'
           FROM r)
SELECT count(*) FROM r;
WITH p AS (INSERT INTO processed_messages (consumer, message_id) VALUES ('router', :mid{m})
           ON CONFLICT DO NOTHING RETURNING 1),
     l AS (SELECT set_config('hermes.local_relay', CASE WHEN true THEN 'on' ELSE 'off' END, true) AS v),
     o AS (INSERT INTO outbox (message_id, stage, traceparent, body)
           SELECT * FROM UNNEST(ARRAY[:oid{m}]::uuid[], ARRAY['floor']::text[], ARRAY[NULL]::text[],
                                ARRAY[convert_to(repeat('x', :body_len), 'UTF8')]::bytea[])
           WHERE EXISTS (SELECT 1 FROM p) AND (SELECT v FROM l) IS NOT NULL
           RETURNING 1)
SELECT EXISTS (SELECT 1 FROM p), (SELECT count(*) FROM o);
