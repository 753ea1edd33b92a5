//! Microsoft Teams end to end (docs/channels.md, "Microsoft Teams"): activities posted with
//! tokens signed by PyJWT (`tests/jwt/mint.py`) as the Bot Framework signs its own (RS256,
//! its key listed in a JWKS file the route reads), through the real route, answered through
//! the fleet into a fake Connector: a personal message answered once with the bot's token,
//! a channel mention answered as a reply and chatter left alone, every forged, stale or
//! misdirected token refused with nothing queued, an inline image fetched with the bot's
//! token reaching the model, a 429 waited out, and a conversation that is gone parked.

use std::time::Duration;

use hermes::Service;
use hermes_bus::Stage;
use hermes_testkit::{
    App, TEAMS_ACCESS_TOKEN, TEAMS_APP_ID, TestEnv, count, drain, eventually, openai_fake,
    teams_activities, teams_channel_message, teams_fake, teams_message, teams_posted,
    teams_service_url,
};
use hermes_types::model::Platform;
use serde_json::{Value, json};
use wiremock::matchers::{header, method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

use crate::delivery::{parked_for, waits_out_a_429};
use crate::forge_jwt::{mint, pyjwt};

const KEY: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../shared/channels/tests/fixtures/teams/test-signing-key.der"
);
const KID: &str = "bf-test-key";
const MEGAN: &str = "29:1XJKJMvc5GBtc2JwZq0oj8tHZmzrQgFmB39ATiQWA85gQtHieVkKilBZ9XHoq9j7Zaqt7";
const PERSONAL: &str = "a:17I0kl8EkpE1O9PH5TWrzrLqwfBhWl7Cz2sBO3xKXxYxjJIb1Ss0Z7y8SCwiPm9A6";

/// The Bot Framework's signing keys for the test: the key's public half, written by PyJWT to
/// a file of `env`'s own, removed when the test ends (the guard is dropped).
async fn jwks_file(python: &str, env: &TestEnv) -> KeysFile {
    let doc = mint(
        python,
        json!({"jwks": KEY, "kid": KID, "endorsements": ["msteams", "skype"]}),
    )
    .await;
    let file = std::env::temp_dir().join(format!("hermes-teams-keys-{}.json", env.ns));
    std::fs::write(&file, doc).unwrap();
    KeysFile(file)
}

/// A keys file that is removed with its test.
struct KeysFile(std::path::PathBuf);

impl Drop for KeysFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// An environment answering Teams through the fake Connector `api`.
async fn teams_env(python: &str, env: &mut TestEnv, api: &MockServer) -> KeysFile {
    let keys = jwks_file(python, env).await;
    env.set("TEAMS_APP_ID", TEAMS_APP_ID)
        .set("TEAMS_APP_PASSWORD", "app-password-0123456789")
        .set("TEAMS_OPENID_KEYS", &keys.0.display().to_string())
        .set("TEAMS_TOKEN_URL", &format!("{}/token", api.uri()))
        .set("TEAMS_SERVICE_HOSTS", "127.0.0.1");
    keys
}

/// A token as the Bot Framework issues it for `service`, with the claims `change` makes.
async fn token(python: &str, service: &str, change: impl FnOnce(&mut Value)) -> String {
    let now = chrono::Utc::now().timestamp();
    let mut claims = json!({
        "iss": "https://api.botframework.com", "aud": TEAMS_APP_ID, "serviceurl": service,
        "nbf": now - 60, "exp": now + 3600,
    });
    change(&mut claims);
    let kid = claims
        .as_object_mut()
        .unwrap()
        .remove("kid")
        .unwrap_or(json!(KID));
    mint(
        python,
        json!({"alg": "RS256", "key_file": KEY, "kid": kid, "claims": claims}),
    )
    .await
}

/// POST `activity` to the Teams route with `token`.
async fn deliver(app: &App, token: &str, activity: &Value) -> reqwest::Response {
    let headers = [("authorization", format!("Bearer {token}"))];
    app.post_webhook(
        "/webhooks/teams",
        &headers,
        serde_json::to_vec(activity).unwrap(),
    )
    .await
}

