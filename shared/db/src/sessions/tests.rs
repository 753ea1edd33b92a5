//! Sessions against a scratch database: continuation, idle roll-over, history, touch.

use super::*;
use crate::Db;
use crate::interactions::log_interaction;
use crate::scratch::{ScratchDb, insert_user};
use hermes_types::ids::RunId;
use hermes_types::model::Role;

const IDLE: Duration = Duration::from_secs(12 * 3600);

async fn with_db<F, Fut>(body: F)
where
    F: FnOnce(Db) -> Fut,
    Fut: Future<Output = ()>,
{
    ScratchDb::with(body).await
}

async fn new_user(db: &Db) -> UserId {
    insert_user(db).await.unwrap()
}

async fn session_at(
    db: &Db,
    user: UserId,
    platform: Platform,
    channel: &str,
    now: DateTime<Utc>,
) -> Session {
    let mut client = db.get().await.unwrap();
    let tx = client.transaction().await.unwrap();
    let s = current_or_start(&tx, user, platform, channel, now, IDLE)
        .await
        .unwrap();
    tx.commit().await.unwrap();
    s
}

async fn log(
    db: &Db,
    user: UserId,
    session: SessionId,
    run: RunId,
    direction: Direction,
    text: &str,
) -> bool {
    let mut client = db.get().await.unwrap();
    let tx = client.transaction().await.unwrap();
    let logged = log_interaction(
        &tx,
        run,
        user,
        session,
        direction,
        text,
        &serde_json::json!({}),
    )
    .await
    .unwrap();
    tx.commit().await.unwrap();
    logged
}

async fn last_activity(db: &Db, session: SessionId) -> DateTime<Utc> {
    db.get()
        .await
        .unwrap()
        .query_one(
            "SELECT last_activity_at FROM sessions WHERE id = $1",
            &[&session],
        )
        .await
        .unwrap()
        .get(0)
}

fn t0() -> DateTime<Utc> {
    // Whole seconds: timestamptz keeps microseconds, and equality is checked below.
    DateTime::from_timestamp(1_790_000_000, 0).unwrap()
}

#[tokio::test]
async fn a_session_continues_within_the_idle_timeout_and_rolls_over_after_it() {
    with_db(|db| async move {
        let user = new_user(&db).await;
        let first = session_at(&db, user, Platform::Telegram, "c1", t0()).await;
        assert!(first.is_new, "the first message starts a session");
        assert_eq!(first.started_at, t0());

        let later = t0() + TimeDelta::hours(11);
        let same = session_at(&db, user, Platform::Telegram, "c1", later).await;
        assert_eq!(same.id, first.id, "11 h later the session continues");
        assert!(!same.is_new);
        assert_eq!(same.started_at, t0());
        assert_eq!(last_activity(&db, first.id).await, later);

        // Exactly the idle timeout after the last activity still continues it.
        let edge = later + TimeDelta::hours(12);
        assert_eq!(
            session_at(&db, user, Platform::Telegram, "c1", edge)
                .await
                .id,
            first.id
        );

        let after = edge + TimeDelta::hours(12) + TimeDelta::seconds(1);
        let next = session_at(&db, user, Platform::Telegram, "c1", after).await;
        assert!(next.is_new, "12 h + 1 s of silence starts a new session");
        assert_ne!(next.id, first.id);
        assert_eq!(next.started_at, after);
        assert_eq!(last_activity(&db, first.id).await, edge);

        let again = session_at(&db, user, Platform::Telegram, "c1", after).await;
        assert_eq!(again.id, next.id, "the newest session is the current one");
    })
    .await;
}

#[tokio::test]
async fn sessions_are_scoped_by_platform_and_channel() {
    with_db(|db| async move {
        let user = new_user(&db).await;
        let tg = session_at(&db, user, Platform::Telegram, "c1", t0()).await;
        let wa = session_at(&db, user, Platform::Whatsapp, "c1", t0()).await;
        let tg2 = session_at(&db, user, Platform::Telegram, "c2", t0()).await;
        let other_user = new_user(&db).await;
        let theirs = session_at(&db, other_user, Platform::Telegram, "c1", t0()).await;
        assert!(wa.is_new && tg2.is_new && theirs.is_new);
        let ids = [tg.id, wa.id, tg2.id, theirs.id];
        for (i, a) in ids.iter().enumerate() {
            assert!(!ids[i + 1..].contains(a));
        }
    })
    .await;
}

