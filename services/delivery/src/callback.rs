//! REST callbacks (docs/api.md, callbacks): a run's outcome POSTed to the callback URL of the
//! key that sent it, signed with that key's own secret in the Standard Webhooks scheme
//! (`webhook-id` is the reply's message id, the same on every retry; `webhook-timestamp` is
//! fresh on every try). The URL is the key owner's choice, so it goes through the SSRF guard
//! like an agent wake: refused when any address of the host is not public and not
//! allowlisted (`HERMES_CALLBACK_ALLOW`), connected only to the checked addresses, and never
//! redirected. A callback that cannot be signed (the key has no secret, or
//! HERMES_SECRET_KEYS cannot open it) is not sent unsigned: it fails for good and is parked
//! with its reason.

use std::time::Duration;

use anyhow::anyhow;
use chrono::Utc;
use hermes_channels::RetryPolicy;
use hermes_db::api_keys;
use hermes_net::failure::FailureReason;
use hermes_net::guard::{AddressPolicy, shown};
use hermes_net::keyring::KeyRing;
use hermes_net::signing::standard_headers;
use hermes_runtime::Ctx;
use hermes_runtime::stage::StageError;
use hermes_types::envelope::Envelope;
use hermes_types::model::Outcome;
use reqwest::header::CONTENT_TYPE;
use serde_json::json;
use url::Url;

/// Every callback request's deadline (the same 10 s as channel sends).
const HTTP_TIMEOUT: Duration = Duration::from_secs(10);
const USER_AGENT: &str = concat!("hermes-callbacks/", env!("CARGO_PKG_VERSION"));

/// Where refusals tell the operator to allowlist a host.
const ALLOW_SETTING: &str = "HERMES_CALLBACK_ALLOW";

/// Sends REST callbacks.
pub struct Callbacks {
    ctx: Ctx,
    guard: AddressPolicy,
    ring: Option<KeyRing>,
    policy: RetryPolicy,
}

/// A failure before anything was sent, for the queued retry schedule (or parking).
fn refused(reason: FailureReason, error: anyhow::Error) -> StageError {
    StageError::Retry { reason, error }
}

impl Callbacks {
    pub fn new(ctx: Ctx, policy: RetryPolicy) -> Self {
        Self {
            guard: AddressPolicy::new(ctx.config.delivery.callback_allow.clone(), ALLOW_SETTING),
            ring: KeyRing::new(&ctx.config.router.secret_keys),
            policy,
            ctx,
        }
    }

    /// The signing secret of the key that sent `env`'s run, and the caller's message id.
    async fn secret(&self, env: &Envelope) -> Result<(Vec<u8>, Option<String>), StageError> {
        let client = self.ctx.db.get().await?;
        let of = api_keys::callback_of_run(&client, env.run_id).await?;
        let sealed = of.sealed_secret.ok_or_else(|| {
            refused(
                FailureReason::Unauthorized,
                anyhow!(
                    "the run's API key has no callback signing secret; give it one with \
                     `hermes api-keys rotate-secret`"
                ),
            )
        })?;
        let secret = self
            .ring
            .as_ref()
            .and_then(|ring| ring.open(&sealed))
            .ok_or_else(|| {
                refused(
                    FailureReason::Unauthorized,
                    anyhow!(
                        "the callback signing secret cannot be opened: HERMES_SECRET_KEYS lacks \
                         the key that sealed it"
                    ),
                )
            })?;
        Ok((secret, of.message_id))
    }

    /// POST `outcome` to `url`, signed, through the guard; `on_failure` counts each failed try.
    pub async fn send(
        &self,
        env: &Envelope,
        url: &str,
        outcome: &Outcome,
        mut on_failure: impl FnMut(FailureReason),
    ) -> Result<(), StageError> {
        let url = Url::parse(url)
            .ok()
            .filter(|u| matches!(u.scheme(), "http" | "https"))
            .ok_or_else(|| {
                refused(
                    FailureReason::InvalidRecipient,
                    anyhow!("the callback URL is not an http(s) URL"),
                )
            })?;
        let (secret, message_id) = self.secret(env).await?;
        let builder = self
            .guard
            .client_builder(&url, USER_AGENT)
            .await
            .map_err(|e| {
                let reason = e.failure_reason();
                on_failure(reason);
                refused(reason, e.into())
            })?;
        let client = builder
            .timeout(HTTP_TIMEOUT)
            .build()
            .map_err(|e| refused(FailureReason::NetworkTimeout, anyhow!("HTTP client: {e}")))?;
        let body = serde_json::to_vec(
            &json!({ "run_id": env.run_id, "message_id": message_id, "outcome": outcome }),
        )
        .map_err(|e| StageError::Poison(e.into()))?;
        let id = env.id.to_string();
        let resp = self
            .policy
            .send(
                || {
                    let mut req = client
                        .post(url.clone())
                        .header(CONTENT_TYPE, "application/json")
                        .header("x-hermes-run-id", env.run_id.to_string());
                    for (name, value) in
                        standard_headers(&secret, &id, Utc::now().timestamp(), &body)
                    {
                        req = req.header(name, value);
                    }
                    req.body(body.clone())
                },
                &mut on_failure,
            )
            .await
            .map_err(|f| StageError::Retry {
                reason: f.reason,
                error: anyhow!("POST {}: {f}", shown(&url)),
            })?;
        // A redirect is not followed (its target would need the same check, and the signed
        // body would go where the key's owner did not register): the URL needs fixing.
        if resp.status().is_redirection() {
            on_failure(FailureReason::InvalidRecipient);
            return Err(refused(
                FailureReason::InvalidRecipient,
                anyhow!(
                    "POST {}: answered {} (a redirect; callbacks do not follow redirects)",
                    shown(&url),
                    resp.status()
                ),
            ));
        }
        Ok(())
    }
}
