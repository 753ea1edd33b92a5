//! The Discord Gateway connector end to end (docs/channels.md, "Discord"): `hermes
//! discord-gateway` against the fake Gateway and the fake REST API of the test kit, through
//! the whole fleet. A direct message and a mention in a guild are answered in their channel
//! with the bot token, a guild message without a mention is not; an attached image reaches
//! the model; a dropped connection is resumed from the last message handled and the
//! replayed message answered once; op 7 and a zombied connection resume too; an invalid
//! session identifies anew; a fatal close stops the shard; payloads arrive deflated
//! (`zlib-stream`) unless compression is off; two connectors hold the shard
//! once, and a killed one's is taken over.

use std::time::{Duration, Instant};

use hermes::Service;
use hermes_testkit::{
    DiscordCall, FakeGateway, GatewayConn, Server, TestEnv, count, discord_api_url, discord_calls,
    discord_fake, discord_gateway_bot, eventually, openai_answer,
};
use hermes_types::model::Platform;
use serde_json::{Value, json};
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

/// The bot's user id, as READY names it.
pub(crate) const BOT: &str = "9900";
/// Ada, the linked Discord user who writes.
pub(crate) const ADA: &str = "5500";
const TOKEN: &str = "bot-token-for-tests";

/// A `MESSAGE_CREATE` from Ada: in a guild when `guild` is set, mentioning the bot when
/// `mention` is.
pub(crate) fn message(
    id: &str,
    channel: &str,
    guild: Option<&str>,
    content: &str,
    mention: bool,
) -> Value {
    let mut m = json!({
        "id": id, "channel_id": channel, "type": 0, "content": content,
        "timestamp": "2026-11-29T04:00:00.000000+00:00", "tts": false,
        "author": {"id": ADA, "username": "ada", "global_name": "Ada"},
        "mentions": if mention { json!([{"id": BOT, "username": "hermes", "bot": true}]) } else { json!([]) },
        "attachments": [], "embeds": []
    });
    if let Some(g) = guild {
        m["guild_id"] = json!(g);
        m["member"] = json!({"roles": []});
    }
    m
}

/// A model that answers every question "A river is water."; the fakes; the environment.
pub(crate) async fn setup(gateway: &FakeGateway) -> (TestEnv, MockServer, MockServer) {
    let model = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(200).set_body_json(openai_answer(
            "A river is water.",
            1,
            1,
        )))
        .mount(&model)
        .await;
    let api = discord_fake().await;
    discord_gateway_bot(&api, gateway.url(), 1).await;
    let mut env = TestEnv::new().await;
    env.openai_mock(&model.uri())
        .set("DISCORD_BOT_TOKEN", TOKEN)
        .set("DISCORD_API_URL", &discord_api_url(&api))
        .set("HERMES_SEND_PAUSES_MS", "10,10,10");
    env.user(Platform::Discord, ADA, 10).await;
    (env, model, api)
}

/// The five stages and the connector.
pub(crate) fn fleet_services() -> Vec<Service> {
    let mut services = Service::ALL.to_vec();
    services.push(Service::DiscordGateway);
    services
}

/// The channel messages the fake API received in `channel`, once there are `n`.
pub(crate) async fn sent_in(api: &MockServer, channel: &str, n: usize) -> Vec<DiscordCall> {
    let path = format!("/channels/{channel}/messages");
    eventually(
        Duration::from_secs(30),
        "the answers in the channel",
        || async {
            let calls: Vec<DiscordCall> = (discord_calls(api).await.into_iter())
                .filter(|c| c.path == path)
                .collect();
            (calls.len() >= n).then_some(calls)
        },
    )
    .await
}

