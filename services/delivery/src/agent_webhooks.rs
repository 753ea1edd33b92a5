//! The webhooks stage: wakes external agent runtimes (docs/agents.md, "Signed agent webhooks").
//!
//! Consumes `{ns}.webhooks`, where the router's outbox puts one `agent_wake` per
//! `webhook_deliveries` row. The agent's `webhook_url` is resolved and refused if it
//! reaches a non-public address the operator did not allowlist (`HERMES_WEBHOOK_ALLOW`);
//! the connection goes only to the addresses that were checked. The wake envelope is POSTed
//! with in-call retries, signed with the agent's secret (`X-Forge-*`, and Standard Webhooks
//! headers when the agent asked for them), with a fresh timestamp on every try. Every
//! attempt is recorded on the row; a 2xx marks the agent reachable in the transaction that
//! marks the row delivered. A failure goes to the queued retry schedule and ends parked in
//! `{ns}.webhooks.dead`, the row marked failed.

use std::time::Duration;

use anyhow::anyhow;
use chrono::Utc;
use hermes_bus::Stage;
use hermes_db::Transaction;
use hermes_db::webhook_deliveries::{self, FailedAttempt, WakeStatus, WakeTarget};
use hermes_net::failure::{FailureReason, scrub};
use hermes_net::guard::{AddressPolicy, shown};
use hermes_net::keyring::KeyRing;
use hermes_net::signing::{WakeSigning, wake_headers};
use hermes_runtime::Ctx;
use hermes_runtime::stage::{Handler, StageError};
use hermes_types::agent::EngagementMode;
use hermes_types::envelope::Envelope;
use hermes_types::model::AgentWake;
use reqwest::header::CONTENT_TYPE;
use serde_json::{Value, json};
use url::Url;

use crate::retry_policy::RetryPolicy;

/// Every wake request's deadline (the same 10 s as channel sends).
const HTTP_TIMEOUT: Duration = Duration::from_secs(10);
const USER_AGENT: &str = concat!("hermes-webhooks/", env!("CARGO_PKG_VERSION"));

/// Where refusals tell the operator to allowlist a host.
const ALLOW_SETTING: &str = "HERMES_WEBHOOK_ALLOW";

/// How the wake stage's metric names outcomes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Outcome {
    Delivered,
    Retried,
    Parked,
    Refused,
}

impl Outcome {
    const ALL: [Outcome; 4] = [
        Outcome::Delivered,
        Outcome::Retried,
        Outcome::Parked,
        Outcome::Refused,
    ];

    fn as_str(self) -> &'static str {
        match self {
            Outcome::Delivered => "delivered",
            Outcome::Retried => "retried",
            Outcome::Parked => "parked",
            Outcome::Refused => "refused",
        }
    }
}

/// A wake that reached the agent.
pub struct Delivered {
    tries: i32,
    status: i32,
}

/// A wake attempt that did not.
struct Failed {
    reason: FailureReason,
    tries: i32,
    status: Option<i32>,
    error: anyhow::Error,
}

impl Failed {
    fn before_sending(reason: FailureReason, error: anyhow::Error) -> Self {
        Self {
            reason,
            tries: 0,
            status: None,
            error,
        }
    }
}

/// The handler of `{ns}.webhooks`.
pub struct AgentWebhookStage {
    ctx: Ctx,
    policy: RetryPolicy,
    guard: AddressPolicy,
    ring: Option<KeyRing>,
}

impl AgentWebhookStage {
    pub fn new(ctx: Ctx) -> Self {
        // Every outcome's series starts at 0, so alerts on parked wakes see it from the start.
        for outcome in Outcome::ALL {
            ctx.metrics
                .delivery
                .webhooks
                .with_label_values(&[outcome.as_str()]);
        }
        let settings = &ctx.config.delivery;
        Self {
            policy: RetryPolicy {
                pauses: settings.send_pauses.clone(),
                max_retry_after: settings.max_retry_after,
                ..RetryPolicy::default()
            },
            guard: AddressPolicy::new(settings.webhook_allow.clone(), ALLOW_SETTING),
            ring: KeyRing::new(&ctx.config.router.secret_keys),
            ctx,
        }
    }

    async fn db(&self) -> Result<hermes_db::Client, StageError> {
        self.ctx
            .db
            .get()
            .await
            .map_err(|e| StageError::Transient(e.into()))
    }

    fn count(&self, outcome: Outcome) {
        self.ctx
            .metrics
            .delivery
            .webhooks
            .with_label_values(&[outcome.as_str()])
            .inc();
    }

    /// The delay before the next queued retry of a message on its `attempt`, or `None` when
    /// this failure parks it (the stage loop decides the same way from the same settings).
    fn next_delay(&self, attempt: u32, reason: FailureReason) -> Option<Duration> {
        if reason.is_permanent() {
            return None;
        }
        usize::try_from(attempt)
            .ok()
            .and_then(|i| self.ctx.config.bus.retry_delays.get(i))
            .copied()
    }