#[tokio::test]
async fn concurrent_first_messages_open_one_session() {
    with_db(|db| async move {
        let user = new_user(&db).await;
        // A opens the session and keeps its transaction open; B starts while A's
        // session is not committed, and must wait on the scope lock, then see it.
        let mut client_a = db.get().await.unwrap();
        let tx_a = client_a.transaction().await.unwrap();
        let a = current_or_start(&tx_a, user, Platform::Telegram, "c1", t0(), IDLE)
            .await
            .unwrap();
        let (pid_tx, pid_rx) = tokio::sync::oneshot::channel::<i32>();
        let b = {
            let db = db.clone();
            tokio::spawn(async move {
                let mut client = db.get().await.unwrap();
                let pid: i32 = client
                    .query_one("SELECT pg_backend_pid()", &[])
                    .await
                    .unwrap()
                    .get(0);
                let _ = pid_tx.send(pid);
                let tx = client.transaction().await.unwrap();
                let s = current_or_start(&tx, user, Platform::Telegram, "c1", t0(), IDLE)
                    .await
                    .unwrap();
                tx.commit().await.unwrap();
                s
            })
        };
        // The barrier: B is blocked on a lock (A's scope lock) before A commits.
        let pid_b = pid_rx.await.unwrap();
        let watcher = db.get().await.unwrap();
        let give_up = std::time::Instant::now() + Duration::from_secs(30);
        loop {
            let waiting: i64 = watcher
                .query_one(
                    "SELECT count(*) FROM pg_stat_activity \
                     WHERE pid = $1 AND wait_event_type = 'Lock'",
                    &[&pid_b],
                )
                .await
                .unwrap()
                .get(0);
            if waiting == 1 {
                break;
            }
            assert!(
                std::time::Instant::now() < give_up,
                "B never waited on A's lock"
            );
            tokio::task::yield_now().await;
        }
        tx_a.commit().await.unwrap();
        let b = b.await.unwrap();
        assert_eq!(a.id, b.id);
        assert!(a.is_new && !b.is_new);
        let n: i64 = db
            .get()
            .await
            .unwrap()
            .query_one("SELECT count(*) FROM sessions WHERE user_id = $1", &[&user])
            .await
            .unwrap()
            .get(0);
        assert_eq!(n, 1);
    })
    .await;
}

#[tokio::test]
async fn touch_moves_activity_forward_only() {
    with_db(|db| async move {
        let user = new_user(&db).await;
        let s = session_at(&db, user, Platform::Api, "c", t0()).await;
        let client = db.get().await.unwrap();
        touch(&client, s.id, t0() + TimeDelta::minutes(5))
            .await
            .unwrap();
        assert_eq!(last_activity(&db, s.id).await, t0() + TimeDelta::minutes(5));
        touch(&client, s.id, t0()).await.unwrap();
        assert_eq!(last_activity(&db, s.id).await, t0() + TimeDelta::minutes(5));
    })
    .await;
}

#[tokio::test]
async fn a_late_touch_never_revives_a_session_a_newer_one_replaced() {
    with_db(|db| async move {
        let user = new_user(&db).await;
        let old = session_at(&db, user, Platform::Telegram, "c1", t0()).await;
        let later = t0() + TimeDelta::hours(13);
        let new = session_at(&db, user, Platform::Telegram, "c1", later).await;
        assert!(new.is_new);
        // The old session's late answer is logged after the new session started.
        let client = db.get().await.unwrap();
        touch(&client, old.id, later + TimeDelta::minutes(1))
            .await
            .unwrap();
        assert_eq!(last_activity(&db, old.id).await, t0(), "left as it was");
        let next = session_at(
            &db,
            user,
            Platform::Telegram,
            "c1",
            later + TimeDelta::minutes(2),
        )
        .await;
        assert_eq!(next.id, new.id, "the conversation stays in the new session");
    })
    .await;
}

#[tokio::test]
async fn history_is_in_order_with_roles_and_keeps_the_last_turns() {
    with_db(|db| async move {
        let user = new_user(&db).await;
        let s = session_at(&db, user, Platform::Telegram, "c1", t0()).await;
        let other = session_at(&db, user, Platform::Whatsapp, "c1", t0()).await;
        for i in 0..3 {
            let run = RunId::new();
            log(&db, user, s.id, run, Direction::Inbound, &format!("q{i}")).await;
            log(&db, user, s.id, run, Direction::Outbound, &format!("a{i}")).await;
        }
        log(&db, user, other.id, RunId::new(), Direction::Inbound, "x").await;

        let client = db.get().await.unwrap();
        let all = history(&client, s.id, 100).await.unwrap();
        let expected: Vec<ChatMessage> = (0..3)
            .flat_map(|i| {
                [
                    ChatMessage::text(Role::User, format!("q{i}")),
                    ChatMessage::text(Role::Assistant, format!("a{i}")),
                ]
            })
            .collect();
        assert_eq!(all, expected);
        assert_eq!(
            history(&client, s.id, 3).await.unwrap(),
            expected[3..].to_vec()
        );
        assert!(history(&client, s.id, 0).await.unwrap().is_empty());
        assert!(
            history(&client, SessionId::new(), 10)
                .await
                .unwrap()
                .is_empty()
        );
    })
    .await;
}

