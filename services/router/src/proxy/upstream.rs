//! The upstream Hermes as proxy mode sees it (docs/api.md, "Proxy mode"): its REST channel,
//! `POST /v1/messages`, which takes each forwarded message once by its `message_id` (the
//! edge's run id) and posts the answer back to the key's callback URL, the edge's
//! `/proxy/replies`.

use std::time::Duration;

use hermes_config::ProxySettings;
use hermes_types::ids::RunId;
use hermes_types::model::Inbound;
use reqwest::StatusCode;
use secrecy::ExposeSecret;
use serde_json::{Value, json};

/// One try's deadline.
const TRY_TIMEOUT: Duration = Duration::from_secs(10);
/// The REST channel's longest `sender_id`.
const MAX_SENDER: usize = 128;

/// What one try to forward came to.
#[derive(Debug)]
pub enum Forward {
    /// The upstream took it now (`202`), or had taken it before (`200 duplicate`): its run id.
    Taken {
        upstream_run: Option<uuid::Uuid>,
        duplicate: bool,
    },
    /// Unreachable, busy (`429`) or failing (`5xx`): worth trying again, after `wait` when
    /// the upstream named it.
    Later { why: String, wait: Option<Duration> },
    /// Refused for good (`4xx`: a bad key, a message the REST channel cannot take).
    Refused(String),
}

/// The upstream's REST channel.
pub struct Upstream {
    http: reqwest::Client,
    url: String,
    key: String,
}

impl Upstream {
    pub fn new(settings: &ProxySettings) -> anyhow::Result<Self> {
        let http = reqwest::Client::builder()
            .timeout(TRY_TIMEOUT)
            .redirect(reqwest::redirect::Policy::none())
            .user_agent(concat!("hermes-proxy/", env!("CARGO_PKG_VERSION")))
            .build()?;
        let base = settings.url.as_str().trim_end_matches('/');
        Ok(Self {
            http,
            url: format!("{base}/v1/messages"),
            key: settings.key.expose_secret().to_string(),
        })
    }

    /// Try once to hand `inbound` (the edge's run `run`) to the upstream.
    pub async fn forward(&self, run: RunId, inbound: &Inbound) -> Forward {
        let Some(body) = body(run, inbound) else {
            return Forward::Refused(format!(
                "the sender id is longer than the REST channel's {MAX_SENDER} characters"
            ));
        };
        let resp = match self
            .http
            .post(&self.url)
            .bearer_auth(&self.key)
            .json(&body)
            .send()
            .await
        {
            Ok(resp) => resp,
            Err(e) => {
                return Forward::Later {
                    why: format!(
                        "upstream unreachable: {}",
                        hermes_net::failure::scrub(&e.to_string())
                    ),
                    wait: None,
                };
            }
        };
        let status = resp.status();
        let wait = resp
            .headers()
            .get(reqwest::header::RETRY_AFTER)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.trim().parse::<u64>().ok())
            .map(Duration::from_secs);
        let answer: Value = resp.json().await.unwrap_or_default();
        classify(status, &answer, wait)
    }
}

/// The REST message of `inbound`: the sender named with its platform (`telegram:4242`), so
/// one upstream key carries every platform of the edge; the edge's run id as `message_id`.
/// Media stay on the edge (their ids mean nothing upstream): a message without text says
/// what it carried.
fn body(run: RunId, inbound: &Inbound) -> Option<Value> {
    let event = &inbound.event;
    let sender = format!("{}:{}", event.platform.as_str(), event.sender_id);
    if sender.chars().count() > MAX_SENDER {
        return None;
    }
    let text = match event.text.as_deref().map(str::trim) {
        Some(t) if !t.is_empty() => t.to_string(),
        _ => {
            let kinds: Vec<&str> = event.media.iter().map(|m| m.kind.as_str()).collect();
            format!(
                "[{}]",
                if kinds.is_empty() {
                    "empty message".to_string()
                } else {
                    kinds.join(", ")
                }
            )
        }
    };
    Some(json!({
        "sender_id": sender,
        "text": text,
        "message_id": run.to_string(),
        "metadata": {
            "proxy": {
                "platform": event.platform.as_str(),
                "chat_id": event.chat_id,
                "sender_name": event.sender_name,
                "group": !inbound.chat_kind.is_direct(),
            }
        },
    }))
}

