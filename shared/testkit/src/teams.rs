//! A fake of Microsoft Teams for the tests: activities as the Bot Framework posts them to the
//! bot, and the Connector service and token endpoint the fleet calls, answered as Microsoft
//! documents them (docs/channels.md, "Microsoft Teams"). The tokens themselves are signed by
//! PyJWT in the tests (`tests/jwt/mint.py`), not here.

use std::sync::atomic::{AtomicU64, Ordering};

use serde_json::{Value, json};
use wiremock::matchers::{method, path, path_regex};
use wiremock::{Mock, MockServer, Request, Respond, ResponseTemplate};

/// The bot's Microsoft App ID in the fake tenant.
pub const TEAMS_APP_ID: &str = "c9e8c047-2a74-40a2-b28a-b162d5f5327c";
/// The bot's id in conversations (`28:{app id}`).
pub const TEAMS_BOT: &str = "28:c9e8c047-2a74-40a2-b28a-b162d5f5327c";
/// The access token the fake token endpoint hands out.
pub const TEAMS_ACCESS_TOKEN: &str = "teams-connector-token";

/// The `serviceUrl` of conversations on the fake Connector `server`.
pub fn teams_service_url(server: &MockServer) -> String {
    format!("{}/amer/", server.uri())
}

/// A `message` activity from `user` in the personal conversation `conversation`, as
/// activity `id`.
pub fn teams_message(
    server: &MockServer,
    id: &str,
    user: &str,
    conversation: &str,
    text: &str,
) -> Value {
    json!({
        "type": "message", "id": id, "timestamp": "2026-11-28T18:40:12.345Z",
        "channelId": "msteams", "serviceUrl": teams_service_url(server),
        "from": {"id": user, "name": "Megan Bowen"},
        "conversation": {"conversationType": "personal", "id": conversation,
                         "tenantId": "72f988bf-86f1-41af-91ab-2d7cd011db47"},
        "recipient": {"id": TEAMS_BOT, "name": "Hermes"},
        "textFormat": "plain", "text": text,
        "channelData": {"tenant": {"id": "72f988bf-86f1-41af-91ab-2d7cd011db47"}},
    })
}

/// A `message` activity from `user` in the channel thread `conversation`, mentioning the bot
/// when `mention` is set.
pub fn teams_channel_message(
    server: &MockServer,
    id: &str,
    user: &str,
    conversation: &str,
    text: &str,
    mention: bool,
) -> Value {
    let mut a = teams_message(server, id, user, conversation, text);
    a["conversation"]["conversationType"] = json!("channel");
    a["conversation"]["isGroup"] = json!(true);
    if mention {
        a["text"] = json!(format!("<at>Hermes</at> {text}"));
        a["entities"] = json!([{"type": "mention", "text": "<at>Hermes</at>",
                                "mentioned": {"id": TEAMS_BOT, "name": "Hermes"}}]);
    }
    a
}

/// The Connector's answers to posted activities, each naming a new id.
pub struct TeamsCreated(AtomicU64);

impl Respond for TeamsCreated {
    fn respond(&self, _: &Request) -> ResponseTemplate {
        let n = self.0.fetch_add(1, Ordering::Relaxed);
        ResponseTemplate::new(201).set_body_json(json!({ "id": format!("1732819400{n:03}") }))
    }
}

/// A fake Connector service and token endpoint: `POST /token` hands out
/// [`TEAMS_ACCESS_TOKEN`] for an hour, and every `POST /amer/v3/conversations/…/activities…`
/// is created. Pass `{uri}/token` as `TEAMS_TOKEN_URL`.
pub async fn teams_fake() -> MockServer {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/token"))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!({
            "token_type": "Bearer", "expires_in": 3599, "ext_expires_in": 3599,
            "access_token": TEAMS_ACCESS_TOKEN,
        })))
        .mount(&server)
        .await;
    teams_activities()
        .respond_with(TeamsCreated(AtomicU64::new(1)))
        .with_priority(10)
        .mount(&server)
        .await;
    server
}

/// Any activity posted to a conversation of the fake Connector: add matchers, then
/// `respond_with` and mount (at a priority above the fake's default answer).
pub fn teams_activities() -> wiremock::MockBuilder {
    Mock::given(method("POST")).and(path_regex(
        r"^/amer/v3/conversations/[^/]+/activities(/[^/]+)?$",
    ))
}

/// The activities the fake Connector received, in order, with the path each went to.
pub async fn teams_posted(api: &MockServer) -> Vec<(String, Value)> {
    api.received_requests()
        .await
        .unwrap_or_default()
        .iter()
        .filter(|r| r.url.path().contains("/activities"))
        .filter_map(|r| {
            Some((
                r.url.path().to_owned(),
                serde_json::from_slice(&r.body).ok()?,
            ))
        })
        .collect()
}
