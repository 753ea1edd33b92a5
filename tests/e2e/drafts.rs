//! An external agent's draft on its way to a chat (docs/agents.md, "How drafts are shown"):
//! draft updates and the final reply published straight onto a fleet's delivery queue, with
//! run and draft rows made in the test's database and a wiremock Telegram. Telegram shows one
//! message edited as the draft grows and then replaced by the answer; an update older than
//! what is shown, or after the answer, sends nothing; a long answer edits the draft to its
//! first part and sends the rest, once, even when a send fails half-way; two updates in
//! flight together show one message; an answer whose draft message is gone, or was never
//! shown, goes as a new message; WhatsApp shows no drafts.

use std::time::Duration;

use hermes::Service;
use hermes_bus::Bus;
use hermes_db::drafts;
use hermes_testkit::{TestEnv, eventually, metric, telegram_send_message, telegram_sent};
use hermes_types::agent::EngagementMode;
use hermes_types::envelope::Envelope;
use hermes_types::ids::{AgentId, DraftId, RunId};
use hermes_types::model::{DraftUpdate, Platform, Reply, ReplyTo};
use serde_json::{Value, json};
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

use crate::delivery::{TG_TOKEN, bodies, sender_env};

const CHAT: &str = "4242";
/// The id the fake Telegram gives every sent message.
const SHOWN_ID: i64 = 501;

fn tg(method_name: &str) -> String {
    format!("/bot{TG_TOKEN}/{method_name}")
}

/// The delivery tests' senders, with a rate gate loose enough that no draft edit is skipped
/// as too soon, and queued retries a second apart.
async fn draft_env(api: &MockServer) -> TestEnv {
    let mut env = sender_env(api).await;
    env.set("HERMES_DELIVERY_CHAT_PER_SEC", "1000")
        .set("HERMES_DELIVERY_CHAT_BURST", "100")
        .set("HERMES_DELIVERY_BOT_PER_SEC", "1000")
        .set("HERMES_DELIVERY_RETRY_DELAYS", "1")
        .set(
            "HERMES_SECRET_KEYS",
            "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=",
        );
    env
}

/// Telegram answering every send with message [`SHOWN_ID`] and every edit with success.
async fn telegram(api: &MockServer) {
    telegram_send_message(TG_TOKEN)
        .respond_with(ResponseTemplate::new(200).set_body_json(
            json!({"ok": true, "result": {"message_id": SHOWN_ID, "chat": {"id": 4242}}}),
        ))
        .mount(api)
        .await;
    Mock::given(method("POST"))
        .and(path(tg("editMessageText")))
        .respond_with(
            ResponseTemplate::new(200)
                .set_body_json(json!({"ok": true, "result": {"message_id": SHOWN_ID}})),
        )
        .mount(api)
        .await;
}

/// An external agent, an open run of a chat on `platform`, and a draft of it.
async fn drafted_run(env: &TestEnv, platform: Platform) -> (AgentId, RunId, DraftId) {
    let agent = env
        .external_agent(
            "scribe",
            "https://agent.example/wake",
            "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",
            3,
            EngagementMode::Execute,
        )
        .await
        .id;
    let (run, draft) = another_run(env, agent, platform).await;
    (agent, run, draft)
}

/// Another open run of `agent` for the chat on `platform`, and a draft of it.
async fn another_run(env: &TestEnv, agent: AgentId, platform: Platform) -> (RunId, DraftId) {
    let c = env.db().get().await.unwrap();
    let run = RunId::new();
    c.execute(
        "INSERT INTO agent_runs (id, platform, sender_id, status, tier)
         VALUES ($1, $2, $3, 'routed', 'free')",
        &[&run.as_uuid(), &platform.as_str(), &CHAT],
    )
    .await
    .unwrap();
    let draft = drafts::start(&c, run, agent).await.unwrap();
    (run, draft)
}

fn to(platform: Platform) -> ReplyTo {
    ReplyTo {
        platform,
        chat_id: CHAT.into(),
        callback_url: None,
        quote: None,
        interaction: None,
    }
}

fn update(run: RunId, draft: DraftId, platform: Platform, text: &str, chunks: i32) -> Envelope {
    let update = DraftUpdate {
        draft_id: draft,
        reply_to: to(platform),
        text: text.into(),
        chunks,
    };
    Envelope::new(run, None, &update)
}

/// Finalize `draft` with `text` (as `chat.finalizeDraft` does) and return its final reply.
async fn finalize(
    env: &TestEnv,
    agent: AgentId,
    run: RunId,
    draft: DraftId,
    text: &str,
) -> Envelope {
    let mut c = env.db().get().await.unwrap();
    let tx = c.transaction().await.unwrap();
    assert!(drafts::finalize(&tx, draft, agent, text).await.unwrap());
    tx.commit().await.unwrap();
    let reply = Reply {
        draft_id: Some(draft),
        ..Reply::notice(to(Platform::Telegram), "stop".into(), text)
    };
    Envelope::new(run, None, &reply)
}