    /// One attempt: check the address, sign, POST with in-call retries.
    async fn attempt(
        &self,
        env: &Envelope,
        wake: &AgentWake,
        target: &WakeTarget,
    ) -> Result<Delivered, Failed> {
        let url = target
            .webhook_url
            .as_deref()
            .and_then(|u| Url::parse(u).ok())
            .filter(|u| matches!(u.scheme(), "http" | "https"))
            .ok_or_else(|| {
                Failed::before_sending(
                    FailureReason::InvalidRecipient,
                    anyhow!(
                        "agent {} has no valid http(s) webhook URL",
                        wake.profile_key
                    ),
                )
            })?;
        let secret = target
            .secret_sealed
            .as_deref()
            .and_then(|sealed| self.ring.as_ref()?.open(sealed))
            .ok_or_else(|| {
                Failed::before_sending(
                    FailureReason::Unauthorized,
                    anyhow!(
                        "the webhook secret of agent {} cannot be opened: HERMES_SECRET_KEYS lacks the key that sealed it",
                        wake.profile_key
                    ),
                )
            })?;
        // No redirects: a wake has nowhere else to go.
        let builder = self
            .guard
            .client_builder(&url, USER_AGENT)
            .await
            .map_err(|e| Failed::before_sending(e.failure_reason(), e.into()))?;
        let client = builder.timeout(HTTP_TIMEOUT).build().map_err(|e| {
            Failed::before_sending(FailureReason::NetworkTimeout, anyhow!("HTTP client: {e}"))
        })?;
        let body = serde_json::to_vec(&wake_body(env, wake, target))
            .map_err(|e| Failed::before_sending(FailureReason::InvalidRecipient, e.into()))?;
        let delivery_id = wake.delivery_id.to_string();
        let mut failures = 0i32;
        let sent = self
            .policy
            .send(
                || {
                    let signing = WakeSigning {
                        event: wake.event.as_str(),
                        delivery_id: &delivery_id,
                        timestamp: Utc::now().timestamp(),
                        standard: target.standard_webhooks,
                    };
                    let mut req = client
                        .post(url.clone())
                        .header(CONTENT_TYPE, "application/json");
                    for (name, value) in wake_headers(&secret, &signing, &body) {
                        req = req.header(name, value);
                    }
                    req.body(body.clone())
                },
                |_| failures += 1,
            )
            .await;
        match sent {
            Ok(resp) => Ok(Delivered {
                tries: failures + 1,
                status: i32::from(resp.status().as_u16()),
            }),
            Err(f) => Err(Failed {
                reason: f.reason,
                tries: i32::try_from(f.tries).unwrap_or(i32::MAX),
                status: f.status.map(|s| i32::from(s.as_u16())),
                error: anyhow!("POST {}: {f}", shown(&url)),
            }),
        }
    }
}

/// Who enforces an external run's tool policy, stated as it is (docs/agents.md,
/// "Engagement modes"): an external agent's tools run in its own runtime, so neither
/// Hermes layer sees, let alone refuses, its calls; `enforced` says what Hermes enforces.
fn enforcement_layers() -> Value {
    json!([
        {
            "kind": "hermes-router",
            "enforced": false,
            "detail": "the mode and allowlist are recorded on the run and sent here; the router never sees this runtime's tool calls",
        },
        {
            "kind": "hermes-host",
            "enforced": false,
            "detail": "this run's tools do not execute on Hermes hosts",
        },
        {
            "kind": "agent-runtime",
            "enforced": false,
            "detail": "not verified by Hermes: this runtime must apply engagement_mode and allowed_host_tools itself",
        },
    ])
}

/// The JSON a woken agent receives (docs/agents.md): what happened, to whom, in which workspace,
/// for which run, how it was chosen, and the run's engagement contract.
fn wake_body(env: &Envelope, wake: &AgentWake, target: &WakeTarget) -> Value {
    let restricted = wake.engagement_mode != EngagementMode::Execute;
    json!({
        "kind": wake.event,
        "deliveryId": wake.delivery_id,
        "workspace": {
            "id": target.workspace_id,
            "slug": target.workspace_slug,
            "name": target.workspace_name,
        },
        "agent": { "id": wake.agent_id, "profileKey": wake.profile_key },
        "run": {
            "id": env.run_id,
            "platform": wake.message.platform,
            "chatId": wake.message.chat_id,
            "senderId": wake.message.sender_id,
            "text": wake.message.text,
            "receivedAt": wake.message.received_at,
        },
        "dispatch": wake.dispatch,
        "engagement_mode": wake.engagement_mode,
        "forge_contract_version": wake.contract_version,
        "tool_allowlist": wake.tool_allowlist,
        "runtime_policy": {
            "contract_version": wake.contract_version,
            "engagement_mode": wake.engagement_mode,
            "allowed_host_tools": wake.tool_allowlist,
            "restricted": restricted,
            "enforcement_layers": enforcement_layers(),
        },
    })
}

impl Handler for AgentWebhookStage {
    const STAGE: Stage = Stage::Webhooks;
    type Prepared = Delivered;
    type After = ();