/// Wait until the fake Connector got `n` message activities; them, with their paths.
async fn answered(api: &MockServer, n: usize) -> Vec<(String, Value)> {
    eventually(Duration::from_secs(30), "the Teams answers", || async {
        let posted: Vec<_> = (teams_posted(api).await.into_iter())
            .filter(|(_, a)| a["type"] == "message")
            .collect();
        (posted.len() >= n).then_some(posted)
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_personal_message_and_a_channel_mention_are_answered_once_with_the_bots_token() {
    let Some(python) = pyjwt().await else { return };
    let model = openai_fake("Here is **the plan**.").await;
    let api = teams_fake().await;
    let mut env = TestEnv::new().await;
    env.openai_mock(&model.uri());
    let _keys = teams_env(&python, &mut env, &api).await;
    env.user(Platform::Teams, MEGAN, 10).await;
    let fleet = env.start(&Service::ALL).await;
    let service = teams_service_url(&api);
    let bearer = token(&python, &service, |_| {}).await;

    // A personal message, then the Connector's redelivery of it: one answer.
    let hello = teams_message(&api, "1732819212345", MEGAN, PERSONAL, "what is the plan?");
    assert_eq!(deliver(&fleet, &bearer, &hello).await.status(), 200);
    let again = deliver(&fleet, &bearer, &hello).await;
    assert_eq!(again.status(), 200);
    assert_eq!(again.json::<Value>().await.unwrap()["routed"], 0);
    let posted = answered(&api, 1).await;
    let (to, activity) = &posted[0];
    assert_eq!(
        to,
        "/amer/v3/conversations/a%3A17I0kl8EkpE1O9PH5TWrzrLqwfBhWl7Cz2sBO3xKXxYxjJIb1Ss0Z7y8SCwiPm9A6/activities"
    );
    assert_eq!(
        activity,
        &json!({"type": "message", "textFormat": "markdown", "text": "Here is **the plan**."})
    );
    let sent = api.received_requests().await.unwrap();
    assert!(
        sent.iter()
            .filter(|r| r.url.path().contains("/activities"))
            .all(|r| r.headers.get("authorization").unwrap()
                == format!("Bearer {TEAMS_ACCESS_TOKEN}").as_str()),
        "every activity carries the bot's token"
    );

    // In a channel: chatter is left alone; a mention is answered as a reply to it.
    let thread = "19:e6c4b8a1d7f24bbfa0c3@thread.tacv2;messageid=1732819260000";
    let chatter = teams_channel_message(&api, "1732819260001", MEGAN, thread, "lunch?", false);
    assert_eq!(deliver(&fleet, &bearer, &chatter).await.status(), 200);
    let mention =
        teams_channel_message(&api, "1732819260002", MEGAN, thread, "and the plan?", true);
    assert_eq!(deliver(&fleet, &bearer, &mention).await.status(), 200);
    let posted = answered(&api, 2).await;
    let (to, activity) = &posted[1];
    assert!(to.ends_with("/activities/1732819260002"), "{to}");
    assert_eq!(activity["replyToId"], "1732819260002");
    let asked = model.received_requests().await.unwrap();
    let last: Value = asked.last().unwrap().body_json().unwrap();
    assert!(
        last.to_string().contains("and the plan?") && !last.to_string().contains("<at>"),
        "the model sees the question without the mention: {last}"
    );
    let runs = count(&env.db(), "SELECT count(*) FROM agent_runs", &[]).await;
    assert_eq!(
        runs, 2,
        "the message once, the mention once, the chatter never"
    );
    fleet.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_forged_stale_or_misdirected_token_is_refused_with_nothing_queued() {
    let Some(python) = pyjwt().await else { return };
    let api = teams_fake().await;
    let mut env = TestEnv::new().await;
    let _keys = teams_env(&python, &mut env, &api).await;
    let fleet = env.start(&[Service::Ingest]).await;
    let bus = env.bus().await;
    let service = teams_service_url(&api);
    let hello = teams_message(&api, "1732819212345", MEGAN, PERSONAL, "hi");
    let now = chrono::Utc::now().timestamp();
    let refused = [
        token(&python, &service, |c| c["aud"] = json!("another-bot")).await,
        token(&python, &service, |c| {
            c["iss"] = json!("https://sts.windows.net/x/")
        })
        .await,
        token(&python, &service, |c| c["exp"] = json!(now - 400)).await,
        token(&python, &service, |c| {
            c["kid"] = json!("a-key-nobody-listed")
        })
        .await,
        // Signed for another conversation's service: it cannot answer this one.
        token(&python, "https://smba.trafficmanager.net/emea/", |_| {}).await,
        "not-a-token".to_string(),
    ];
    for bearer in &refused {
        assert_eq!(deliver(&fleet, bearer, &hello).await.status(), 401);
    }
    let r = fleet
        .post_webhook("/webhooks/teams", &[], serde_json::to_vec(&hello).unwrap())
        .await;
    assert_eq!(r.status(), 401, "no token at all");
    assert!(
        drain(&bus, Stage::Router).await.is_empty(),
        "nothing queued"
    );

    let good = token(&python, &service, |_| {}).await;
    assert_eq!(deliver(&fleet, &good, &hello).await.status(), 200);
    assert_eq!(drain(&bus, Stage::Router).await.len(), 1);
    fleet.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_inline_image_is_fetched_with_the_bots_token_and_reaches_the_model() {
    let Some(python) = pyjwt().await else { return };
    let model = openai_fake("A sunset.").await;
    let api = teams_fake().await;
    let mut photo = vec![0xff, 0xd8, 0xff, 0xe0];
    photo.resize(300, 7);
    Mock::given(method("GET"))
        .and(path("/amer/v3/attachments/0-eus-d1-pic/views/original"))
        .and(header(
            "authorization",
            format!("Bearer {TEAMS_ACCESS_TOKEN}"),
        ))
        .respond_with(ResponseTemplate::new(200).set_body_raw(photo, "image/jpeg"))
        .mount(&api)
        .await;
    let mut env = TestEnv::new().await;
    env.openai_mock(&model.uri())
        .set("HERMES_MEDIA_FETCH_ALLOW", "127.0.0.1");
    let _keys = teams_env(&python, &mut env, &api).await;
    env.user(Platform::Teams, MEGAN, 10).await;
    let fleet = env.start(&Service::ALL).await;
    let service = teams_service_url(&api);
    let mut pasted = teams_message(&api, "1732819300000", MEGAN, PERSONAL, "what is this?");
    pasted["attachments"] = json!([{
        "contentType": "image/*",
        "contentUrl": format!("{service}v3/attachments/0-eus-d1-pic/views/original"),
    }]);
    let bearer = token(&python, &service, |_| {}).await;
    assert_eq!(deliver(&fleet, &bearer, &pasted).await.status(), 200);
    let posted = answered(&api, 1).await;
    assert_eq!(posted[0].1["text"], "A sunset.");
    let call: Value = model.received_requests().await.unwrap()[0]
        .body_json()
        .unwrap();
    assert!(
        call.to_string().contains("data:image/jpeg;base64,"),
        "the image is inlined for the model: {call}"
    );
    fleet.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_429_is_waited_out_and_a_conversation_that_is_gone_is_parked() {
    let api = teams_fake().await;
    teams_activities()
        .and(path("/amer/v3/conversations/a%3Abusy/activities"))
        .respond_with(ResponseTemplate::new(429).insert_header("retry-after", "1"))
        .up_to_n_times(1)
        .with_priority(1)
        .mount(&api)
        .await;
    teams_activities()
        .and(path("/amer/v3/conversations/a%3Agone/activities"))
        .respond_with(ResponseTemplate::new(404).set_body_json(json!({
            "error": {"code": "ConversationNotFound", "message": "Conversation not found."}
        })))
        .with_priority(1)
        .mount(&api)
        .await;
    let mut env = TestEnv::new().await;
    env.set("TEAMS_APP_ID", TEAMS_APP_ID)
        .set("TEAMS_APP_PASSWORD", "app-password-0123456789")
        .set("TEAMS_TOKEN_URL", &format!("{}/token", api.uri()))
        .set("TEAMS_SERVICE_HOSTS", "127.0.0.1");
    let _fleet = env.start(&[Service::Delivery]).await;
    let bus = env.bus().await;
    let service = teams_service_url(&api);
    let busy = format!("{service}|a:busy");
    waits_out_a_429(&bus, Platform::Teams, &busy, || async {
        let sent = api.received_requests().await.unwrap_or_default();
        sent.iter()
            .filter(|r| r.url.path() == "/amer/v3/conversations/a%3Abusy/activities")
            .count()
    })
    .await;
    let parked = parked_for(
        &bus,
        Platform::Teams,
        &format!("{service}|a:gone"),
        "invalid_recipient",
    )
    .await;
    assert!(parked.detail.unwrap_or_default().contains("404"));
}