/// The JSON bodies `api` received on Telegram method `m`, in order.
async fn tg_bodies(api: &MockServer, m: &str) -> Vec<Value> {
    bodies(api, &tg(m)).await
}

async fn wait_shown(env: &TestEnv, draft: DraftId, chunks: i32) {
    eventually(Duration::from_secs(15), "the draft shown", || async {
        let c = env.db().get().await.ok()?;
        let d = drafts::get(&c, draft, None).await.ok()??;
        (d.shown_chunks == chunks).then_some(())
    })
    .await;
}

async fn wait_run_closed(env: &TestEnv, run: RunId) {
    eventually(Duration::from_secs(15), "the run closed", || async {
        let c = env.db().get().await.ok()?;
        let r = hermes_db::runs::get(&c, run).await.ok()??;
        r.status.is_final().then_some(())
    })
    .await;
}

/// Wait until `hermes_agent_draft_updates_total{outcome}` reaches `n`.
async fn wait_outcome(fleet: &hermes_testkit::Fleet, outcome: &str, n: f64) {
    let series = format!("hermes_agent_draft_updates_total{{outcome=\"{outcome}\"}}");
    eventually(Duration::from_secs(15), &series, || async {
        let seen = metric(&fleet.metrics().await, &series)?;
        (seen >= n).then_some(())
    })
    .await;
}