    async fn prepare(&self, env: &Envelope) -> Result<Delivered, StageError> {
        let wake: AgentWake = env.payload()?;
        // No pooled connection is held across the HTTP send (up to a minute with retries).
        let target = {
            let client = self.db().await?;
            webhook_deliveries::target(&client, wake.delivery_id).await?
        };
        let Some(target) = target else {
            return Err(StageError::Poison(anyhow!(
                "no webhook_deliveries row {} for this wake",
                wake.delivery_id
            )));
        };
        if target.status == WakeStatus::Delivered {
            return Err(StageError::Duplicate("the wake was delivered already"));
        }
        let failed = match self.attempt(env, &wake, &target).await {
            Ok(delivered) => return Ok(delivered),
            Err(f) => f,
        };
        let delay = self.next_delay(env.attempt, failed.reason);
        let error = scrub(&format!("{:#}", failed.error));
        webhook_deliveries::record_failure(
            &self.db().await?,
            wake.delivery_id,
            &FailedAttempt {
                tries: failed.tries,
                status_code: failed.status,
                error: &error,
                next_attempt_at: delay
                    .and_then(|d| chrono::Duration::from_std(d).ok())
                    .map(|d| Utc::now() + d),
            },
        )
        .await?;
        let outcome = match (failed.reason, delay) {
            (FailureReason::AddressRefused, _) => Outcome::Refused,
            (_, Some(_)) => Outcome::Retried,
            (_, None) => Outcome::Parked,
        };
        self.count(outcome);
        tracing::warn!(
            agent = wake.profile_key,
            reason = %failed.reason,
            outcome = outcome.as_str(),
            error = %error,
            "agent wake not delivered"
        );
        Err(StageError::Retry {
            reason: failed.reason,
            error: failed.error,
        })
    }

    async fn commit(
        &self,
        env: &Envelope,
        delivered: Delivered,
        tx: &Transaction<'_>,
    ) -> Result<(Vec<Envelope>, ()), StageError> {
        let wake: AgentWake = env.payload()?;
        webhook_deliveries::record_delivered(
            tx,
            wake.delivery_id,
            delivered.tries,
            delivered.status,
        )
        .await?;
        Ok((Vec::new(), ()))
    }

    async fn after_commit(&self, env: &Envelope, _: ()) {
        self.count(Outcome::Delivered);
        tracing::info!(run = %env.run_id, "agent woken");
    }
}

#[cfg(test)]
mod tests {
    use hermes_types::agent::{Dispatch, DispatchMode};
    use hermes_types::ids::{AgentId, DeliveryId, RunId, WorkspaceId};
    use hermes_types::model::{MessageEvent, Platform};

    use super::*;

    #[test]
    fn the_wake_body_carries_seed_000s_envelope() {
        let wake = AgentWake {
            delivery_id: DeliveryId::new(),
            agent_id: AgentId::new(),
            profile_key: "victor".into(),
            event: hermes_types::agent::WakeEvent::AgentAssigned,
            dispatch: Dispatch {
                mode: DispatchMode::RoundRobin,
                chosen: "victor".into(),
                reason: "round-robin".into(),
            },
            engagement_mode: EngagementMode::Review,
            contract_version: "2026-06-06.2".into(),
            tool_allowlist: Vec::new(),
            message: MessageEvent {
                platform: Platform::Rest,
                sender_id: "u1".into(),
                chat_id: "c1".into(),
                text: Some("review AXI-42".into()),
                media: Vec::new(),
                external_message_id: None,
                sender_name: None,
                received_at: Utc::now(),
                metadata: None,
            },
        };
        let target = WakeTarget {
            status: WakeStatus::Pending,
            attempts: 0,
            agent_id: wake.agent_id,
            webhook_url: None,
            secret_sealed: None,
            standard_webhooks: false,
            workspace_id: WorkspaceId::new(),
            workspace_slug: "axiom".into(),
            workspace_name: "Axiom".into(),
        };
        let env = Envelope::new(RunId::new(), None, &wake);
        let body = wake_body(&env, &wake, &target);
        assert_eq!(body["kind"], "AGENT_ASSIGNED");
        assert_eq!(body["workspace"]["slug"], "axiom");
        assert_eq!(body["agent"]["profileKey"], "victor");
        assert_eq!(body["run"]["id"], json!(env.run_id));
        assert_eq!(body["dispatch"]["mode"], "ROUND_ROBIN");
        assert_eq!(body["dispatch"]["reason"], "round-robin");
        assert_eq!(body["engagement_mode"], "REVIEW");
        assert_eq!(body["runtime_policy"]["contract_version"], "2026-06-06.2");
        assert_eq!(body["runtime_policy"]["allowed_host_tools"], json!([]));
        // Hermes runs none of an external agent's tools: it claims no enforcement.
        let layers = body["runtime_policy"]["enforcement_layers"]
            .as_array()
            .unwrap();
        assert!(!layers.is_empty());
        assert!(layers.iter().all(|l| l["enforced"] == false), "{layers:?}");
        assert!(layers.iter().any(|l| l["kind"] == "agent-runtime"));
    }
}
