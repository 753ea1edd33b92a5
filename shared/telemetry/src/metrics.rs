//! The Prometheus metrics of the fleet, in one registry per process (per test fleet in
//! tests, so parallel fleets never share counters). Names follow docs/architecture.md#12-observability.

use std::sync::Arc;

use crate::agent_metrics::AgentMetrics;

use prometheus::{
    CounterVec, Encoder, Gauge, GaugeVec, Histogram, HistogramOpts, HistogramVec, IntCounter,
    IntCounterVec, IntGauge, IntGaugeVec, Opts, Registry, TextEncoder,
};

/// Every metric a Hermes process exports. Cheap to clone (shared).
#[derive(Clone)]
pub struct Metrics(Arc<Inner>);

/// The metric handles; see the README's metrics list for what each one means.
pub struct Inner {
    pub registry: Registry,
    // HTTP (ingest and admin).
    pub http_requests: IntCounterVec,
    pub http_duration: HistogramVec,
    pub ingest_messages: IntCounterVec,
    pub http_slow_clients: IntCounterVec,
    /// `Idempotency-Key` requests by outcome (docs/api.md, idempotency).
    pub idempotency: IntCounterVec,
    /// Requests waiting for the first request with their `Idempotency-Key` to answer.
    pub idempotency_waiting: IntGauge,
    // Retention.
    pub retention_removed: IntCounterVec,
    pub retention_sweeps: IntCounterVec,
    // Bus.
    pub bus_connected: IntGauge,
    pub bus_reconnects: IntCounter,
    pub bus_published: IntCounterVec,
    pub bus_publish_duration: Histogram,
    pub bus_messages: IntCounterVec,
    pub queue_messages: IntGaugeVec,
    pub queue_consumers: IntGaugeVec,
    // Stages.
    pub stage_duration: HistogramVec,
    pub commit_batch_size: HistogramVec,
    pub commit_batch_fallbacks: IntCounterVec,
    pub runs: IntCounterVec,
    pub runs_swept: IntCounter,
    // Scheduled jobs (docs/operations.md, scheduled jobs).
    pub jobs_due: IntGauge,
    pub jobs_runs: IntCounterVec,
    pub jobs_claim_lag: Histogram,
    pub held_messages: IntGaugeVec,
    pub dependency_up: IntGaugeVec,
    pub dependency_outages: IntCounterVec,
    // Outbox.
    /// Labelled `path`: `eager` or `swept` (docs/architecture.md#2-every-state-change-travels-with-its-message-the-outbox).
    pub outbox_published: IntCounterVec,
    pub outbox_publish_failures: IntCounter,
    pub outbox_lag: Gauge,
    // Redis.
    pub redis_errors: IntCounterVec,
    // LLM.
    pub llm_calls: IntCounterVec,
    pub llm_tokens: IntCounterVec,
    pub llm_cost: CounterVec,
    pub llm_cache_hits: IntCounterVec,
    pub llm_errors: IntCounterVec,
    pub llm_fallbacks: IntCounterVec,
    pub llm_duration: HistogramVec,
    pub llm_budget_rejections: IntCounterVec,
    pub llm_budget_fail_open: IntCounter,
    pub budget_fallback: IntCounterVec,
    pub llm_semaphore_wait: Histogram,
    pub llm_overhead: Histogram,
    pub llm_in_flight: IntGauge,
    pub llm_spend_cap: Gauge,
    pub llm_spend_today: Gauge,
    // Tools.
    pub tool_calls: IntCounterVec,
    pub tool_duration: HistogramVec,
    pub tool_refusals: IntCounterVec,
    pub tools_reloads: IntCounterVec,
    pub mcp_server_up: IntGaugeVec,
    // Delivery.
    pub deliveries: IntCounterVec,
    pub delivery_attempts: IntCounterVec,
    /// What the platforms reported about our sends (docs/channels.md, statuses), by platform
    /// and status; `accepted` counts the sends whose platform named the message.
    pub delivery_statuses: IntCounterVec,
    /// Parts a platform reported failed after accepting them, by platform and what followed
    /// (`resent`, `parked`, `unknown` for a send whose reply was not kept).
    pub delivery_late_failures: IntCounterVec,
    /// Chat messages held in a burst's quiet window, and bursts routed as one turn.
    pub bursts: IntCounterVec,
    pub delivery_breaker_open: IntGaugeVec,
    pub delivery_retries: IntCounterVec,
    pub parking_rejected: IntCounterVec,
    pub delivery_rate_wait: HistogramVec,
    /// Presence calls while a run answers a chat message (WhatsApp's read receipt with the
    /// typing indicator, Telegram's typing action), by platform and outcome (`sent`, `failed`).
    pub chat_presence: IntCounterVec,
    /// Agent wake webhooks by outcome: delivered, retried, parked, refused.
    pub webhook_deliveries: IntCounterVec,
    // Router.
    pub router_decisions: IntCounterVec,
    /// Chat platforms' files fetched (router: voice notes; llm: photos) or refused, by
    /// platform, media kind and outcome (docs/operations.md, media).
    pub media_fetches: IntCounterVec,
    pub credits: IntCounterVec,
    pub soul_cache: IntCounterVec,
    pub soul_load_duration: Histogram,
    pub semantic_recall_skipped_trivial: IntCounter,
    pub semantic_recall: IntCounterVec,
    pub tool_schema_tokens_saved: IntCounter,
    pub dispatches: IntCounterVec,
    pub memory_extractions: IntCounterVec,
    pub alerts: IntCounterVec,
    // Process.
    pub ready: GaugeVec,
    /// The agent contract (external runs, the MCP surface, Forge wakes).
    pub agents: AgentMetrics,
    /// The operator MCP server and tool approvals.
    pub operator: crate::OperatorMetrics,
    /// The limits that keep one caller from hurting another.
    pub limits: crate::LimitMetrics,
    /// Ingest's front door against strangers.
    pub front_door: crate::FrontDoorMetrics,
    /// Run event streams and late messages of closed runs.
    pub run_events: crate::RunMetrics,
}

