//! Why an outbound send failed (docs/channels.md, "Failure reasons"), classified once from what
//! the peer answered so the retry schedule, the breaker, the parking header and the
//! metrics all speak the same words.

use std::fmt;

use reqwest::StatusCode;
use serde::{Deserialize, Serialize};

/// The class of a failed outbound request.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FailureReason {
    /// 429: the peer asked us to slow down.
    RateLimited,
    /// No answer in time, or the connection could not be made.
    NetworkTimeout,
    /// 5xx (and 408): the peer is having trouble; worth retrying later.
    ServiceUnavailable,
    /// 401 / 403: our credentials are wrong; retrying will not help.
    Unauthorized,
    /// Any other 4xx: the request itself (recipient, payload) is refused for good.
    InvalidRecipient,
    /// The platform's circuit breaker is open: the send was not attempted.
    BreakerOpen,
    /// The URL resolves to a non-public address that is not allowlisted (server-side
    /// request forgery guard): nothing was sent, and nothing will be until it is allowed.
    AddressRefused,
    /// No sender is configured for the platform (its credentials are not set): the reply is
    /// parked, to be replayed (`hermes dlq replay --reason no_sender`) once they are.
    NoSender,
    /// WhatsApp's 24-hour customer-service window is closed and no template is configured
    /// for sends outside it (or Meta said so: error 131047): free text would be refused.
    /// Parked, to be replayed once the user writes again or a template is configured.
    OutsideWindow,
    /// The person opted out of messages (an SMS `STOP`, or Twilio's error 21610): nothing
    /// is sent to them until they opt in again (`START`). Parked, never retried.
    OptedOut,
}

impl FailureReason {
    pub const ALL: [FailureReason; 10] = [
        FailureReason::RateLimited,
        FailureReason::NetworkTimeout,
        FailureReason::ServiceUnavailable,
        FailureReason::Unauthorized,
        FailureReason::InvalidRecipient,
        FailureReason::BreakerOpen,
        FailureReason::AddressRefused,
        FailureReason::NoSender,
        FailureReason::OutsideWindow,
        FailureReason::OptedOut,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            FailureReason::RateLimited => "rate_limited",
            FailureReason::NetworkTimeout => "network_timeout",
            FailureReason::ServiceUnavailable => "service_unavailable",
            FailureReason::Unauthorized => "unauthorized",
            FailureReason::InvalidRecipient => "invalid_recipient",
            FailureReason::BreakerOpen => "breaker_open",
            FailureReason::AddressRefused => "address_refused",
            FailureReason::NoSender => "no_sender",
            FailureReason::OutsideWindow => "outside_window",
            FailureReason::OptedOut => "opted_out",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|r| r.as_str() == s)
    }

    /// A failure no later attempt can fix: the message is parked at once.
    pub fn is_permanent(self) -> bool {
        matches!(
            self,
            FailureReason::Unauthorized
                | FailureReason::InvalidRecipient
                | FailureReason::AddressRefused
                | FailureReason::NoSender
                | FailureReason::OutsideWindow
                | FailureReason::OptedOut
        )
    }

    /// Whether this failure says something about the platform's health (counts towards its
    /// breaker). A refused recipient or a skipped send does not.
    pub fn counts_against_platform(self) -> bool {
        matches!(
            self,
            FailureReason::NetworkTimeout | FailureReason::ServiceUnavailable
        )
    }

    /// The class of a non-success HTTP status; `None` for 1xx–3xx.
    pub fn from_status(status: StatusCode) -> Option<Self> {
        match status.as_u16() {
            429 => Some(FailureReason::RateLimited),
            401 | 403 => Some(FailureReason::Unauthorized),
            // A request timeout is the peer's trouble, not a refusal of this request.
            408 => Some(FailureReason::ServiceUnavailable),
            400..=499 => Some(FailureReason::InvalidRecipient),
            500..=599 => Some(FailureReason::ServiceUnavailable),
            _ => None,
        }
    }

    /// The class of a request that got no HTTP answer (or whose answer was unreadable).
    pub fn from_reqwest(e: &reqwest::Error) -> Self {
        match e.status() {
            Some(status) => Self::from_status(status).unwrap_or(FailureReason::ServiceUnavailable),
            // Timeouts, refused connections, resets and broken bodies: the network or the
            // peer is unwell, so all are worth another try.
            None => FailureReason::NetworkTimeout,
        }
    }
}

