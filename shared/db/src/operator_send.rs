//! Messages an operator sends to a known chat (`messages_send`, docs/operator-mcp.md): each
//! is carried by a run of its own, created answered, whose reply is queued through the
//! outbox in the same transaction, so the delivery stage sends it with its retries,
//! breakers, rate gates and parking, and closes the run. When it is sent, delivery logs it
//! in the conversation's history (an outbound `message` event); when it is given up on, the
//! run closes failed with a `delivery_failed` event.
//!
//! A retried call with the same idempotency key names the same run (its id is derived from
//! the caller and the key), so it is queued once whatever the caller retries.

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use chrono::Utc;
use hermes_types::envelope::Envelope;
use hermes_types::ids::{RunId, UserId, WorkspaceId};
use hermes_types::model::{
    FinishReason, OperatorMessage, Outcome, Platform, Reply, ReplyTo, Usage,
};
use sha2::{Digest, Sha256};

use super::event_hub::{EventHub, Look};
use super::{Client, DbError, GenericClient, inbox, sessions};

/// The longest text a message may carry (Telegram's message limit, the smallest of the
/// three platforms').
pub const MAX_TEXT_CHARS: usize = 4096;
/// The longest image URL accepted.
pub const MAX_IMAGE_URL: usize = 2048;
/// The longest idempotency key accepted.
pub const MAX_IDEMPOTENCY_KEY: usize = 128;
/// The longest chat id in a target.
pub const MAX_CHAT_ID: usize = 128;

/// Where a message goes: `telegram:<chat>`, `whatsapp:<number>` or `instagram:<id>`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Target {
    pub platform: Platform,
    pub chat_id: String,
}

/// Why an argument of a send is refused (each message is fit for the caller).
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum BadSend {
    #[error(
        "target must be \"telegram:<chat>\", \"whatsapp:<number>\" or \"instagram:<id>\" (chat id 1..={MAX_CHAT_ID} printable characters)"
    )]
    Target,
    #[error("text must be 1..={MAX_TEXT_CHARS} characters (with the image link, if any)")]
    Text,
    #[error(
        "image_url must be an https URL of at most {MAX_IMAGE_URL} characters, without spaces or parentheses"
    )]
    ImageUrl,
    #[error("idempotency_key must be 1..={MAX_IDEMPOTENCY_KEY} printable characters")]
    IdempotencyKey,
}

impl FromStr for Target {
    type Err = BadSend;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let (platform, chat_id) = s.split_once(':').ok_or(BadSend::Target)?;
        let platform = Platform::parse(platform)
            .filter(|p| p.is_chat())
            .ok_or(BadSend::Target)?;
        if chat_id.is_empty()
            || chat_id.len() > MAX_CHAT_ID
            || chat_id.chars().any(|c| c.is_control() || c.is_whitespace())
        {
            return Err(BadSend::Target);
        }
        Ok(Self {
            platform,
            chat_id: chat_id.to_owned(),
        })
    }
}

impl fmt::Display for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.platform.as_str(), self.chat_id)
    }
}

/// The text to send: `text`, and the image as a Markdown image after it, which delivery
/// sends as a photo with the text as its caption (docs/operator-mcp.md, messages_send).
pub fn compose(text: &str, image_url: Option<&str>) -> Result<String, BadSend> {
    let text = text.trim();
    let composed = match image_url {
        None => text.to_owned(),
        Some(url) => {
            let fits = url.len() <= MAX_IMAGE_URL
                && url.starts_with("https://")
                && url.len() > "https://".len()
                && !url
                    .chars()
                    .any(|c| c.is_whitespace() || c.is_control() || matches!(c, '(' | ')'));
            if !fits {
                return Err(BadSend::ImageUrl);
            }
            if text.is_empty() {
                format!("![]({url})")
            } else {
                format!("{text}\n\n![]({url})")
            }
        }
    };
    let chars = composed.chars().count();
    if chars == 0 || chars > MAX_TEXT_CHARS {
        return Err(BadSend::Text);
    }
    Ok(composed)
}

/// Check an idempotency key's shape.
pub fn idempotency_key(key: &str) -> Result<&str, BadSend> {
    if key.is_empty() || key.len() > MAX_IDEMPOTENCY_KEY || key.chars().any(char::is_control) {
        return Err(BadSend::IdempotencyKey);
    }
    Ok(key)
}