#[tokio::test]
async fn recent_inbound_elsewhere_skips_the_current_session_and_respects_the_limit() {
    with_db(|db| async move {
        let user = new_user(&db).await;
        let current = session_at(&db, user, Platform::Telegram, "c1", t0()).await;
        let wa = session_at(&db, user, Platform::Whatsapp, "w1", t0()).await;
        let old = session_at(&db, user, Platform::Rest, "r1", t0()).await;
        let stranger = new_user(&db).await;
        let theirs = session_at(&db, stranger, Platform::Whatsapp, "w1", t0()).await;

        log(&db, user, old.id, RunId::new(), Direction::Inbound, "e1").await;
        log(&db, user, wa.id, RunId::new(), Direction::Inbound, "e2").await;
        log(&db, user, wa.id, RunId::new(), Direction::Outbound, "reply").await;
        log(
            &db,
            user,
            current.id,
            RunId::new(),
            Direction::Inbound,
            "here",
        )
        .await;
        log(&db, user, wa.id, RunId::new(), Direction::Inbound, "e3").await;
        log(
            &db,
            stranger,
            theirs.id,
            RunId::new(),
            Direction::Inbound,
            "not yours",
        )
        .await;

        let client = db.get().await.unwrap();
        let texts =
            |v: Vec<(String, DateTime<Utc>)>| v.into_iter().map(|(t, _)| t).collect::<Vec<_>>();
        let all = recent_inbound_elsewhere(&client, user, current.id, 10)
            .await
            .unwrap();
        assert!(all.windows(2).all(|w| w[0].1 >= w[1].1));
        assert_eq!(texts(all), ["e3", "e2", "e1"]);
        let two = recent_inbound_elsewhere(&client, user, current.id, 2)
            .await
            .unwrap();
        assert_eq!(texts(two), ["e3", "e2"]);
        assert!(
            recent_inbound_elsewhere(&client, user, current.id, 0)
                .await
                .unwrap()
                .is_empty()
        );
    })
    .await;
}

#[tokio::test]
async fn log_interaction_is_idempotent_per_run_and_direction() {
    with_db(|db| async move {
        let user = new_user(&db).await;
        let s = session_at(&db, user, Platform::Telegram, "c1", t0()).await;
        let run = RunId::new();
        assert!(log(&db, user, s.id, run, Direction::Inbound, "hi").await);
        assert!(!log(&db, user, s.id, run, Direction::Inbound, "hi again").await);
        assert!(log(&db, user, s.id, run, Direction::Outbound, "hello").await);
        assert!(!log(&db, user, s.id, run, Direction::Outbound, "hello").await);
        let client = db.get().await.unwrap();
        assert_eq!(
            history(&client, s.id, 10).await.unwrap(),
            [
                ChatMessage::text(Role::User, "hi"),
                ChatMessage::text(Role::Assistant, "hello"),
            ]
        );
    })
    .await;
}

#[test]
fn directions_round_trip_and_map_to_roles() {
    for d in [Direction::Inbound, Direction::Outbound] {
        assert_eq!(Direction::parse(d.as_str()), Some(d));
    }
    assert_eq!(Direction::parse("sideways"), None);
    assert_eq!(Direction::Inbound.role(), Role::User);
    assert_eq!(Direction::Outbound.role(), Role::Assistant);
}

#[tokio::test]
async fn an_api_session_is_continued_past_its_idle_time_but_only_by_its_key() {
    with_db(|db| async move {
        let client = db.get().await.unwrap();
        let mine = crate::api_keys::create(&client, "mine", None, None)
            .await
            .unwrap()
            .key
            .id;
        let theirs = crate::api_keys::create(&client, "theirs", None, None)
            .await
            .unwrap()
            .key
            .id;
        drop(client);
        let days_later = t0() + TimeDelta::days(3);
        let mut client = db.get().await.unwrap();
        let tx = client.transaction().await.unwrap();
        let first = api_session(&tx, Some(mine), None, "run-1", t0())
            .await
            .unwrap();
        let continued = api_session(&tx, Some(mine), Some(first.id), "run-2", days_later)
            .await
            .unwrap();
        let other_key = api_session(&tx, Some(theirs), Some(first.id), "run-3", days_later)
            .await
            .unwrap();
        let operator = api_session(&tx, None, Some(first.id), "run-4", days_later)
            .await
            .unwrap();
        tx.commit().await.unwrap();

        assert!(first.is_new);
        assert_eq!((continued.id, continued.is_new), (first.id, false));
        assert_eq!(continued.started_at, t0());
        for (name, s) in [("another key", other_key), ("the operator key", operator)] {
            assert!(s.is_new && s.id != first.id, "{name} opens its own session");
        }
        assert_eq!(last_activity(&db, first.id).await, days_later);
    })
    .await
}