impl fmt::Display for FailureReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The longest failure detail kept on a parked message.
pub const MAX_DETAIL_CHARS: usize = 500;

/// `text` without credentials (`crate::redact`), safe for logs and message headers, cut to
/// [`MAX_DETAIL_CHARS`].
pub fn scrub(text: &str) -> String {
    let mut out = crate::redact::redact(text, &[]);
    if out.chars().count() > MAX_DETAIL_CHARS {
        out = out.chars().take(MAX_DETAIL_CHARS).collect();
        out.push('…');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statuses_are_classified_as_the_seed_names_them() {
        let of = |n: u16| FailureReason::from_status(StatusCode::from_u16(n).unwrap());
        assert_eq!(of(200), None);
        assert_eq!(of(304), None);
        assert_eq!(of(429), Some(FailureReason::RateLimited));
        assert_eq!(of(401), Some(FailureReason::Unauthorized));
        assert_eq!(of(403), Some(FailureReason::Unauthorized));
        assert_eq!(of(400), Some(FailureReason::InvalidRecipient));
        assert_eq!(of(404), Some(FailureReason::InvalidRecipient));
        assert_eq!(of(408), Some(FailureReason::ServiceUnavailable));
        assert_eq!(of(500), Some(FailureReason::ServiceUnavailable));
        assert_eq!(of(503), Some(FailureReason::ServiceUnavailable));
    }

    #[test]
    fn only_refusals_of_the_request_are_permanent() {
        let permanent: Vec<_> = FailureReason::ALL
            .into_iter()
            .filter(|r| r.is_permanent())
            .collect();
        assert_eq!(
            permanent,
            [
                FailureReason::Unauthorized,
                FailureReason::InvalidRecipient,
                FailureReason::AddressRefused,
                FailureReason::NoSender,
                FailureReason::OutsideWindow,
                FailureReason::OptedOut
            ]
        );
        for r in FailureReason::ALL {
            assert_eq!(FailureReason::parse(r.as_str()), Some(r));
            assert_eq!(
                serde_json::to_value(r).unwrap(),
                serde_json::json!(r.as_str())
            );
        }
    }

    #[tokio::test]
    async fn a_refused_connection_is_a_network_failure() {
        crate::install_crypto_provider();
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let e = reqwest::Client::new()
            .get(format!("http://127.0.0.1:{port}/"))
            .send()
            .await
            .unwrap_err();
        assert_eq!(
            FailureReason::from_reqwest(&e),
            FailureReason::NetworkTimeout
        );
    }

    #[test]
    fn secrets_are_scrubbed_from_details() {
        let text = "error sending request for url (https://api.telegram.org/bot123456:AA-secret_x/sendMessage): 503; \
                    https://graph.facebook.com/v21.0/me/messages?access_token=EAAG123&x=1 Bearer sk-live-1 key=abc";
        let clean = scrub(text);
        for secret in ["AA-secret_x", "EAAG123", "sk-live-1", "abc"] {
            assert!(!clean.contains(secret), "{secret} leaked: {clean}");
        }
        assert!(
            clean.contains("/bot123456:[redacted]/sendMessage"),
            "{clean}"
        );
        assert!(clean.contains("access_token=[redacted]&x=1"), "{clean}");
        assert!(!scrub("D360-API-KEY: k3y-value-123").contains("k3y-value"));
        let long = "é".repeat(2 * MAX_DETAIL_CHARS);
        assert_eq!(scrub(&long).chars().count(), MAX_DETAIL_CHARS + 1);
    }
}