async fn publish(bus: &Bus, env: &Envelope) {
    bus.publish(env).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_telegram_draft_is_one_message_edited_as_it_grows_then_replaced_by_the_answer() {
    let api = MockServer::start().await;
    telegram(&api).await;
    let env = draft_env(&api).await;
    let fleet = env.start(&[Service::Delivery]).await;
    let bus = env.bus().await;
    let (agent, run, draft) = drafted_run(&env, Platform::Telegram).await;

    for (chunks, text) in [
        (1, "The bar"),
        (2, "The bar opens"),
        (3, "The bar opens at 6"),
    ] {
        publish(&bus, &update(run, draft, Platform::Telegram, text, chunks)).await;
        wait_shown(&env, draft, chunks).await;
    }
    // An update older than what the chat shows arrives late: dropped, nothing sent.
    publish(
        &bus,
        &update(run, draft, Platform::Telegram, "The bar opens", 2),
    )
    .await;
    wait_outcome(&fleet, "dropped", 1.0).await;

    let answer = "The bar opens at *6 pm* and closes late.";
    let reply = finalize(&env, agent, run, draft, answer).await;
    publish(&bus, &reply).await;
    wait_run_closed(&env, run).await;

    // A draft update that comes after the answer sends nothing.
    publish(
        &bus,
        &update(run, draft, Platform::Telegram, "The bar opens at 6 pm", 4),
    )
    .await;
    wait_outcome(&fleet, "dropped", 2.0).await;

    let sends = telegram_sent(&api).await;
    assert_eq!(sends.len(), 1, "one message shows the draft: {sends:?}");
    assert_eq!(sends[0], json!({"chat_id": CHAT, "text": "The bar"}));
    let edits = tg_bodies(&api, "editMessageText").await;
    let texts: Vec<&str> = edits.iter().map(|e| e["text"].as_str().unwrap()).collect();
    assert_eq!(texts, ["The bar opens", "The bar opens at 6", answer]);
    assert!(
        edits
            .iter()
            .all(|e| e["message_id"] == SHOWN_ID && e["chat_id"] == CHAT)
    );
    assert_eq!(
        edits[2]["parse_mode"], "Markdown",
        "the answer is formatted like any reply"
    );
    assert!(
        edits[0].get("parse_mode").is_none(),
        "a draft goes as plain text"
    );

    let metrics = fleet.metrics().await;
    let count = |o: &str| {
        metric(
            &metrics,
            &format!("hermes_agent_draft_updates_total{{outcome=\"{o}\"}}"),
        )
    };
    assert_eq!(count("shown"), Some(1.0));
    assert_eq!(count("edited"), Some(2.0));
    assert_eq!(count("dropped"), Some(2.0));
    assert_eq!(count("skipped"), Some(0.0));
    fleet.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_long_answer_edits_the_draft_to_its_first_part_and_sends_the_rest_once() {
    let api = MockServer::start().await;
    telegram(&api).await;
    let env = draft_env(&api).await;
    let fleet = env.start(&[Service::Delivery]).await;
    let bus = env.bus().await;

    // WhatsApp shows no drafts: its update is dropped without a request.
    let (_, wa_run, wa_draft) = drafted_run(&env, Platform::Whatsapp).await;
    publish(
        &bus,
        &update(wa_run, wa_draft, Platform::Whatsapp, "Hola", 1),
    )
    .await;
    wait_outcome(&fleet, "dropped", 1.0).await;
    assert!(api.received_requests().await.unwrap().is_empty());

    let c = env.db().get().await.unwrap();
    let agent = drafts::get(&c, wa_draft, None)
        .await
        .unwrap()
        .unwrap()
        .agent_id;
    let (run, draft) = another_run(&env, agent, Platform::Telegram).await;
    publish(
        &bus,
        &update(run, draft, Platform::Telegram, "Chapter one", 1),
    )
    .await;
    wait_shown(&env, draft, 1).await;

    // The second part's first attempt fails (four in-call tries); its queued retry goes on
    // from what the first attempt did: the draft is not edited again.
    telegram_send_message(TG_TOKEN)
        .respond_with(ResponseTemplate::new(500))
        .up_to_n_times(4)
        .with_priority(1)
        .mount(&api)
        .await;
    let first = "a".repeat(4000);
    let second = "b".repeat(500);
    let answer = format!("{first}\n\n{second}");
    let reply = finalize(&env, agent, run, draft, &answer).await;
    publish(&bus, &reply).await;
    wait_run_closed(&env, run).await;

    let edits = tg_bodies(&api, "editMessageText").await;
    assert_eq!(
        edits.len(),
        1,
        "the draft is edited once, to the first part"
    );
    assert_eq!(edits[0]["text"], first.as_str());
    assert_eq!(edits[0]["message_id"], SHOWN_ID);
    let sends = telegram_sent(&api).await;
    let texts: Vec<&str> = sends.iter().map(|s| s["text"].as_str().unwrap()).collect();
    assert_eq!(texts[0], "Chapter one");
    assert_eq!(
        texts.len(),
        1 + 4 + 1,
        "the draft, four failed tries, the retry: {texts:?}"
    );
    assert!(texts[1..].iter().all(|t| *t == second));
    fleet.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_updates_in_flight_together_show_one_message() {
    let api = MockServer::start().await;
    // A slow Telegram: the first update is still sending when the second one looks.
    telegram_send_message(TG_TOKEN)
        .respond_with(
            ResponseTemplate::new(200)
                .set_body_json(json!({"ok": true, "result": {"message_id": SHOWN_ID}}))
                .set_delay(Duration::from_millis(800)),
        )
        .mount(&api)
        .await;
    Mock::given(method("POST"))
        .and(path(tg("editMessageText")))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!({"ok": true})))
        .mount(&api)
        .await;
    let mut env = draft_env(&api).await;
    env.set("HERMES_PREFETCH", "8");
    let fleet = env.start(&[Service::Delivery]).await;
    let bus = env.bus().await;
    let (_, run, draft) = drafted_run(&env, Platform::Telegram).await;

    publish(&bus, &update(run, draft, Platform::Telegram, "Once", 1)).await;
    publish(
        &bus,
        &update(run, draft, Platform::Telegram, "Once upon", 2),
    )
    .await;
    wait_shown(&env, draft, 2).await;
    // Whichever came second either edited the message or found itself older: both are done.
    eventually(Duration::from_secs(15), "both updates handled", || async {
        let metrics = fleet.metrics().await;
        let total: f64 = ["shown", "edited", "dropped"]
            .iter()
            .filter_map(|o| {
                metric(
                    &metrics,
                    &format!("hermes_agent_draft_updates_total{{outcome=\"{o}\"}}"),
                )
            })
            .sum();
        (total >= 2.0).then_some(())
    })
    .await;
    assert_eq!(
        telegram_sent(&api).await.len(),
        1,
        "one message shows the draft"
    );
    fleet.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_answer_whose_draft_is_gone_or_never_shown_goes_as_a_new_message() {
    let api = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path(tg("editMessageText")))
        .respond_with(ResponseTemplate::new(400).set_body_json(
            json!({"ok": false, "error_code": 400, "description": "Bad Request: message to edit not found"}),
        ))
        .mount(&api)
        .await;
    telegram(&api).await;
    let env = draft_env(&api).await;
    let fleet = env.start(&[Service::Delivery]).await;
    let bus = env.bus().await;

    // Shown, then deleted by the user before the answer.
    let (agent, run, draft) = drafted_run(&env, Platform::Telegram).await;
    publish(&bus, &update(run, draft, Platform::Telegram, "Thinking", 1)).await;
    wait_shown(&env, draft, 1).await;
    publish(&bus, &finalize(&env, agent, run, draft, "The answer").await).await;
    wait_run_closed(&env, run).await;

    // Never shown (its only update was empty).
    let (quiet_run, quiet) = another_run(&env, agent, Platform::Telegram).await;
    publish(&bus, &update(quiet_run, quiet, Platform::Telegram, " ", 1)).await;
    wait_outcome(&fleet, "skipped", 1.0).await;
    publish(
        &bus,
        &finalize(&env, agent, quiet_run, quiet, "Quiet answer").await,
    )
    .await;
    wait_run_closed(&env, quiet_run).await;

    let texts: Vec<String> = telegram_sent(&api)
        .await
        .iter()
        .map(|b| b["text"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(texts, ["Thinking", "The answer", "Quiet answer"]);
    assert_eq!(tg_bodies(&api, "editMessageText").await.len(), 1);
    fleet.stop().await.unwrap();
}