/// The run of `by`'s send with idempotency key `key`: the same for every retry, different
/// for every caller (a UUID of the custom version built from a SHA-256 of both).
pub fn run_for_key(by: &str, key: &str) -> RunId {
    let digest = Sha256::new()
        .chain_update(b"hermes operator send\0")
        .chain_update(by.as_bytes())
        .chain_update([0])
        .chain_update(key.as_bytes())
        .finalize();
    let mut bytes = [0u8; 16];
    bytes.copy_from_slice(&digest[..16]);
    RunId::from(uuid::Builder::from_custom_bytes(bytes).into_uuid())
}

/// The user whose activated channel `chat_id` on `platform` is (within `workspace`, when
/// given): the chats an operator may write to.
pub async fn known_chat(
    client: &impl GenericClient,
    target: &Target,
    workspace: Option<WorkspaceId>,
) -> Result<Option<UserId>, DbError> {
    let row = client
        .query_opt(
            "SELECT c.user_id FROM user_channels c JOIN users u ON u.id = c.user_id
             WHERE c.platform = $1 AND c.sender_id = $2 AND c.activated
               AND c.api_key_id IS NULL AND ($3::uuid IS NULL OR u.workspace_id = $3)",
            &[&target.platform.as_str(), &target.chat_id, &workspace],
        )
        .await?;
    Ok(row.map(|r| r.get(0)))
}

/// One message to send.
pub struct Send<'a> {
    /// The operator key sending it (its id), recorded on the run and in the history.
    pub by: &'a str,
    pub target: &'a Target,
    /// The composed text ([`compose`]).
    pub text: &'a str,
    pub idempotency_key: Option<&'a str>,
    /// Only chats of this workspace's users, when the key is bound to one.
    pub workspace: Option<WorkspaceId>,
    /// The router's session idle timeout, so the message lands in the live conversation.
    pub session_idle: Duration,
}

/// What [`queue`] did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Queued {
    /// A new run carries the message.
    New(RunId),
    /// The idempotency key names a run already queued: nothing more was sent.
    Again(RunId),
    /// The target is no known chat.
    UnknownChat,
}

/// Create the message's run, answered, and queue its reply, in one transaction.
pub async fn queue(client: &mut Client, send: &Send<'_>) -> Result<Queued, DbError> {
    let tx = client.transaction().await?;
    let Some(user) = known_chat(&tx, send.target, send.workspace).await? else {
        return Ok(Queued::UnknownChat);
    };
    let run = match send.idempotency_key {
        Some(key) => run_for_key(send.by, key),
        None => RunId::new(),
    };
    let meta = serde_json::json!({
        "source": "operator",
        "by": send.by,
        "idempotency_key": send.idempotency_key,
    });
    let (platform, chat_id) = (send.target.platform, &send.target.chat_id);
    let created = tx
        .execute(
            "INSERT INTO agent_runs (id, platform, sender_id, chat_id, status, tier, user_id,
                                     credits_charged, metadata, answered_at)
             SELECT $1, $2, $3, $3, 'routed', u.tier, u.id, 0, $5, now()
             FROM users u WHERE u.id = $4
             ON CONFLICT (id) DO NOTHING",
            &[&run, &platform.as_str(), chat_id, &user, &meta],
        )
        .await?;
    if created == 0 {
        return Ok(Queued::Again(run));
    }
    let session =
        sessions::current_or_start(&tx, user, platform, chat_id, Utc::now(), send.session_idle)
            .await?;
    let reply = Reply {
        reply_to: ReplyTo::chat(platform, chat_id.clone()),
        outcome: Outcome::Answered {
            text: send.text.to_owned(),
            model: "operator".into(),
            usage: Usage::default(),
            finish_reason: FinishReason::Stop,
            tools_used: Vec::new(),
            transcript: Vec::new(),
        },
        exchange: None,
        detail: None,
        draft_id: None,
        operator: Some(OperatorMessage {
            user_id: user,
            session_id: session.id,
            by: send.by.to_owned(),
        }),
        calls: Vec::new(),
    };
    inbox::enqueue(&tx, &[Envelope::new(run, None, &reply)]).await?;
    tx.commit().await?;
    Ok(Queued::New(run))
}

