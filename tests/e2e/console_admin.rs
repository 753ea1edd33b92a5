//! The console's jobs and users pages (docs/console.md) through the real ingest: a job paused,
//! resumed and run now (a second run now refused by the job interval, as the API refuses
//! it), each written to the activity log; a user found by their chat sender, their credits,
//! budgets and channels shown with their name inert, and erased only once their id is typed.

use hermes::Service;
use hermes_testkit::{Fleet, KEY, TestEnv};
use hermes_types::model::Platform;
use reqwest::header::{COOKIE, LOCATION};
use serde_json::json;

use crate::console::{client, csrf_of, get, logged_in};
use crate::jobs::create_job;

const MARKUP: &str = "<script>alert(1)</script>";

/// POST `form` to `path` with the login's `cookie`.
async fn post(fleet: &Fleet, path: &str, cookie: &str, form: String) -> reqwest::Response {
    client()
        .post(fleet.url(path))
        .header(COOKIE, cookie)
        .header("content-type", "application/x-www-form-urlencoded")
        .body(form)
        .send()
        .await
        .unwrap()
}

/// The activity log's kinds written from the console, oldest first.
async fn logged(env: &TestEnv) -> Vec<String> {
    let c = env.db().get().await.unwrap();
    c.query(
        "SELECT kind FROM activity_events WHERE data->>'from' = 'console' ORDER BY id",
        &[],
    )
    .await
    .unwrap()
    .iter()
    .map(|r| r.get(0))
    .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_operator_pauses_resumes_and_runs_a_job_from_the_console() {
    let mut env = TestEnv::new().await;
    env.set("HERMES_CONSOLE", "true")
        .set("HERMES_JOB_MIN_INTERVAL_SECS", "3600");
    // Ingest alone: no scheduler moves the job under the test.
    let fleet = env.start(&[Service::Ingest]).await;
    let name = format!("digest {MARKUP}");
    let id = create_job(
        &fleet,
        KEY,
        json!({"name": name, "prompt": "summarize the day",
               "schedule": {"every_seconds": 3600}, "target": {"type": "stored"}}),
    )
    .await;
    let cookie = logged_in(&fleet).await;
    let page = get(&fleet, "/console/jobs", &cookie).await;
    assert_eq!(page.status(), 200);
    let page = page.text().await.unwrap();
    assert!(page.contains("digest &lt;script&gt;"), "{page}");
    assert!(!page.contains(MARKUP));
    assert!(page.contains("Pause"), "{page}");
    let csrf = csrf_of(&page);
    let path = format!("/console/jobs/{id}");

    // Without the login's token nothing changes.
    let forged = post(&fleet, &path, &cookie, "csrf=nope&action=pause".into()).await;
    assert_eq!(forged.status(), 403);
    let paused = |env: &TestEnv| {
        let db = env.db();
        let id = id.clone();
        async move {
            let c = db.get().await.unwrap();
            c.query_one("SELECT paused FROM jobs WHERE id = $1::text::uuid", &[&id])
                .await
                .unwrap()
                .get::<_, bool>(0)
        }
    };
    assert!(!paused(&env).await);

    for (action, now_paused) in [("pause", true), ("resume", false)] {
        let resp = post(
            &fleet,
            &path,
            &cookie,
            format!("csrf={csrf}&action={action}"),
        )
        .await;
        assert_eq!(resp.status(), 303, "{action}");
        assert_eq!(resp.headers()[LOCATION], "/console/jobs");
        assert_eq!(paused(&env).await, now_paused, "{action}");
    }
    let run = post(&fleet, &path, &cookie, format!("csrf={csrf}&action=run")).await;
    assert_eq!(run.status(), 303);
    let again = post(&fleet, &path, &cookie, format!("csrf={csrf}&action=run")).await;
    assert_eq!(again.status(), 429);
    let why = again.text().await.unwrap();
    assert!(why.contains("HERMES_JOB_MIN_INTERVAL_SECS"), "{why}");
    let c = env.db().get().await.unwrap();
    let runs: i64 = c
        .query_one(
            "SELECT count(*) FROM job_runs WHERE job_id = $1::text::uuid AND trigger = 'manual'",
            &[&id],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(runs, 1, "run now queued one run");
    let bogus = post(&fleet, &path, &cookie, format!("csrf={csrf}&action=delete")).await;
    assert_eq!(bogus.status(), 400);
    assert_eq!(
        logged(&env).await,
        ["job_paused", "job_resumed", "job_run_now"]
    );
    let page = get(&fleet, "/console/jobs", &cookie)
        .await
        .text()
        .await
        .unwrap();
    assert!(page.contains("(manual)"), "the latest run is shown: {page}");
    fleet.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_operator_finds_a_user_and_erases_them_only_once_their_id_is_typed() {
    let mut env = TestEnv::new().await;
    env.set("HERMES_CONSOLE", "true");
    let user = env.user(Platform::Telegram, "4242", 7).await;
    let c = env.db().get().await.unwrap();
    c.execute(
        "UPDATE users SET display_name = $2 WHERE id = $1",
        &[&user.id, &MARKUP],
    )
    .await
    .unwrap();
    let fleet = env.start(&[Service::Ingest]).await;
    let cookie = logged_in(&fleet).await;

    // Found by the chat sender; a search that names nobody says so.
    let found = get(&fleet, "/console/users?q=telegram%3A4242", &cookie).await;
    assert_eq!(found.status(), 303);
    let at = format!("/console/users/{}", user.id);
    assert_eq!(found.headers()[LOCATION], at.as_str());
    let nobody = get(&fleet, "/console/users?q=telegram%3A999", &cookie).await;
    assert_eq!(nobody.status(), 200);
    assert!(
        nobody
            .text()
            .await
            .unwrap()
            .contains("No user is telegram:999")
    );
    let list = get(&fleet, "/console/users", &cookie)
        .await
        .text()
        .await
        .unwrap();
    assert!(list.contains(&user.id.to_string()) && !list.contains(MARKUP));

    let page = get(&fleet, &at, &cookie).await;
    assert_eq!(page.status(), 200);
    let page = page.text().await.unwrap();
    assert!(
        page.contains("&lt;script&gt;") && !page.contains(MARKUP),
        "{page}"
    );
    assert!(page.contains("<dt>Credits</dt><dd>7</dd>"), "{page}");
    assert!(
        page.contains("<dt>Tokens today (UTC)</dt><dd>0 of 50000</dd>"),
        "{page}"
    );
    assert!(page.contains("<code>4242</code>"), "{page}");
    let csrf = csrf_of(&page);

    let erase = format!("{at}/erase");
    let wrong = post(&fleet, &erase, &cookie, format!("csrf={csrf}&confirm=yes")).await;
    assert_eq!(wrong.status(), 400);
    let exists = || async {
        c.query_one("SELECT count(*) FROM users WHERE id = $1", &[&user.id])
            .await
            .unwrap()
            .get::<_, i64>(0)
    };
    assert_eq!(exists().await, 1, "not erased without the id typed");
    let done = post(
        &fleet,
        &erase,
        &cookie,
        format!("csrf={csrf}&confirm={}", user.id),
    )
    .await;
    assert_eq!(done.status(), 200);
    assert!(done.text().await.unwrap().contains("erased"));
    assert_eq!(exists().await, 0);
    let channels: i64 = c
        .query_one(
            "SELECT count(*) FROM user_channels WHERE sender_id = '4242'",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(channels, 0);
    assert_eq!(get(&fleet, &at, &cookie).await.status(), 404);
    assert_eq!(logged(&env).await, ["user_erased"]);
    fleet.stop().await.unwrap();
}

/// An external agent of the default workspace, `profile_key`, named `name`, 3 runs at once.
pub(crate) async fn external_agent(
    c: &hermes_db::Client,
    profile_key: &str,
    name: &str,
) -> hermes_db::agents::Agent {
    use hermes_db::agents::{self, NewAgent};
    use hermes_types::agent::{AgentKind, EngagementMode, Tone};
    agents::create(
        c,
        &NewAgent {
            workspace: "default",
            profile_key,
            kind: AgentKind::External,
            display_name: name,
            tone: Tone::Friendly,
            role: None,
            role_instructions: None,
            tier: None,
            toolsets: &[],
            capabilities: &[],
            webhook_url: Some("https://agent.example/wake"),
            webhook_secret_sealed: None,
            max_concurrent: 3,
            engagement_mode: EngagementMode::Execute,
        },
    )
    .await
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_agents_page_shows_presence_capacity_and_how_recent_runs_went() {
    let mut env = TestEnv::new().await;
    env.set("HERMES_CONSOLE", "true");
    let c = env.db().get().await.unwrap();
    let agent = external_agent(&c, "victor", MARKUP).await;
    // Made a day ago and never heard from since.
    c.execute(
        "UPDATE agents SET created_at = now() - interval '1 day' WHERE id = $1",
        &[&agent.id],
    )
    .await
    .unwrap();
    // Three runs of the last day: one acknowledged after 2 s and answered after 4 s, one
    // answered after 6 s with one re-wake, one open that expired after three wakes; and
    // one open run now.
    c.execute(
        "INSERT INTO agent_runs (id, platform, sender_id, chat_id, status, tier, agent_id,
                                 created_at, acked_at, answered_at, wakes)
         VALUES
           (gen_random_uuid(), 'api', 's', 'c', 'completed', 'free', $1, now() - interval '10 s',
            now() - interval '8 s', now() - interval '6 s', 1),
           (gen_random_uuid(), 'api', 's', 'c', 'completed', 'free', $1, now() - interval '10 s',
            NULL, now() - interval '4 s', 2),
           (gen_random_uuid(), 'api', 's', 'c', 'expired', 'free', $1, now() - interval '10 s',
            NULL, NULL, 3),
           (gen_random_uuid(), 'api', 's', 'c', 'routed', 'free', $1, now(), NULL, NULL, 1)",
        &[&agent.id],
    )
    .await
    .unwrap();
    let fleet = env.start(&[Service::Ingest]).await;
    let cookie = logged_in(&fleet).await;
    let page = get(&fleet, "/console/agents", &cookie).await;
    assert_eq!(page.status(), 200);
    let page = page.text().await.unwrap();
    assert!(
        page.contains("<strong>victor</strong> &lt;script&gt;"),
        "{page}"
    );
    assert!(!page.contains(MARKUP));
    // Silent past the presence window: offline, as dispatch counts it.
    assert!(page.contains("<td>OFFLINE, never heard</td>"), "{page}");
    assert!(
        page.contains("<td>1 of 3</td><td>4</td><td>2.0 s</td><td>5.0 s</td><td>3</td><td>1</td>"),
        "open of capacity, runs, medians to ack and answer, re-wakes, expired: {page}"
    );
    let other = get(&fleet, "/console/agents?workspace=nowhere", &cookie).await;
    assert!(
        other
            .text()
            .await
            .unwrap()
            .contains("No agent in this workspace")
    );
    fleet.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_conversation_reads_as_the_operator_tools_read_it_with_names_inert() {
    use crate::agent_mcp::{env_with, peer};
    use crate::operator_mcp::conversations;

    let peer = peer().await;
    let mut env = env_with(&peer).await;
    env.set("HERMES_CONSOLE", "true");
    let fleet = env.start(&Service::ALL).await;
    conversations(&env, &fleet, &[(4242, MARKUP), (5151, "Grace")]).await;
    let cookie = logged_in(&fleet).await;

    let list = get(&fleet, "/console/conversations", &cookie).await;
    assert_eq!(list.status(), 200);
    let list = list.text().await.unwrap();
    assert!(
        list.contains("telegram:4242") && list.contains("telegram:5151"),
        "{list}"
    );
    assert!(
        list.contains("&lt;script&gt;") && !list.contains(MARKUP),
        "{list}"
    );
    let filtered = get(&fleet, "/console/conversations?search=Grace", &cookie).await;
    let filtered = filtered.text().await.unwrap();
    assert!(filtered.contains("telegram:5151") && !filtered.contains("telegram:4242"));
    let bad = get(&fleet, "/console/conversations?platform=fax", &cookie).await;
    assert_eq!(
        bad.status(),
        400,
        "an unknown platform is the caller's mistake"
    );

    let at = list
        .find("/console/conversations/")
        .expect("a conversation's link");
    let link = &list[at..at + "/console/conversations/".len() + 36];
    let page = get(&fleet, link, &cookie).await;
    assert_eq!(page.status(), 200);
    let page = page.text().await.unwrap();
    assert!(
        page.contains("<strong>User</strong>") && page.contains("<strong>Hermes</strong>"),
        "{page}"
    );
    assert!(
        page.contains("/console/runs/"),
        "each message links its run: {page}"
    );
    assert!(page.contains("/console/users/"), "{page}");
    assert!(!page.contains(MARKUP));
    let none = get(
        &fleet,
        &format!("/console/conversations/{}", uuid::Uuid::now_v7()),
        &cookie,
    )
    .await;
    assert_eq!(none.status(), 404);
    fleet.stop().await.unwrap();
}