impl std::ops::Deref for Metrics {
    type Target = Inner;
    fn deref(&self) -> &Inner {
        &self.0
    }
}

pub(crate) fn counter_vec(r: &Registry, name: &str, help: &str, labels: &[&str]) -> IntCounterVec {
    let m = IntCounterVec::new(Opts::new(name, help), labels).expect("valid metric");
    r.register(Box::new(m.clone()))
        .expect("metric registered once");
    m
}

pub(crate) fn histogram_vec(
    r: &Registry,
    name: &str,
    help: &str,
    labels: &[&str],
    buckets: Vec<f64>,
) -> HistogramVec {
    let m = HistogramVec::new(HistogramOpts::new(name, help).buckets(buckets), labels)
        .expect("valid metric");
    r.register(Box::new(m.clone()))
        .expect("metric registered once");
    m
}

fn gauge_vec(r: &Registry, name: &str, help: &str, labels: &[&str]) -> IntGaugeVec {
    let m = IntGaugeVec::new(Opts::new(name, help), labels).expect("valid metric");
    r.register(Box::new(m.clone()))
        .expect("metric registered once");
    m
}

/// Buckets for overheads measured in tens of microseconds to seconds.
const FINE: &[f64] = &[
    0.00005, 0.0001, 0.00025, 0.0005, 0.00075, 0.001, 0.0025, 0.005, 0.01, 0.05, 0.25, 1.0, 5.0,
    15.0,
];

/// Buckets for things measured in milliseconds to a minute.
const LATENCY: &[f64] = &[
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0,
    60.0,
];