/// Where a sent message is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SendStatus {
    /// Waiting for (or being retried by) the delivery stage.
    Queued,
    /// Sent to the platform.
    Sent,
    /// Given up on: why (a failure code, and the scrubbed detail when there is one).
    Failed { reason: String },
}

impl SendStatus {
    pub fn as_str(&self) -> &'static str {
        match self {
            SendStatus::Queued => "queued",
            SendStatus::Sent => "sent",
            SendStatus::Failed { .. } => "failed",
        }
    }
}

/// The status of `run` if it is a message `by` sent (`None`: no such message of theirs).
pub async fn status(
    client: &impl GenericClient,
    run: RunId,
    by: &str,
) -> Result<Option<SendStatus>, DbError> {
    let row = client
        .query_opt(
            "SELECT status, error_code, error_detail FROM agent_runs
             WHERE id = $1 AND metadata->>'source' = 'operator' AND metadata->>'by' = $2",
            &[&run, &by],
        )
        .await?;
    Ok(row.map(|r| match r.get::<_, &str>(0) {
        "completed" => SendStatus::Sent,
        "failed" | "cancelled" | "expired" => {
            let code: Option<String> = r.get(1);
            let detail: Option<String> = r.get(2);
            let code = code.unwrap_or_else(|| "failed".into());
            let reason = match detail {
                Some(d) => format!("{code}: {}", hermes_net::redact::redact(&d, &[])),
                None => code,
            };
            SendStatus::Failed { reason }
        }
        _ => SendStatus::Queued,
    }))
}

/// The status of `run` (a message `by` sent) once it is sent or given up on, or when
/// `timeout` passes (then [`SendStatus::Queued`]). It wakes with the event hub: the commit
/// that closes the run writes its `message` or `delivery_failed` event, which notifies.
pub async fn await_status(
    hub: &EventHub,
    run: RunId,
    by: &str,
    timeout: Duration,
) -> Result<Option<SendStatus>, DbError> {
    let db = hub.db();
    hub.watch(timeout, move || async move {
        let client = db.get().await?;
        let now = status(&client, run, by).await?;
        Ok(match now {
            Some(SendStatus::Queued) => Look::Later(now),
            _ => Look::Done(now),
        })
    })
    .await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn targets_read_back_and_refuse_anything_else() {
        let t: Target = "telegram:12345".parse().unwrap();
        assert_eq!(t.platform, Platform::Telegram);
        assert_eq!(t.to_string(), "telegram:12345");
        for bad in ["", "telegram:", "rest:1", "api:x", "12345", "telegram:a b"] {
            assert_eq!(bad.parse::<Target>(), Err(BadSend::Target), "{bad:?}");
        }
    }

    #[test]
    fn an_image_follows_the_text_as_markdown_and_only_https_is_taken() {
        assert_eq!(compose(" hi ", None).unwrap(), "hi");
        assert_eq!(
            compose("look", Some("https://x.test/a.png")).unwrap(),
            "look\n\n![](https://x.test/a.png)"
        );
        assert_eq!(
            compose("", Some("https://x.test/a.png")).unwrap(),
            "![](https://x.test/a.png)"
        );
        for bad in [
            "http://x.test/a.png",
            "https://",
            "https://x.test/a b",
            "https://x.test/)",
        ] {
            assert_eq!(compose("t", Some(bad)), Err(BadSend::ImageUrl), "{bad:?}");
        }
        assert_eq!(compose("  ", None), Err(BadSend::Text));
        assert_eq!(
            compose(&"é".repeat(MAX_TEXT_CHARS + 1), None),
            Err(BadSend::Text)
        );
        assert!(compose(&"é".repeat(MAX_TEXT_CHARS), None).is_ok());
    }

    #[test]
    fn a_key_names_one_run_per_caller() {
        assert_eq!(run_for_key("k1", "a"), run_for_key("k1", "a"));
        assert_ne!(run_for_key("k1", "a"), run_for_key("k2", "a"));
        assert_ne!(run_for_key("k1", "a"), run_for_key("k1", "b"));
        assert!(idempotency_key("").is_err());
        assert!(idempotency_key(&"x".repeat(MAX_IDEMPOTENCY_KEY + 1)).is_err());
    }
}