/// Identify on `conn` and answer READY as session `session`; Identify's `d`.
pub(crate) async fn identified(
    conn: &mut GatewayConn,
    gateway: &FakeGateway,
    session: &str,
) -> Value {
    let identify = conn.hello_and_identify().await;
    conn.ready(session, gateway.url(), BOT);
    identify
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dm_and_a_mention_are_answered_in_their_channel_and_an_unaddressed_message_is_not() {
    let gateway = FakeGateway::start().await;
    let (env, _model, api) = setup(&gateway).await;
    let fleet = env.start(&fleet_services()).await;

    let mut conn = gateway.connection().await;
    // Transport compression by default: every payload below arrives deflated, in two frames.
    assert!(conn.compressed, "no zlib-stream asked for");
    let identify = identified(&mut conn, &gateway, "sess-1").await;
    assert_eq!(identify["token"], TOKEN);
    assert_eq!(
        identify["intents"], 37376,
        "GUILD_MESSAGES | DIRECT_MESSAGES | MESSAGE_CONTENT"
    );
    assert_eq!(identify["shard"], json!([0, 1]));

    // A direct message: answered in its channel with the bot token.
    conn.dispatch(
        "MESSAGE_CREATE",
        message("1001", "4400", None, "What is a river?", false),
    );
    let calls = sent_in(&api, "4400", 1).await;
    assert_eq!(calls[0].method, "POST");
    assert_eq!(
        calls[0].authorization.as_deref(),
        Some(&*format!("Bot {TOKEN}"))
    );
    assert_eq!(
        calls[0].body,
        json!({"content": "A river is water.", "allowed_mentions": {"parse": []}})
    );

    // In a guild: a message without a mention is not answered, the mention is, once.
    conn.dispatch(
        "MESSAGE_CREATE",
        message("1002", "4401", Some("3300"), "hello all", false),
    );
    let mention = format!("<@{BOT}> what is a river?");
    conn.dispatch(
        "MESSAGE_CREATE",
        message("1003", "4401", Some("3300"), &mention, true),
    );
    // The bot's own answer comes back as an event too, and is not answered.
    let mut own = message("1004", "4401", Some("3300"), "A river is water.", false);
    own["author"] = json!({"id": BOT, "username": "hermes", "bot": true});
    conn.dispatch("MESSAGE_CREATE", own);
    let calls = sent_in(&api, "4401", 1).await;
    assert_eq!(calls.len(), 1);
    let metrics = eventually(
        Duration::from_secs(10),
        "the own message counted",
        || async {
            let m = fleet.metrics().await;
            m.contains("hermes_discord_gateway_events_total{outcome=\"own\"} 1")
                .then_some(m)
        },
    )
    .await;
    for line in [
        "hermes_discord_gateway_events_total{outcome=\"accepted\"} 2",
        "hermes_discord_gateway_events_total{outcome=\"not_addressed\"} 1",
        "hermes_discord_gateway_sessions{shard=\"0/1\"} 1",
        "hermes_discord_gateway_shards_held 1",
        "hermes_discord_gateway_shards 1",
        "hermes_discord_gateway_identifies_total{shard=\"0/1\"} 1",
    ] {
        has(&metrics, line);
    }
    assert!(!metrics.contains(TOKEN), "the token is never shown");
    let sql = "SELECT count(*) FROM agent_runs";
    assert_eq!(count(&env.db(), sql, &[]).await, 2);

    fleet.stop().await.unwrap();
    // A graceful stop hands the lease back.
    let leases = "SELECT count(*) FROM leases WHERE name LIKE 'discord-shard-%'";
    assert_eq!(count(&env.db(), leases, &[]).await, 0);
}

/// A photo sent to the bot: its attachment is fetched from its CDN URL (no credential: the
/// URL is signed) through the SSRF guard, and reaches the model inline beside the text.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_attached_image_is_fetched_and_reaches_the_model() {
    let gateway = FakeGateway::start().await;
    let (mut env, model, api) = setup(&gateway).await;
    let mut photo = vec![0x89, b'P', b'N', b'G', 0x0d, 0x0a, 0x1a, 0x0a];
    photo.resize(300, 7);
    Mock::given(method("GET"))
        .and(path("/attachments/4400/77/river.png"))
        .respond_with(ResponseTemplate::new(200).set_body_raw(photo, "image/png"))
        .mount(&api)
        .await;
    env.set("HERMES_MEDIA_FETCH_ALLOW", "127.0.0.1");
    let fleet = env.start(&fleet_services()).await;
    let mut conn = gateway.connection().await;
    identified(&mut conn, &gateway, "sess-img").await;
    let mut m = message("1101", "4400", None, "What is in this picture?", false);
    m["attachments"] = json!([{
        "id": "77", "filename": "river.png", "content_type": "image/png", "size": 300,
        "url": format!("{}/attachments/4400/77/river.png?ex=1&is=2&hm=3", api.uri())
    }]);
    conn.dispatch("MESSAGE_CREATE", m);
    let calls = sent_in(&api, "4400", 1).await;
    assert_eq!(calls[0].body["content"], "A river is water.");
    let asked: Value = model.received_requests().await.unwrap()[0]
        .body_json()
        .unwrap();
    let asked = asked.to_string();
    assert!(
        asked.contains("data:image/png;base64,") && asked.contains("What is in this picture?"),
        "the photo is inlined for the model beside the text: {asked}"
    );
    fleet.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dropped_connection_resumes_and_the_replayed_message_is_answered_once() {
    let gateway = FakeGateway::start().await;
    let (env, _model, api) = setup(&gateway).await;
    let fleet = env.start(&fleet_services()).await;

    let mut conn = gateway.connection().await;
    identified(&mut conn, &gateway, "sess-1").await;
    let seq = conn.dispatch(
        "MESSAGE_CREATE",
        message("2001", "4400", None, "A river?", false),
    );
    sent_in(&api, "4400", 1).await;

    // The connection drops: the connector resumes the session from the message it handled.
    conn.drop_connection();
    let mut conn = gateway.connection().await;
    conn.hello(45_000);
    let resume = conn.expect(6).await;
    assert_eq!(
        resume["d"],
        json!({"token": TOKEN, "session_id": "sess-1", "seq": seq})
    );
    // Discord replays what it thinks was missed, the handled message among it: one answer.
    conn.continue_from(seq - 1);
    conn.dispatch_at(
        seq,
        "MESSAGE_CREATE",
        message("2001", "4400", None, "A river?", false),
    );
    conn.dispatch(
        "MESSAGE_CREATE",
        message("2002", "4400", None, "A lake?", false),
    );
    conn.resumed();
    let calls = sent_in(&api, "4400", 2).await;
    assert_eq!(calls.len(), 2);

    // Op 7: the connector closes and resumes.
    conn.reconnect();
    conn.closed().await;
    let mut conn = gateway.connection().await;
    conn.hello(45_000);
    assert_eq!(conn.expect(6).await["d"]["session_id"], "sess-1");
    conn.resumed();

    // Heartbeats on Discord's interval; the server's op 1 asks for one at once. A heartbeat
    // never acknowledged is a zombied connection: closed and resumed.
    conn.ask_heartbeat();
    eventually(Duration::from_secs(10), "a heartbeat on op 1", || async {
        (conn.heartbeats() >= 1).then_some(())
    })
    .await;
    conn.stop_acks();
    drop(conn);
    let mut conn = gateway.connection().await;
    conn.stop_acks();
    conn.hello(100);
    assert_eq!(conn.expect(6).await["d"]["session_id"], "sess-1");
    conn.closed().await;
    let mut conn = gateway.connection().await;
    conn.hello(45_000);
    assert_eq!(conn.expect(6).await["d"]["session_id"], "sess-1");
    conn.resumed();

    let metrics = eventually(Duration::from_secs(10), "the resumes counted", || async {
        let m = fleet.metrics().await;
        m.contains("hermes_discord_gateway_resumes_total{shard=\"0/1\"} 3")
            .then_some(m)
    })
    .await;
    for line in [
        "hermes_discord_gateway_events_total{outcome=\"duplicate\"} 1",
        "hermes_discord_gateway_heartbeat_ack_misses_total{shard=\"0/1\"} 1",
        "hermes_discord_gateway_identifies_total{shard=\"0/1\"} 1",
    ] {
        has(&metrics, line);
    }
    let sql = "SELECT count(*) FROM agent_runs";
    assert_eq!(count(&env.db(), sql, &[]).await, 2, "one run per message");
    fleet.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_message_the_broker_did_not_confirm_is_resumed_and_answered_once() {
    let gateway = FakeGateway::start().await;
    let (mut env, _model, api) = setup(&gateway).await;
    env.set("HERMES_PUBLISH_TIMEOUT_SECS", "1");
    let broker = env.behind_proxy(Server::Broker).await;
    let fleet = env.start(&fleet_services()).await;
    let mut conn = gateway.connection().await;
    identified(&mut conn, &gateway, "sess-1").await;

    // The broker goes away as a message arrives: not confirmed, so not handled. The
    // connector closes the connection to have it again.
    broker.set_down(true);
    let asked = message("3001", "4400", None, "Still there?", false);
    let seq = conn.dispatch("MESSAGE_CREATE", asked.clone());
    conn.closed().await;
    broker.set_down(false);

    // Each Resume starts before the message (the READY's number), until the broker is back
    // and the replayed message is confirmed and answered.
    let mut resumes = 0;
    let calls = loop {
        let mut conn = gateway.connection().await;
        conn.hello(45_000);
        let resume = conn.expect(6).await;
        assert_eq!(
            resume["d"]["seq"],
            seq - 1,
            "the unconfirmed message is asked for again"
        );
        resumes += 1;
        conn.continue_from(seq - 1);
        conn.dispatch_at(seq, "MESSAGE_CREATE", asked.clone());
        conn.resumed();
        tokio::select! {
            calls = sent_in(&api, "4400", 1) => break calls,
            // Not back yet: refused again, and resumed again after a backoff.
            _ = conn.closed() => {}
        }
    };
    assert_eq!(calls.len(), 1);
    let metrics = fleet.metrics().await;
    has(
        &metrics,
        "hermes_discord_gateway_events_total{outcome=\"accepted\"} 1",
    );
    assert!(metrics.contains("hermes_discord_gateway_events_total{outcome=\"unconfirmed\"}"));
    let sql = "SELECT count(*) FROM agent_runs";
    assert_eq!(count(&env.db(), sql, &[]).await, 1, "one run");
    println!("answered after {resumes} resume(s) once the broker was back");
    fleet.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_invalid_session_identifies_anew_and_a_fatal_close_stops_the_shard() {
    let gateway = FakeGateway::start().await;
    let (mut env, _model, api) = setup(&gateway).await;
    // Without transport compression, as a proxy that cannot inflate would need.
    env.set("DISCORD_GATEWAY_COMPRESSION", "none");
    let fleet = env.start(&[Service::DiscordGateway]).await;

    let mut conn = gateway.connection().await;
    assert!(!conn.compressed, "compression was asked for with none");
    identified(&mut conn, &gateway, "sess-1").await;
    // Resumable: the same session is resumed.
    conn.invalid_session(true);
    conn.closed().await;
    let mut conn = gateway.connection().await;
    conn.hello(45_000);
    assert_eq!(conn.expect(6).await["d"]["session_id"], "sess-1");

    // Not resumable: after 1 to 5 seconds, a new Identify (the process's identify gate
    // spaces Identifies 5 seconds apart, too).
    conn.invalid_session(false);
    conn.closed().await;
    let mut conn = gateway.connection().await;
    let identify = identified(&mut conn, &gateway, "sess-2").await;
    assert_eq!(identify["shard"], json!([0, 1]));

    // 4004, authentication failed: the shard stops, its lease is handed back, and it says so.
    conn.close(4004);
    let metrics = eventually(
        Duration::from_secs(10),
        "the fatal close counted",
        || async {
            let m = fleet.metrics().await;
            m.contains("hermes_discord_gateway_fatal_closes_total{code=\"4004\"} 1")
                .then_some(m)
        },
    )
    .await;
    assert!(metrics.contains("hermes_discord_gateway_identifies_total{shard=\"0/1\"} 2"));
    let leases = "SELECT count(*) FROM leases WHERE name = 'discord-shard-0/1'";
    eventually(Duration::from_secs(10), "the lease handed back", || async {
        (count(&env.db(), leases, &[]).await == 0).then_some(())
    })
    .await;
    assert!(!gateway.has_connection().await, "no reconnect after 4004");
    assert!(discord_calls(&api).await.iter().all(|c| c.method == "GET"));
    // The process stays up, its metrics telling (the `shards unheld` alert fires).
    fleet.stop().await.unwrap();
}

/// The lease's expiry, in seconds since the epoch, read by `sql`.
async fn expires(db: &hermes_db::Db, sql: &str) -> f64 {
    let client = db.get().await.expect("database connection");
    client.query_one(sql, &[]).await.unwrap().get(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_connectors_hold_the_shard_once_and_a_killed_ones_is_taken_over() {
    let gateway = FakeGateway::start().await;
    let (mut env, _model, _api) = setup(&gateway).await;
    // The settings instead of `GET /gateway/bot`; a short lease.
    env.set("DISCORD_GATEWAY_URL", gateway.url())
        .set("DISCORD_SHARD_COUNT", "1")
        .set("DISCORD_SHARD_LEASE_SECS", "2");
    let first = env.start_killable(&[Service::DiscordGateway]).await;
    let mut conn = gateway.connection().await;
    identified(&mut conn, &gateway, "sess-1").await;
    let second = env.start(&[Service::DiscordGateway]).await;

    // The second replica looks for the lease every renewal period; while the first renews
    // it (twice here), the second never connects.
    let expiry = "SELECT extract(epoch FROM expires_at)::float8 FROM leases WHERE name = 'discord-shard-0/1'";
    let db = env.db();
    let first_expiry = expires(&db, expiry).await;
    eventually(Duration::from_secs(10), "two renewals", || async {
        (expires(&db, expiry).await >= first_expiry + 1.2).then_some(())
    })
    .await;
    assert_eq!(gateway.accepted(), 1, "one session for the shard");
    let standby = second.metrics().await;
    assert!(!standby.contains("hermes_discord_gateway_shards_held 1"));

    // The first Identify's turn (5 s, shared by every replica) has passed: the measure below
    // is the takeover's, not Discord's Identify window.
    let turn =
        "SELECT (expires_at < now())::int::bigint FROM leases WHERE name = 'discord-identify-0'";
    eventually(
        Duration::from_secs(10),
        "the Identify turn over",
        || async { (count(&db, turn, &[]).await == 1).then_some(()) },
    )
    .await;

    // The holder dies: the other replica takes the shard within one lease period (it looks
    // again as the lease expires) and identifies.
    let killed = Instant::now();
    first.kill();
    drop(conn);
    let mut conn = gateway.connection().await;
    identified(&mut conn, &gateway, "sess-2").await;
    let took = killed.elapsed();
    // The lease period, and a second for the connection on a busy machine.
    assert!(took < Duration::from_secs(3), "taken over after {took:?}");
    let metrics = eventually(Duration::from_secs(10), "the takeover counted", || async {
        let m = second.metrics().await;
        m.contains("hermes_discord_gateway_lease_takeovers_total{shard=\"0/1\"} 1")
            .then_some(m)
    })
    .await;
    assert!(metrics.contains("hermes_discord_gateway_shards_held 1"));
    println!("shard taken over {took:?} after its holder was killed (lease 2 s)");

    // A graceful stop closes the session and hands the lease back at once.
    second.stop().await.unwrap();
    assert_eq!(conn.closed().await, Some(1000));
    let leases = "SELECT count(*) FROM leases WHERE name = 'discord-shard-0/1'";
    assert_eq!(count(&db, leases, &[]).await, 0);
}

/// `metrics` holds the sample `line`.
fn has(metrics: &str, line: &str) {
    assert!(metrics.contains(line), "{line} in\n{metrics}");
}