fn classify(status: StatusCode, answer: &Value, wait: Option<Duration>) -> Forward {
    let upstream_run = answer["run_id"]
        .as_str()
        .and_then(|r| uuid::Uuid::parse_str(r).ok());
    match status {
        StatusCode::ACCEPTED => Forward::Taken {
            upstream_run,
            duplicate: false,
        },
        StatusCode::OK if answer["status"] == "duplicate" => Forward::Taken {
            upstream_run,
            duplicate: true,
        },
        s if s == StatusCode::TOO_MANY_REQUESTS
            || s == StatusCode::REQUEST_TIMEOUT
            || s.is_server_error() =>
        {
            Forward::Later {
                why: format!("upstream answered {s}"),
                wait,
            }
        }
        s => {
            let code = answer["error"]["code"].as_str().unwrap_or("unknown");
            Forward::Refused(format!("upstream refused the message: {s} {code}"))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hermes_types::model::{MessageEvent, Platform};

    fn inbound(text: Option<&str>) -> Inbound {
        Inbound::of(MessageEvent {
            platform: Platform::Telegram,
            sender_id: "4242".into(),
            chat_id: "-100".into(),
            text: text.map(str::to_string),
            media: Vec::new(),
            external_message_id: Some("7".into()),
            sender_name: Some("Ada".into()),
            received_at: chrono::Utc::now(),
            metadata: None,
        })
    }

    #[test]
    fn a_message_goes_as_its_platforms_sender_with_the_edge_run_as_its_id() {
        let run = RunId::new();
        let b = body(run, &inbound(Some(" hello "))).unwrap();
        assert_eq!(b["sender_id"], "telegram:4242");
        assert_eq!(b["text"], "hello");
        assert_eq!(b["message_id"], run.to_string());
        assert_eq!(b["metadata"]["proxy"]["chat_id"], "-100");
        assert_eq!(
            body(run, &inbound(None)).unwrap()["text"],
            "[empty message]"
        );
        let mut long = inbound(Some("x"));
        long.event.sender_id = "9".repeat(200);
        assert!(body(run, &long).is_none());
    }

    #[test]
    fn answers_are_taken_retried_or_refused_by_status() {
        let run = json!({"run_id": "0193c0de-0000-7000-8000-000000000001", "status": "accepted"});
        assert!(matches!(
            classify(StatusCode::ACCEPTED, &run, None),
            Forward::Taken {
                upstream_run: Some(_),
                duplicate: false
            }
        ));
        let dup = json!({"run_id": "0193c0de-0000-7000-8000-000000000001", "status": "duplicate"});
        assert!(matches!(
            classify(StatusCode::OK, &dup, None),
            Forward::Taken {
                duplicate: true,
                ..
            }
        ));
        for s in [
            StatusCode::TOO_MANY_REQUESTS,
            StatusCode::BAD_GATEWAY,
            StatusCode::SERVICE_UNAVAILABLE,
        ] {
            assert!(
                matches!(classify(s, &json!({}), None), Forward::Later { .. }),
                "{s}"
            );
        }
        let wait = Some(Duration::from_secs(3));
        assert!(matches!(
            classify(StatusCode::TOO_MANY_REQUESTS, &json!({}), wait),
            Forward::Later { wait: Some(w), .. } if w == Duration::from_secs(3)
        ));
        for s in [
            StatusCode::UNAUTHORIZED,
            StatusCode::BAD_REQUEST,
            StatusCode::OK,
        ] {
            assert!(
                matches!(classify(s, &json!({}), None), Forward::Refused(_)),
                "{s}"
            );
        }
    }
}
