//! The console's parked-messages page (docs/console.md) through the real ingest and delivery:
//! a reply Telegram refused (chat not found) is parked as `invalid_recipient`; the page counts it per stage and
//! reason and shows its failure with the message inert; a replay without the confirmation or
//! the login's token changes nothing; replayed once Telegram accepts again, it is sent once
//! and leaves the queue; a purge deletes what is ticked and nothing else. Each action is in
//! the activity log with who did it.

use std::time::Duration;

use hermes::Service;
use hermes_bus::{Bus, Stage};
use hermes_testkit::{
    TestEnv, answered, eventually, telegram_ok, telegram_send_message, telegram_sent,
};
use hermes_types::envelope::Envelope;
use hermes_types::ids::RunId;
use hermes_types::model::{Platform, ReplyTo};
use reqwest::header::{COOKIE, LOCATION};
use wiremock::{MockServer, ResponseTemplate};

use crate::console::{browser, browser_logged_in, client, csrf_of, get, logged_in};

const TOKEN: &str = "123:abc";
const MARKUP: &str = "<img src=x onerror=alert(1)>";

/// A reply to Telegram chat `chat` saying `text`, as the llm stage hands it to delivery.
fn reply(chat: &str, text: &str) -> Envelope {
    Envelope::new(
        RunId::new(),
        None,
        &answered(ReplyTo::chat(Platform::Telegram, chat), text),
    )
}

async fn parked(bus: &Bus) -> u32 {
    bus.queue_stats(&bus.names().parking(Stage::Delivery))
        .await
        .unwrap()
        .0
}

async fn post(fleet: &hermes_testkit::Fleet, cookie: &str, form: String) -> reqwest::Response {
    client()
        .post(fleet.url("/console/parked"))
        .header(COOKIE, cookie)
        .header("content-type", "application/x-www-form-urlencoded")
        .body(form)
        .send()
        .await
        .unwrap()
}

/// What Telegram received, once it has received something (the replayed reply).
async fn sent_once_replayed(telegram: &MockServer) -> Vec<serde_json::Value> {
    eventually(
        Duration::from_secs(30),
        "the replayed reply sent",
        || async {
            let sent = telegram_sent(telegram).await;
            (!sent.is_empty()).then_some(sent)
        },
    )
    .await
}

/// Ingest with the console and delivery, sending to a Telegram that refuses every message
/// (chat not found), so that replies are parked.
struct Refusing {
    telegram: MockServer,
    env: TestEnv,
    fleet: hermes_testkit::Fleet,
    bus: Bus,
}

