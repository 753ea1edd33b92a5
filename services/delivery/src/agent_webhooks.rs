//! The webhooks stage: wakes external agent runtimes (docs/agents.md, "Signed agent webhooks").
//!
//! Consumes `{ns}.webhooks`, where the router's outbox puts one `agent_wake` per
//! `webhook_deliveries` row. The agent's `webhook_url` is resolved and refused if it
//! reaches a non-public address the operator did not allowlist (`HERMES_WEBHOOK_ALLOW`);
//! the connection goes only to the addresses that were checked. The wake envelope
//! ([`crate::wake_envelope`]) is POSTed with in-call retries, signed with the agent's secret,
//! else its workspace's synthetic secret (`X-Forge-*`, and Standard Webhooks headers when the
//! agent asked for them), with a fresh timestamp on every try. Every
//! attempt is recorded on the row; a 2xx marks the agent reachable in the transaction that
//! marks the row delivered. A failure goes to the queued retry schedule and ends parked in
//! `{ns}.webhooks.dead`, the row marked failed; the parked wake's run is left to its reply
//! deadline (`on_parked`).

use std::time::Duration;

use anyhow::anyhow;
use chrono::Utc;
use hermes_bus::Stage;
use hermes_channels::RetryPolicy;
use hermes_db::Transaction;
use hermes_db::runs::close::{self, Unwoken};
use hermes_db::webhook_deliveries::{self, FailedAttempt, WakeStatus, WakeTarget};
use hermes_net::failure::{FailureReason, scrub};
use hermes_net::guard::{AddressPolicy, shown};
use hermes_net::keyring::KeyRing;
use hermes_net::signing::{WakeSigning, wake_headers};
use hermes_runtime::Ctx;
use hermes_runtime::stage::{Handler, ParkCause, StageError};
use hermes_types::envelope::Envelope;
use hermes_types::model::AgentWake;
use reqwest::header::CONTENT_TYPE;
use url::Url;

use crate::wake_envelope::wake_body;

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
        // The agent's own secret if it has one, else its workspace's synthetic secret.
        let (sealed, whose) = match (&target.secret_sealed, &target.workspace_secret_sealed) {
            (Some(own), _) => (own, "the webhook secret of agent"),
            (None, Some(workspace)) => (workspace, "the workspace signing secret of agent"),
            (None, None) => {
                return Err(Failed::before_sending(
                    FailureReason::Unauthorized,
                    anyhow!(
                        "agent {} has no webhook secret and its workspace none: `hermes workspaces signing-secret --workspace {}` makes one",
                        wake.profile_key,
                        target.workspace_slug
                    ),
                ));
            }
        };
        let secret = self
            .ring
            .as_ref()
            .and_then(|ring| ring.open(sealed))
            .ok_or_else(|| {
                Failed::before_sending(
                    FailureReason::Unauthorized,
                    anyhow!(
                        "{whose} {} cannot be opened: HERMES_SECRET_KEYS lacks the key that sealed it",
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

    /// A wake that could not be delivered is only a nudge: a run waiting for its external
    /// agent until a reply deadline stays in the agent's inbox, and the deadline ends it if
    /// the agent does not pull it (docs/agents.md, "When an external run ends"). A run with
    /// no deadline (dispatched by an older build) is closed as failed and refunded.
    async fn on_parked(&self, env: &Envelope, _cause: ParkCause) -> anyhow::Result<Vec<Envelope>> {
        match close::unwoken(&self.ctx.db, env).await? {
            Unwoken::AwaitsDeadline(deadline) => {
                tracing::warn!(%deadline, "agent wake parked: the run stays in the agent's inbox until its reply deadline");
            }
            Unwoken::Closed(closed) if closed.closed => {
                tracing::warn!(
                    refunded = closed.refunded,
                    "agent wake parked: its run closed as failed"
                );
            }
            Unwoken::Closed(_) => {}
        }
        Ok(Vec::new())
    }
}
