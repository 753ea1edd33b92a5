//! `channels_list`: the chat platforms and whether Hermes can send on each (the delivery
//! stage's senders are configured by their credentials, docs/configuration.md), and the
//! known chats: the platform senders linked to users (`user_channels`).

use chrono::{DateTime, Utc};
use hermes_config::WhatsappSender;
use hermes_types::model::Platform;
use serde_json::{Value, json};

use super::{DEFAULT_LIST, MAX_LIST};
use crate::Operator;
use crate::args::Args;
use crate::catalog::{Spec, limit, object, platform};
use crate::error::ToolError;

/// `channels_list`.
pub const LIST: Spec = Spec {
    name: "channels_list",
    description: "The chat platforms (telegram, whatsapp, instagram, slack) with whether Hermes can send \
        on each (its credentials are configured), and the known chats: senders linked to users, \
        newest first, with the user's name and whether the link is active.",
    schema: || {
        object(
            json!({ "platform": platform(), "limit": limit(DEFAULT_LIST, MAX_LIST) }),
            &[],
        )
    },
};

/// The chat platforms, with whether the delivery stage can send on each and through what.
fn platforms(op: &Operator, only: Option<Platform>) -> Vec<Value> {
    let d = &op.ctx.config.delivery;
    let whatsapp = match &d.whatsapp {
        Some(WhatsappSender::Cloud { .. }) => Some("cloud api"),
        Some(WhatsappSender::Dialog360 { .. }) => Some("360dialog"),
        None => None,
    };
    [
        (
            Platform::Telegram,
            d.telegram.is_some().then_some("bot api"),
        ),
        (Platform::Whatsapp, whatsapp),
        (
            Platform::Instagram,
            d.instagram.is_some().then_some("graph api"),
        ),
        (Platform::Slack, d.slack.is_some().then_some("web api")),
        (Platform::Sms, d.sms.is_some().then_some("twilio")),
        (
            Platform::Messenger,
            d.messenger.is_some().then_some("send api"),
        ),
        (
            Platform::Teams,
            d.teams.is_some().then_some("bot connector"),
        ),
        // Discord's answers (interaction follow-ups) have no sender yet.
        (Platform::Discord, None),
    ]
    .into_iter()
    .filter(|(p, _)| only.is_none_or(|o| o == *p))
    .map(|(p, via)| json!({ "platform": p.as_str(), "can_send": via.is_some(), "via": via }))
    .collect()
}

/// `channels_list`.
pub async fn list(op: &Operator, args: &Args) -> Result<Value, ToolError> {
    let only = args.platform()?;
    let limit = args.limit(DEFAULT_LIST, MAX_LIST)?;
    let client = op.db().await?;
    let rows = client
        .query(
            "SELECT c.platform, c.sender_id, c.user_id, u.display_name, c.activated, c.created_at
             FROM user_channels c JOIN users u ON u.id = c.user_id
             WHERE ($1::text IS NULL OR c.platform = $1)
             ORDER BY c.created_at DESC, c.id DESC LIMIT $2",
            &[&only.map(Platform::as_str), &limit],
        )
        .await?;
    let chats: Vec<Value> = rows
        .iter()
        .map(|r| {
            json!({
                "platform": r.get::<_, String>(0),
                "sender_id": r.get::<_, String>(1),
                "user_id": r.get::<_, uuid::Uuid>(2),
                "display_name": r.get::<_, Option<String>>(3),
                "activated": r.get::<_, bool>(4),
                "linked_at": r.get::<_, DateTime<Utc>>(5),
            })
        })
        .collect();
    Ok(json!({ "platforms": platforms(op, only), "chats": chats }))
}