impl Metrics {
    pub fn new() -> Self {
        let r = Registry::new();
        let lat = LATENCY.to_vec();
        let http_requests = counter_vec(
            &r,
            "hermes_http_requests_total",
            "HTTP requests served, by method, matched route and status code.",
            &["method", "route", "status"],
        );
        let http_duration = histogram_vec(
            &r,
            "hermes_http_request_duration_seconds",
            "Time to answer an HTTP request, by method and matched route.",
            &["method", "route"],
            lat.clone(),
        );
        let ingest_messages = counter_vec(
            &r,
            "hermes_ingest_messages_total",
            "Inbound messages by platform and outcome (accepted, or the error code they were refused with).",
            &["platform", "outcome"],
        );
        let http_slow_clients = counter_vec(
            &r,
            "hermes_http_slow_clients_total",
            "Connections cut because the client was too slow, by phase (body: sending a request body; write: taking an answer, past HERMES_HTTP_WRITE_TIMEOUT_SECS; a header block cut by its timeout closes the connection before a request exists).",
            &["phase"],
        );
        let idempotency = counter_vec(
            &r,
            "hermes_idempotency_total",
            "Requests with an Idempotency-Key, by outcome: stored, replayed, conflict, waited (a concurrent duplicate that waited for the first), in_use (it waited past its bound), released (the first failed before being accepted), unavailable (PostgreSQL unreachable: served without idempotency).",
            &["outcome"],
        );
        let idempotency_waiting = IntGauge::new(
            "hermes_idempotency_waiting",
            "Requests waiting for the first request with their Idempotency-Key to answer.",
        )
        .expect("valid metric");
        r.register(Box::new(idempotency_waiting.clone()))
            .expect("metric registered once");
        let retention_removed = counter_vec(
            &r,
            "hermes_retention_removed_total",
            "Rows the retention sweeper removed, by table (credit_ledger: rows folded into summaries).",
            &["table"],
        );
        let retention_sweeps = counter_vec(
            &r,
            "hermes_retention_sweeps_total",
            "Retention sweeps by outcome (done, yielded to another replica, failed).",
            &["outcome"],
        );
        let bus_connected =
            IntGauge::new("hermes_bus_connected", "1 while connected to RabbitMQ.").unwrap();
        r.register(Box::new(bus_connected.clone())).unwrap();
        let bus_reconnects = IntCounter::new(
            "hermes_bus_reconnects_total",
            "Successful reconnections to RabbitMQ after a lost connection.",
        )
        .unwrap();
        r.register(Box::new(bus_reconnects.clone())).unwrap();
        let bus_published = counter_vec(
            &r,
            "hermes_bus_published_total",
            "Publishes by target queue and outcome (confirmed, nacked, unroutable, error).",
            &["queue", "outcome"],
        );
        let bus_publish_duration = Histogram::with_opts(
            HistogramOpts::new(
                "hermes_bus_publish_duration_seconds",
                "Time from publish to broker confirm.",
            )
            .buckets(lat.clone()),
        )
        .unwrap();
        r.register(Box::new(bus_publish_duration.clone())).unwrap();
        let bus_messages = counter_vec(
            &r,
            "hermes_bus_messages_total",
            "Consumed messages by queue and outcome (acked, duplicate, requeued, rejected, parked, retry_scheduled; ack_lost when the ack could not be sent and the broker will redeliver).",
            &["queue", "outcome"],
        );
        let queue_messages = gauge_vec(
            &r,
            "hermes_queue_messages",
            "Messages ready in each queue (work and parking), sampled.",
            &["queue"],
        );
        let queue_consumers = gauge_vec(
            &r,
            "hermes_queue_consumers",
            "Consumers attached to each work queue, sampled.",
            &["queue"],
        );
        let stage_duration = histogram_vec(
            &r,
            "hermes_stage_duration_seconds",
            "Time a stage spends on one message, from receipt to ack.",
            &["stage"],
            lat.clone(),
        );
        let commit_batch_size = histogram_vec(
            &r,
            "hermes_stage_commit_batch_size",
            "Messages committed together in one transaction (group commit), by stage.",
            &["stage"],
            vec![1.0, 2.0, 4.0, 8.0, 16.0, 32.0],
        );
        let commit_batch_fallbacks = counter_vec(
            &r,
            "hermes_stage_commit_batch_fallbacks_total",
            "Group commits rolled back (a duplicate, a failed message, a lock conflict) and redone one message at a time, by stage.",
            &["stage"],
        );
        let runs = counter_vec(
            &r,
            "hermes_runs_total",
            "Runs that reached a final status (completed, failed, cancelled), by platform.",
            &["platform", "status"],
        );
        let outbox_published = counter_vec(
            &r,
            "hermes_outbox_published_total",
            "Outbox rows published and marked, by path: eager (by the stage that committed them) or swept (by the relay).",
            &["path"],
        );
        // Both series exist from the start, so rate() sees the first of each.
        for path in ["eager", "swept"] {
            outbox_published.with_label_values(&[path]);
        }
        let outbox_publish_failures = IntCounter::new(
            "hermes_outbox_publish_failures_total",
            "Outbox rows whose publish failed and will be retried.",
        )
        .unwrap();
        r.register(Box::new(outbox_publish_failures.clone()))
            .unwrap();
        let outbox_lag = Gauge::new(
            "hermes_outbox_lag_seconds",
            "Age of the oldest unpublished outbox row (0 when none).",
        )
        .unwrap();
        r.register(Box::new(outbox_lag.clone())).unwrap();
        let runs_swept = IntCounter::new(
            "hermes_runs_swept_total",
            "Runs still open past HERMES_RUN_STUCK_AFTER_SECS that the router's sweeper ended (failed, refunded).",
        )
        .unwrap();
        r.register(Box::new(runs_swept.clone())).unwrap();
        let jobs_due = IntGauge::new(
            "hermes_jobs_due",
            "Scheduled jobs due and not yet claimed, as a scheduler last counted them.",
        )
        .unwrap();
        r.register(Box::new(jobs_due.clone())).unwrap();
        let jobs_runs = counter_vec(
            &r,
            "hermes_jobs_runs_total",
            "Runs of scheduled jobs queued, by trigger (schedule, manual).",
            &["trigger"],
        );
        let jobs_claim_lag = Histogram::with_opts(
            HistogramOpts::new(
                "hermes_jobs_claim_lag_seconds",
                "Time from a job's due time to the scheduler claiming it.",
            )
            .buckets(lat.clone()),
        )
        .unwrap();
        r.register(Box::new(jobs_claim_lag.clone())).unwrap();
        let held_messages = gauge_vec(
            &r,
            "hermes_stage_held_messages",
            "Messages a stage holds unacked while a dependency they need is down (docs/operations.md).",
            &["stage", "dependency"],
        );
        let dependency_up = gauge_vec(
            &r,
            "hermes_dependency_up",
            "1 while this process reaches the dependency, 0 while it is down and probed.",
            &["dependency"],
        );
        let dependency_outages = counter_vec(
            &r,
            "hermes_dependency_outages_total",
            "Outages of a dependency seen by this process (each holds messages until it is back).",
            &["dependency"],
        );
        let redis_errors = counter_vec(
            &r,
            "hermes_redis_errors_total",
            "Redis calls that failed or timed out, by operation.",
            &["op"],
        );
        let llm_calls = counter_vec(
            &r,
            "hermes_llm_calls_total",
            "Successful model completions by backend and tier.",
            &["backend", "tier"],
        );
        let llm_tokens = counter_vec(
            &r,
            "hermes_llm_tokens_total",
            "Tokens consumed by backend and direction (input, output).",
            &["backend", "direction"],
        );
        let llm_cache_hits = counter_vec(
            &r,
            "hermes_llm_cache_hits_total",
            "Model answers served from the response cache, by backend and tier.",
            &["backend", "tier"],
        );
        let llm_errors = counter_vec(
            &r,
            "hermes_llm_errors_total",
            "Failed model calls by backend and reason (rate_limited, server_error, timeout, connect, rejected, malformed).",
            &["backend", "reason"],
        );
        let llm_fallbacks = counter_vec(
            &r,
            "hermes_llm_fallbacks_total",
            "Times a failed backend handed the call to the next one of the chain, by tier.",
            &["tier"],
        );
        let llm_duration = histogram_vec(
            &r,
            "hermes_llm_call_duration_seconds",
            "Time of one model call by backend.",
            &["backend"],
            lat.clone(),
        );
        let llm_budget_rejections = counter_vec(
            &r,
            "hermes_llm_budget_rejections_total",
            "Model calls refused before reaching a provider, by scope (user_daily, user_monthly, budget_unavailable, global_cap, killswitch, capacity, workspace_secrets).",
            &["scope"],
        );
        let llm_budget_fail_open = IntCounter::new(
            "hermes_llm_budget_fail_open_total",
            "Model calls let through because the global spend cap could not be read (Redis down).",
        )
        .unwrap();
        r.register(Box::new(llm_budget_fail_open.clone())).unwrap();
        let budget_fallback = counter_vec(
            &r,
            "hermes_budget_fallback_total",
            "Budget, spend and killswitch reads and writes served by PostgreSQL because Redis failed or had forgotten, by what (reserve, settle, spend, killswitch, used).",
            &["what"],
        );
        let llm_semaphore_wait = Histogram::with_opts(
            HistogramOpts::new(
                "hermes_llm_semaphore_wait_seconds",
                "Time a model call waited for one of the process's call slots.",
            )
            .buckets(FINE.to_vec()),
        )
        .unwrap();
        r.register(Box::new(llm_semaphore_wait.clone())).unwrap();
        let llm_overhead = Histogram::with_opts(
            HistogramOpts::new(
                "hermes_llm_overhead_seconds",
                "Time the llm gateway spent on a call beyond waiting on providers (budgets, cache, slots, encoding).",
            )
            .buckets(FINE.to_vec()),
        )
        .unwrap();
        r.register(Box::new(llm_overhead.clone())).unwrap();
        let llm_in_flight = IntGauge::new(
            "hermes_llm_in_flight",
            "Model calls holding a slot right now (at most [llm] max_concurrent per process).",
        )
        .unwrap();
        r.register(Box::new(llm_in_flight.clone())).unwrap();
        let llm_spend_cap = Gauge::new(
            "hermes_llm_spend_cap_usd",
            "LLM_GLOBAL_DAILY_BUDGET_USD in dollars; absent when no cap is set.",
        )
        .unwrap();
        let llm_spend_today = Gauge::new(
            "hermes_llm_spend_today_usd",
            "Today's (UTC) platform-wide model spend in dollars, as last read or written by this process.",
        )
        .unwrap();
        r.register(Box::new(llm_spend_today.clone())).unwrap();
        let tool_calls = counter_vec(
            &r,
            "hermes_tool_calls_total",
            "Tool calls by tool and outcome (ok, error, unknown_tool, timeout, refused).",
            &["tool", "outcome"],
        );
        let tool_duration = histogram_vec(
            &r,
            "hermes_tool_duration_seconds",
            "Time of one tool call by tool.",
            &["tool"],
            lat.clone(),
        );
        let tool_refusals = counter_vec(
            &r,
            "hermes_tool_refusals_total",
            "Tool calls refused, never executed, by reason: not offered to the run, its engagement mode, its allowlist.",
            &["reason"],
        );
        let tools_reloads = counter_vec(
            &r,
            "hermes_tools_reloads_total",
            "`hermes tools reload` requests this replica handled, by outcome (applied, invalid, no_config_file).",
            &["outcome"],
        );
        let mcp_server_up = gauge_vec(
            &r,
            "hermes_mcp_server_up",
            "1 while this replica has a live session with the MCP server, else 0.",
            &["server"],
        );
        let deliveries = counter_vec(
            &r,
            "hermes_deliveries_total",
            "Replies handed to their destination, by platform and outcome.",
            &["platform", "outcome"],
        );
        let webhook_deliveries = counter_vec(
            &r,
            "hermes_webhook_deliveries_total",
            "Agent wake webhooks by outcome (delivered, retried, parked, refused).",
            &["outcome"],
        );
        let delivery_attempts = counter_vec(
            &r,
            "hermes_delivery_attempts_total",
            "Failed outbound send attempts (each in-call try), by platform and failure reason.",
            &["platform", "reason"],
        );
        let delivery_statuses = counter_vec(
            &r,
            "hermes_delivery_statuses_total",
            "Statuses platforms reported for sent messages (accepted, sent, delivered, read, failed), by platform and status; each send's status counted once.",
            &["platform", "status"],
        );
        let delivery_late_failures = counter_vec(
            &r,
            "hermes_delivery_late_failures_total",
            "Sent messages a platform reported failed after accepting them, by platform and what followed (resent, parked, unknown).",
            &["platform", "outcome"],
        );
        let bursts = counter_vec(
            &r,
            "hermes_router_bursts_total",
            "Bursts of chat messages: messages held in a quiet window (held) and bursts routed as one turn (routed).",
            &["outcome"],
        );
        let delivery_breaker_open = gauge_vec(
            &r,
            "hermes_delivery_breaker_open",
            "1 while the platform's circuit breaker is open (sends skipped), else 0.",
            &["platform"],
        );
        let delivery_retries = counter_vec(
            &r,
            "hermes_delivery_retries_total",
            "Messages sent to wait before a queued retry, by stage and delay (wait-queue label).",
            &["stage", "delay"],
        );
        let parking_rejected = counter_vec(
            &r,
            "hermes_parking_rejected_total",
            "Messages a full parking queue refused (they stay where they were), by queue.",
            &["queue"],
        );
        let chat_presence = counter_vec(
            &r,
            "hermes_chat_presence_total",
            "Read receipts and typing indicators sent while a run answers, by platform and outcome (sent, failed).",
            &["platform", "outcome"],
        );
        let delivery_rate_wait = histogram_vec(
            &r,
            "hermes_delivery_rate_wait_seconds",
            "Time a send waited at the outbound rate gate, by platform.",
            &["platform"],
            lat.clone(),
        );
        let llm_cost = CounterVec::new(
            Opts::new(
                "hermes_llm_cost_usd_total",
                "Cost of successful model calls in US dollars, by backend and tier (failed attempts are not billed).",
            ),
            &["backend", "tier"],
        )
        .unwrap();
        r.register(Box::new(llm_cost.clone())).unwrap();
        let router_decisions = counter_vec(
            &r,
            "hermes_router_decisions_total",
            "Inbound messages by what the router did: routed, external (an agent woken), forge (a Forge wake), signup, upgrade, media_refused (a file the model cannot use), duplicate.",
            &["decision"],
        );
        let media_fetches = counter_vec(
            &r,
            "hermes_media_fetch_total",
            "Files of chat platforms fetched for the model or refused, by platform, kind and outcome (ok, transcribed, refused, too_large, wrong_type, timeout, unavailable, address_refused, no_credentials, unsupported, not_configured, transcription_failed).",
            &["platform", "kind", "outcome"],
        );
        let credits = counter_vec(
            &r,
            "hermes_credits_total",
            "Credit movements made by the fleet, by reason (charge, refund).",
            &["reason"],
        );
        let soul_cache = counter_vec(
            &r,
            "hermes_soul_cache_total",
            "Soul base-prompt lookups by result: hit, miss, error (Redis down: built from PostgreSQL).",
            &["result"],
        );
        let soul_load_duration = Histogram::with_opts(
            HistogramOpts::new(
                "hermes_soul_load_duration_seconds",
                "Time to build the system prompt of one message, semantic recall included.",
            )
            .buckets(lat.clone()),
        )
        .unwrap();
        r.register(Box::new(soul_load_duration.clone())).unwrap();
        let semantic_recall_skipped_trivial = IntCounter::new(
            "hermes_semantic_recall_skipped_trivial_total",
            "Messages whose embedding and recall were skipped because they were trivial.",
        )
        .unwrap();
        r.register(Box::new(semantic_recall_skipped_trivial.clone()))
            .unwrap();
        let semantic_recall = counter_vec(
            &r,
            "hermes_semantic_recall_total",
            "Semantic recall attempts by result: used, empty, off (no endpoint), failed (message went on without it).",
            &["result"],
        );
        let tool_schema_tokens_saved = IntCounter::new(
            "hermes_tool_schema_tokens_saved_total",
            "Estimated prompt tokens of tool schemas not sent because tool gating pruned them.",
        )
        .unwrap();
        r.register(Box::new(tool_schema_tokens_saved.clone()))
            .unwrap();
        let dispatches = counter_vec(
            &r,
            "hermes_dispatches_total",
            "Runs by how their agent was chosen (ASSIGNED, MENTION, ROUND_ROBIN, DEFAULT) and agent kind.",
            &["mode", "kind"],
        );
        let memory_extractions = counter_vec(
            &r,
            "hermes_memory_extractions_total",
            "Memory extraction after an exchange, by outcome (saved, none, failed).",
            &["outcome"],
        );
        let alerts = counter_vec(
            &r,
            "hermes_alerts_total",
            "Conditions that page ops, by kind (breaker_open, parking_queue_growth, parking_queue_full, killswitch_on, soul_invalidation_failed).",
            &["kind"],
        );
        // Known kinds start at 0, so an alert on their increase sees the series before the first page.
        for kind in crate::AlertKind::ALL.map(crate::AlertKind::as_str) {
            alerts.with_label_values(&[kind]);
        }
        let ready = GaugeVec::new(
            Opts::new(
                "hermes_component_ready",
                "1 when a component of this process is ready.",
            ),
            &["component"],
        )
        .unwrap();
        r.register(Box::new(ready.clone())).unwrap();
        let agents = AgentMetrics::register(&r);
        let operator = crate::OperatorMetrics::register(&r);
        let limits = crate::LimitMetrics::register(&r);
        let front_door = crate::FrontDoorMetrics::register(&r);
        let run_events = crate::RunMetrics::register(&r);
        Self(Arc::new(Inner {
            registry: r,
            http_requests,
            http_duration,
            ingest_messages,
            http_slow_clients,
            idempotency,
            idempotency_waiting,
            retention_removed,
            retention_sweeps,
            bus_connected,
            bus_reconnects,
            bus_published,
            bus_publish_duration,
            bus_messages,
            queue_messages,
            queue_consumers,
            stage_duration,
            commit_batch_size,
            commit_batch_fallbacks,
            runs,
            runs_swept,
            jobs_due,
            jobs_runs,
            jobs_claim_lag,
            held_messages,
            dependency_up,
            dependency_outages,
            outbox_published,
            outbox_publish_failures,
            outbox_lag,
            redis_errors,
            llm_calls,
            llm_tokens,
            llm_cost,
            llm_cache_hits,
            llm_errors,
            llm_fallbacks,
            llm_duration,
            llm_budget_rejections,
            llm_budget_fail_open,
            budget_fallback,
            llm_semaphore_wait,
            llm_overhead,
            llm_in_flight,
            llm_spend_cap,
            llm_spend_today,
            tool_calls,
            tool_duration,
            tool_refusals,
            tools_reloads,
            mcp_server_up,
            router_decisions,
            media_fetches,
            credits,
            soul_cache,
            soul_load_duration,
            semantic_recall_skipped_trivial,
            semantic_recall,
            tool_schema_tokens_saved,
            dispatches,
            memory_extractions,
            alerts,
            deliveries,
            delivery_attempts,
            delivery_statuses,
            delivery_late_failures,
            bursts,
            delivery_breaker_open,
            delivery_retries,
            parking_rejected,
            delivery_rate_wait,
            chat_presence,
            webhook_deliveries,
            ready,
            agents,
            operator,
            limits,
            front_door,
            run_events,
        }))
    }

