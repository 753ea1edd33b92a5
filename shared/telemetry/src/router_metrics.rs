//! The metrics of the router's steps: what it decided per message, bursts, chat platforms'
//! files, credits, the soul and semantic recall, tool gating, dispatch and memory extraction
//! (docs/models-and-budgets.md, "What the model is given: the routing pipeline").

use prometheus::{Histogram, IntCounter, IntCounterVec, Registry};

use crate::metrics::{LATENCY, counter, counter_vec, histogram};

/// The router's metric handles.
#[derive(Clone)]
pub struct RouterMetrics {
    /// Inbound messages by what the router did.
    pub decisions: IntCounterVec,
    /// Chat messages held in a burst's quiet window, and bursts routed as one turn.
    pub bursts: IntCounterVec,
    /// Chat platforms' files fetched (router: voice notes; llm: photos) or refused, by
    /// platform, media kind and outcome (docs/channels.md, "Media").
    pub media_fetches: IntCounterVec,
    /// Credit movements made by the fleet, by reason.
    pub credits: IntCounterVec,
    /// Soul base-prompt lookups by result.
    pub soul_cache: IntCounterVec,
    /// Time to build the system prompt of one message, semantic recall included.
    pub soul_load_duration: Histogram,
    /// Messages whose embedding and recall were skipped because they were trivial.
    pub semantic_recall_skipped_trivial: IntCounter,
    /// Semantic recall attempts by result.
    pub semantic_recall: IntCounterVec,
    /// Estimated prompt tokens of tool schemas that tool gating kept out of a call.
    pub tool_schema_tokens_saved: IntCounter,
    /// Runs by how their agent was chosen and agent kind.
    pub dispatches: IntCounterVec,
    /// Memory extraction after an exchange, by outcome.
    pub memory_extractions: IntCounterVec,
    /// The dreaming engine's weeks, by outcome (docs/models-and-budgets.md).
    pub dreams: IntCounterVec,
    /// Tokens the dreaming engine's calls used, by direction.
    pub dream_tokens: IntCounterVec,
    /// Proxy mode: forwards to the upstream Hermes, by outcome (docs/api.md, "Proxy mode").
    pub proxy_forwards: IntCounterVec,
    /// Proxy mode: answers taken back at `/proxy/replies`, by outcome.
    pub proxy_replies: IntCounterVec,
}

impl RouterMetrics {
    /// Register the router's metrics in `r`.
    pub fn register(r: &Registry) -> Self {
        Self {
            decisions: counter_vec(
                r,
                "hermes_router_decisions_total",
                "Inbound messages by what the router did: routed, external (an agent woken), forge (a Forge wake), signup, upgrade, media_refused (a file the model cannot use), duplicate.",
                &["decision"],
            ),
            bursts: counter_vec(
                r,
                "hermes_router_bursts_total",
                "Bursts of chat messages: messages held in a quiet window (held) and bursts routed as one turn (routed).",
                &["outcome"],
            ),
            media_fetches: counter_vec(
                r,
                "hermes_media_fetch_total",
                "Files of chat platforms fetched for the model or refused, by platform, kind and outcome (ok, transcribed, refused, too_large, wrong_type, timeout, unavailable, address_refused, no_credentials, unsupported, not_configured, transcription_failed).",
                &["platform", "kind", "outcome"],
            ),
            credits: counter_vec(
                r,
                "hermes_credits_total",
                "Credit movements made by the fleet, by reason (charge, refund).",
                &["reason"],
            ),
            soul_cache: counter_vec(
                r,
                "hermes_soul_cache_total",
                "Soul base-prompt lookups by result: hit, miss, error (Redis down: built from PostgreSQL).",
                &["result"],
            ),
            soul_load_duration: histogram(
                r,
                "hermes_soul_load_duration_seconds",
                "Time to build the system prompt of one message, semantic recall included.",
                LATENCY,
            ),
            semantic_recall_skipped_trivial: counter(
                r,
                "hermes_semantic_recall_skipped_trivial_total",
                "Messages whose embedding and recall were skipped because they were trivial.",
            ),
            semantic_recall: counter_vec(
                r,
                "hermes_semantic_recall_total",
                "Semantic recall attempts by result: used, empty, off (no endpoint), failed (message went on without it).",
                &["result"],
            ),
            tool_schema_tokens_saved: counter(
                r,
                "hermes_tool_schema_tokens_saved_total",
                "Estimated prompt tokens of tool schemas not sent because tool gating pruned them.",
            ),
            dispatches: counter_vec(
                r,
                "hermes_dispatches_total",
                "Runs by how their agent was chosen (ASSIGNED, MENTION, ROUND_ROBIN, DEFAULT) and agent kind.",
                &["mode", "kind"],
            ),
            memory_extractions: counter_vec(
                r,
                "hermes_memory_extractions_total",
                "Memory extraction after an exchange, by outcome (saved, none, failed).",
                &["outcome"],
            ),
            dreams: counter_vec(
                r,
                "hermes_dreams_total",
                "The dreaming engine's user weeks by outcome: queued (by the router), written (an insight saved), empty (the model found nothing to say), failed (the call failed, timed out or was refused on the user's budget).",
                &["outcome"],
            ),
            dream_tokens: counter_vec(
                r,
                "hermes_dream_tokens_total",
                "Tokens the dreaming engine's model calls used, by direction (input, output).",
                &["direction"],
            ),
            proxy_forwards: counter_vec(
                r,
                "hermes_proxy_forwards_total",
                "Proxy mode: each try to forward a message upstream, by outcome (accepted, duplicate, retried: the upstream was unreachable or busy, refused: it refused the message for good).",
                &["outcome"],
            ),
            proxy_replies: counter_vec(
                r,
                "hermes_proxy_replies_total",
                "Proxy mode: answers the upstream posted back to /proxy/replies, by outcome (queued for delivery, or the error code it was refused with).",
                &["outcome"],
            ),
        }
    }
}