impl Refusing {
    async fn start() -> Self {
        let telegram = MockServer::start().await;
        telegram_send_message(TOKEN)
            .respond_with(ResponseTemplate::new(400).set_body_json(serde_json::json!({
                "ok": false, "error_code": 400, "description": "Bad Request: chat not found"
            })))
            .mount(&telegram)
            .await;
        let mut env = TestEnv::new().await;
        env.set("HERMES_CONSOLE", "true")
            .set("TELEGRAM_BOT_TOKEN", TOKEN)
            .set("TELEGRAM_API_BASE_URL", &telegram.uri())
            .set("HERMES_SEND_PAUSES_MS", "10");
        let fleet = env.start(&[Service::Ingest, Service::Delivery]).await;
        let bus = env.bus().await;
        Self {
            telegram,
            env,
            fleet,
            bus,
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_operator_replays_and_purges_parked_replies_from_the_console() {
    let Refusing {
        telegram,
        env,
        fleet,
        bus,
    } = Refusing::start().await;
    let kept = reply("4242", &format!("to replay {MARKUP}"));
    let dropped = reply("4343", "to purge");
    bus.publish(&kept).await.unwrap();
    bus.publish(&dropped).await.unwrap();
    eventually(Duration::from_secs(30), "both replies parked", || async {
        (parked(&bus).await == 2).then_some(())
    })
    .await;

    let cookie = logged_in(&fleet).await;
    let list = get(&fleet, "/console/parked?stage=delivery", &cookie).await;
    assert_eq!(list.status(), 200);
    let list = list.text().await.unwrap();
    assert!(list.contains(&kept.id.to_string()), "{list}");
    assert!(list.contains("By stage and reason"), "{list}");
    let csrf = csrf_of(&list);
    // Looking put both back.
    assert_eq!(parked(&bus).await, 2);

    let shown = get(
        &fleet,
        &format!("/console/parked/delivery/{}", kept.id),
        &cookie,
    )
    .await;
    assert_eq!(shown.status(), 200);
    let shown = shown.text().await.unwrap();
    assert!(shown.contains("invalid_recipient"), "{shown}");
    assert!(
        shown.contains("&lt;img src=x onerror=alert(1)&gt;"),
        "{shown}"
    );
    assert!(!shown.contains(MARKUP));

    let ticked = |id: &Envelope| format!("id=delivery%2F{}", id.id);
    // Neither a form without the confirmation nor one without the login's token acts.
    let unconfirmed = post(
        &fleet,
        &cookie,
        format!("csrf={csrf}&action=replay&{}", ticked(&kept)),
    )
    .await;
    assert_eq!(unconfirmed.status(), 400);
    let forged = post(
        &fleet,
        &cookie,
        format!("csrf=nope&action=replay&confirm=yes&{}", ticked(&kept)),
    )
    .await;
    assert_eq!(forged.status(), 403);
    assert_eq!(parked(&bus).await, 2);

    // Telegram takes messages again: the ticked reply is replayed and sent, once.
    telegram.reset().await;
    telegram_send_message(TOKEN)
        .respond_with(telegram_ok())
        .mount(&telegram)
        .await;
    let replayed = post(
        &fleet,
        &cookie,
        format!("csrf={csrf}&action=replay&confirm=yes&{}", ticked(&kept)),
    )
    .await;
    assert_eq!(replayed.status(), 303);
    assert_eq!(
        replayed.headers()[LOCATION],
        "/console/parked?stage=delivery&done=replayed&n=1"
    );
    let sent = sent_once_replayed(&telegram).await;
    assert_eq!(sent.len(), 1, "{sent:?}");
    assert_eq!(sent[0]["chat_id"], "4242");
    assert_eq!(parked(&bus).await, 1, "the other reply stays parked");

    let purged = post(
        &fleet,
        &cookie,
        format!("csrf={csrf}&action=purge&confirm=yes&{}", ticked(&dropped)),
    )
    .await;
    assert_eq!(purged.status(), 303);
    assert_eq!(parked(&bus).await, 0);
    let after = get(
        &fleet,
        "/console/parked?stage=delivery&done=purged&n=1",
        &cookie,
    )
    .await
    .text()
    .await
    .unwrap();
    assert!(after.contains("Purged 1 message(s)."), "{after}");
    assert!(
        telegram_sent(&telegram).await.len() == 1,
        "a purge sends nothing"
    );

    let c = env.db().get().await.unwrap();
    let logged: Vec<(String, i64)> = c
        .query(
            "SELECT kind, (data->>'messages')::bigint FROM activity_events
             WHERE data->>'from' = 'console' ORDER BY id",
            &[],
        )
        .await
        .unwrap()
        .iter()
        .map(|r| (r.get(0), r.get(1)))
        .collect();
    assert_eq!(
        logged,
        vec![("parked_replayed".into(), 1), ("parked_purged".into(), 1)]
    );
    bus.close().await;
    fleet.stop().await.unwrap();
}

/// The same replay in a real headless Chromium: the message ticked, the confirmation ticked,
/// Replay pressed; the page says it was replayed and Telegram receives it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn in_a_real_browser_a_parked_reply_is_ticked_replayed_and_sent() {
    let Some(browser) = browser().await else {
        return;
    };
    let Refusing {
        telegram,
        // Kept to the end: its drop removes the test's database and queues.
        env: _env,
        fleet,
        bus,
    } = Refusing::start().await;
    let kept = reply("5151", "sent at last");
    bus.publish(&kept).await.unwrap();
    eventually(Duration::from_secs(30), "the reply parked", || async {
        (parked(&bus).await == 1).then_some(())
    })
    .await;
    telegram.reset().await;
    telegram_send_message(TOKEN)
        .respond_with(telegram_ok())
        .mount(&telegram)
        .await;

    browser_logged_in(&browser, &fleet, "/console/parked").await;
    browser
        .goto(&fleet.url("/console/parked?stage=delivery"))
        .await;
    browser.click(&format!("#m-{}", kept.id)).await;
    browser.click("#confirm").await;
    browser.click("button[value=replay]").await;
    browser.wait_for_url("done=replayed&n=1").await;
    assert!(browser.source().await.contains("Replayed 1 message(s)."));
    let sent = sent_once_replayed(&telegram).await;
    assert_eq!(sent[0]["chat_id"], "5151");
    assert_eq!(parked(&bus).await, 0);
    browser.quit().await;
    bus.close().await;
    fleet.stop().await.unwrap();
}