    /// Export the global daily spend cap as `hermes_llm_spend_cap_usd` (registered on the
    /// first call only: without a cap the gauge stays absent, so "spend near the cap" alerts
    /// have nothing to compare against rather than a misleading 0).
    pub fn set_spend_cap_usd(&self, cap_usd: f64) {
        // A second registration (a second Budgets in one process) is refused; the value is shared.
        let _ = self.registry.register(Box::new(self.llm_spend_cap.clone()));
        self.llm_spend_cap.set(cap_usd);
    }

    /// The Prometheus text exposition of every metric.
    pub fn render(&self) -> String {
        let mut buf = Vec::new();
        TextEncoder::new()
            .encode(&self.registry.gather(), &mut buf)
            .expect("text encoding never fails");
        String::from_utf8(buf).expect("prometheus text is UTF-8")
    }
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_follow_prometheus_conventions() {
        let m = Metrics::new();
        m.llm_calls.with_label_values(&["mock", "free"]).inc();
        m.http_requests
            .with_label_values(&["GET", "/health", "200"])
            .inc();
        let text = m.render();
        assert!(text.contains("hermes_llm_calls_total{backend=\"mock\",tier=\"free\"} 1"));
        assert!(text.contains("hermes_http_requests_total"));
        for family in m.registry.gather() {
            assert!(family.name().starts_with("hermes_"), "{}", family.name());
        }
    }

    #[test]
    fn the_spend_cap_is_exported_only_once_set() {
        let m = Metrics::new();
        assert!(!m.render().contains("hermes_llm_spend_cap_usd"));
        assert!(
            m.render()
                .contains("hermes_alerts_total{kind=\"soul_invalidation_failed\"} 0")
        );
        m.set_spend_cap_usd(250.5);
        m.set_spend_cap_usd(250.5);
        assert!(m.render().contains("hermes_llm_spend_cap_usd 250.5"));
    }
}
