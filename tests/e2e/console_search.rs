//! The console's runs search (docs/console.md) through the real ingest: runs found by their
//! user (by id or by a linked chat sender), by their chat, by their agent and by when they
//! started, each filter kept on the next page's link; a sender nobody is linked to says so.

use hermes::Service;
use hermes_testkit::TestEnv;
use hermes_types::model::Platform;
use uuid::Uuid;

use crate::console::{get, logged_in};
use crate::console_admin::external_agent;

/// Insert a run of `user` (and `agent`) that started `ago` before now; its id.
async fn run_of(env: &TestEnv, user: Uuid, agent: Option<Uuid>, ago: &str) -> Uuid {
    let c = env.db().get().await.unwrap();
    c.query_one(
        "INSERT INTO agent_runs (id, platform, sender_id, chat_id, status, tier, user_id, agent_id, created_at)
         VALUES (gen_random_uuid(), 'telegram', 's', 'c', 'completed', 'free', $1, $2,
                 now() - $3::text::interval)
         RETURNING id",
        &[&Some(user), &agent, &ago],
    )
    .await
    .unwrap()
    .get(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn runs_are_found_by_user_agent_and_time() {
    let mut env = TestEnv::new().await;
    env.set("HERMES_CONSOLE", "true");
    let ana = env.user(Platform::Telegram, "1001", 10).await;
    let bo = env.user(Platform::Telegram, "1002", 10).await;
    let pool = env.db();
    let c = pool.get().await.unwrap();
    let agent = external_agent(&c, "scout", "Scout").await;
    let ana_old = run_of(&env, ana.id.as_uuid(), None, "3 hours").await;
    let ana_new = run_of(
        &env,
        ana.id.as_uuid(),
        Some(agent.id.as_uuid()),
        "5 minutes",
    )
    .await;
    let bo_run = run_of(&env, bo.id.as_uuid(), None, "10 minutes").await;
    // Bo wrote in a group.
    env.db()
        .get()
        .await
        .unwrap()
        .execute(
            "UPDATE agent_runs SET chat_id = 'group-7' WHERE id = $1",
            &[&bo_run],
        )
        .await
        .unwrap();
    let fleet = env.start(&[Service::Ingest]).await;
    let cookie = logged_in(&fleet).await;
    let listed = |path: String| {
        let (fleet, cookie) = (&fleet, &cookie);
        async move {
            let page = get(fleet, &path, cookie).await;
            assert_eq!(page.status(), 200, "{path}");
            let page = page.text().await.unwrap();
            let shown: Vec<bool> = [ana_old, ana_new, bo_run]
                .iter()
                .map(|r| page.contains(&format!("/console/runs/{r}\"")))
                .collect();
            (shown, page)
        }
    };

    let (by_id, _) = listed(format!("/console/runs?user={}", ana.id)).await;
    assert_eq!(by_id, [true, true, false]);
    let (by_sender, page) = listed("/console/runs?user=telegram%3A1002".into()).await;
    assert_eq!(by_sender, [false, false, true], "{page}");
    assert!(
        page.contains("value=\"telegram:1002\""),
        "the filter stays in the form"
    );
    let (by_chat, _) = listed("/console/runs?q=group-7".into()).await;
    assert_eq!(by_chat, [false, false, true]);
    let (by_agent, _) = listed(format!("/console/runs?agent={}", agent.id)).await;
    assert_eq!(by_agent, [false, true, false]);
    // The last hour, as the form's datetime-local field sends it (UTC).
    let hour_ago = (chrono::Utc::now() - chrono::Duration::hours(1)).format("%Y-%m-%dT%H:%M");
    let (recent, _) = listed(format!("/console/runs?since={hour_ago}")).await;
    assert_eq!(recent, [false, true, true]);
    let (older, _) = listed(format!("/console/runs?until={hour_ago}&user={}", ana.id)).await;
    assert_eq!(older, [true, false, false]);
    let (nobody, page) = listed("/console/runs?user=telegram%3A9999".into()).await;
    assert_eq!(nobody, [false, false, false]);
    assert!(page.contains("No user is named so"), "{page}");
    // A user's page links to their runs.
    let user_page = get(&fleet, &format!("/console/users/{}", ana.id), &cookie)
        .await
        .text()
        .await
        .unwrap();
    assert!(
        user_page.contains(&format!("/console/runs?user={}", ana.id)),
        "{user_page}"
    );
    fleet.stop().await.unwrap();
}
