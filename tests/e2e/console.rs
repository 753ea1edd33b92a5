//! The operator console (docs/console.md) through the real ingest: logging in with the
//! operator key into an `HttpOnly`, `Secure`, `SameSite=Strict` cookie (other keys refused),
//! the runs list and a run's page, a message carrying markup shown inert under a policy with
//! no inline script, and state-changing forms refused without their CSRF token or from
//! another site.

use hermes::Service;
use hermes_db::api_keys::{self, KeyScope};
use hermes_testkit::{Fleet, KEY, TestEnv};
use hermes_types::model::Platform;
use reqwest::header::{CONTENT_SECURITY_POLICY, COOKIE, LOCATION, SET_COOKIE};
use serde_json::json;

const MARKUP: &str = "<script>alert(1)</script><img src=x onerror=alert(2)>";

/// A browser-like client that follows nothing: each redirect is asserted.
pub(crate) fn client() -> reqwest::Client {
    reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap()
}

async fn log_in(fleet: &Fleet, key: &str) -> reqwest::Response {
    client()
        .post(fleet.url("/console/login"))
        .header("content-type", "application/x-www-form-urlencoded")
        .body(format!("key={key}"))
        .send()
        .await
        .unwrap()
}

pub(crate) async fn get(fleet: &Fleet, path: &str, cookie: &str) -> reqwest::Response {
    client()
        .get(fleet.url(path))
        .header(COOKIE, cookie)
        .send()
        .await
        .unwrap()
}

/// The run of a chat completion whose message is [`MARKUP`], answered.
async fn markup_run(fleet: &Fleet) -> String {
    let resp = fleet
        .post_chat(
            &json!({"model": "hermes-agent", "messages": [{"role": "user", "content": MARKUP}]}),
        )
        .await;
    assert_eq!(resp.status(), 200);
    resp.headers()["x-hermes-run-id"]
        .to_str()
        .unwrap()
        .to_string()
}

/// A browser, or `None` where Chromium is missing (never on CI: scripts/test installs it).
pub(crate) async fn browser() -> Option<hermes_testkit::browser::Browser> {
    let browser = hermes_testkit::browser::Browser::start(1440).await;
    if browser.is_none() {
        assert!(
            std::env::var_os("CI").is_none(),
            "Chromium is missing: scripts/test installs chromium and chromium-driver"
        );
        eprintln!("chromium not installed: skipped (scripts/test installs it)");
    }
    browser
}

/// An hour of a small install's runs for the screenshots, all on the list's first page: four
/// platforms, a few failures, answers taking from half a second to several seconds.
/// A third of them are `user`'s.
async fn seed_demo(env: &TestEnv, user: hermes_types::ids::UserId) {
    env.db()
        .get()
        .await
        .unwrap()
        .execute(
            "INSERT INTO agent_runs (id, platform, sender_id, chat_id, status, tier, model,
                                     tokens_in, tokens_out, cost_micro_usd, created_at, finished_at,
                                     user_id)
             SELECT gen_random_uuid(), (ARRAY['telegram','whatsapp','slack','api'])[1 + g % 4],
                    's' || g % 7, 'c' || g % 7,
                    CASE WHEN g % 11 = 0 THEN 'failed' ELSE 'completed' END, 'free', 'gpt-4o-mini',
                    200 + g % 300, 80 + g % 120, 150 + g % 90,
                    now() - make_interval(mins => 59 - g % 60, secs => g % 50),
                    now() - make_interval(mins => 59 - g % 60, secs => g % 50)
                          + make_interval(secs => 0.4 + (g % 9) * (g % 5) / 4.0),
                    CASE WHEN g % 3 = 0 THEN $1::uuid END
             FROM generate_series(1, 45) g",
            &[&user],
        )
        .await
        .unwrap();
}

/// Log `browser` in with the operator key, starting from a page behind the login, `path`,
/// which the login sends to: the browser ends on the overview, where every login lands.
pub(crate) async fn browser_logged_in(
    browser: &hermes_testkit::browser::Browser,
    fleet: &Fleet,
    path: &str,
) {
    browser.goto(&fleet.url(path)).await;
    browser.wait_for_url("/console/login").await;
    browser.fill("#key", KEY).await;
    browser.click("button[type=submit]").await;
    browser.wait_for_url("/console/overview").await;
}

/// The cookie of the operator key's login.
pub(crate) async fn logged_in(fleet: &Fleet) -> String {
    let resp = log_in(fleet, KEY).await;
    assert_eq!(resp.status(), 303);
    resp.headers()[SET_COOKIE]
        .to_str()
        .unwrap()
        .split(';')
        .next()
        .unwrap()
        .to_string()
}

/// The value of the hidden `csrf` field of `page`.
pub(crate) fn csrf_of(page: &str) -> String {
    let at = page.find("name=\"csrf\" value=\"").expect("a CSRF field") + 19;
    page[at..at + 64].to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_operator_logs_in_reads_a_run_inert_and_forms_need_their_token() {
    let mut env = TestEnv::new().await;
    env.set("HERMES_CONSOLE", "true")
        .set("HERMES_KEY_MISSES_PER_MINUTE", "3");
    let chat_key = {
        let client = env.db().get().await.unwrap();
        let created = api_keys::create(&client, "chat only", None, None)
            .await
            .unwrap();
        api_keys::set_scopes(&client, created.key.id, &[KeyScope::Chat])
            .await
            .unwrap();
        created.secret_key
    };
    let fleet = env.start(&Service::ALL).await;

    // Nothing without a login but the login form.
    let resp = get(&fleet, "/console/runs", "").await;
    assert_eq!(resp.status(), 303);
    assert_eq!(resp.headers()[LOCATION], "/console/login");
    let form = client()
        .get(fleet.url("/console/login"))
        .send()
        .await
        .unwrap();
    assert_eq!(form.status(), 200);
    let policy = form.headers()[CONTENT_SECURITY_POLICY]
        .to_str()
        .unwrap()
        .to_string();
    assert!(!policy.contains("unsafe-inline") && policy.contains("frame-ancestors 'none'"));
    assert_eq!(log_in(&fleet, "hk_nothing_at_all").await.status(), 401);
    assert_eq!(log_in(&fleet, &chat_key).await.status(), 403);
    // Guessing keys through the form is held to the client's unknown keys, as on the API.
    let mut refused = Vec::new();
    for i in 0..5 {
        refused.push(
            log_in(&fleet, &format!("hk_guess_{i}"))
                .await
                .status()
                .as_u16(),
        );
    }
    assert!(refused.contains(&429), "{refused:?}");

    // The operator key logs in.
    let resp = log_in(&fleet, KEY).await;
    assert_eq!(resp.status(), 303);
    assert_eq!(resp.headers()[LOCATION], "/console/overview");
    let set = resp.headers()[SET_COOKIE].to_str().unwrap().to_string();
    for flag in [
        "HttpOnly",
        "Secure",
        "SameSite=Strict",
        "Path=/console",
        "Max-Age=28800",
    ] {
        assert!(set.contains(flag), "{flag} in {set}");
    }
    let cookie = set.split(';').next().unwrap().to_string();

    // A message with markup, answered; its run listed and shown, the markup inert.
    let run = markup_run(&fleet).await;
    let list = get(&fleet, "/console/runs", &cookie)
        .await
        .text()
        .await
        .unwrap();
    assert!(list.contains(&format!("/console/runs/{run}")), "{list}");
    let found = get(&fleet, &format!("/console/runs?q={run}"), &cookie).await;
    assert_eq!(found.status(), 303, "a run id goes to its page");
    let resp = get(&fleet, &format!("/console/runs/{run}"), &cookie).await;
    assert_eq!(resp.status(), 200);
    let page = resp.text().await.unwrap();
    assert!(
        page.contains("&lt;script&gt;alert(1)&lt;/script&gt;"),
        "{page}"
    );
    assert!(
        !page.contains("<script") && !page.contains("<img src=x"),
        "{page}"
    );
    assert!(page.contains("completed"), "{page}");
    let missing = get(
        &fleet,
        "/console/runs/00000000-0000-7000-8000-000000000000",
        &cookie,
    )
    .await;
    assert_eq!(missing.status(), 404);

    // Logging out needs the page's token, from this site.
    let logout = |csrf: String, site: &'static str| {
        client()
            .post(fleet.url("/console/logout"))
            .header(COOKIE, &cookie)
            .header("sec-fetch-site", site)
            .header("content-type", "application/x-www-form-urlencoded")
            .body(format!("csrf={csrf}"))
            .send()
    };
    let csrf = csrf_of(&page);
    assert_eq!(
        logout(String::new(), "same-origin").await.unwrap().status(),
        403
    );
    assert_eq!(
        logout(csrf.clone(), "cross-site").await.unwrap().status(),
        403
    );
    assert_eq!(
        get(&fleet, "/console/runs", &cookie).await.status(),
        200,
        "still logged in"
    );
    assert_eq!(logout(csrf, "same-origin").await.unwrap().status(), 303);
    assert_eq!(
        get(&fleet, "/console/runs", &cookie).await.status(),
        303,
        "logged out"
    );
    fleet.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_console_is_off_unless_asked_for() {
    let env = TestEnv::new().await;
    let fleet = env.start(&[Service::Ingest]).await;
    for path in ["/console", "/console/login", "/console/runs"] {
        assert_eq!(get(&fleet, path, "").await.status(), 404, "{path}");
    }
    fleet.stop().await.unwrap();
}

/// The same console in a real headless Chromium: the login form typed into and sent, the
/// cookie kept by the browser, the run found from the list and opened, no alert raised by
/// the markup it shows, logging out; screenshots of each page at 1,440 and 360 pixels wide
/// (`target/console-screenshots/`, or with `HERMES_UPDATE_DOCS=1` `docs/console/`, which
/// docs/console.md shows).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn in_a_real_browser_the_console_logs_in_shows_a_run_inert_and_logs_out() {
    let Some(browser) = browser().await else {
        return;
    };
    let mut env = TestEnv::new().await;
    env.set("HERMES_CONSOLE", "true");
    let fleet = env.start(&Service::ALL).await;
    let kai = env.user(Platform::Telegram, "4242", 10).await;
    seed_demo(&env, kai.id).await;
    let run = markup_run(&fleet).await;
    // HERMES_UPDATE_DOCS=1 writes them where docs/console.md shows them.
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let shots = match std::env::var("HERMES_UPDATE_DOCS").as_deref() {
        Ok("1") => root.join("docs/console"),
        _ => root.join("target/console-screenshots"),
    };
    let shoot = |name: &'static str| {
        let (browser, shots) = (&browser, shots.clone());
        async move {
            for width in [1440, 360] {
                browser.resize(width, 900).await;
                browser
                    .screenshot(&shots.join(format!("{name}-{width}.png")))
                    .await;
            }
            browser.resize(1440, 900).await;
        }
    };

    browser.goto(&fleet.url("/console/runs")).await;
    browser.wait_for_url("/console/login").await;
    shoot("login").await;
    browser.fill("#key", KEY).await;
    browser.click("button[type=submit]").await;
    browser.wait_for_url("/console/overview").await;
    let overview = browser.source().await;
    assert!(overview.contains("<svg class=\"chart\""), "{overview}");
    shoot("overview").await;
    browser.click("nav a[href=\"/console/runs\"]").await;
    browser.wait_for_url("/console/runs").await;
    shoot("runs").await;
    browser
        .click(&format!("a[href=\"/console/runs/{run}\"]"))
        .await;
    browser.wait_for_url(&run).await;
    let page = browser.source().await;
    assert!(
        page.contains("&lt;script&gt;alert(1)&lt;/script&gt;"),
        "{page}"
    );
    assert_eq!(browser.alert().await, None, "the markup raised an alert");
    assert!(page.contains("model call, round 0"), "{page}");
    shoot("run").await;
    // A user's runs, found by their Telegram sender through the search form.
    browser.goto(&fleet.url("/console/runs")).await;
    browser.fill("#user", "telegram:4242").await;
    browser.click("form[role=search] button[type=submit]").await;
    // The form sends every field; `until` is its last.
    browser.wait_for_url("&until=").await;
    let found = browser.source().await;
    assert!(found.contains("value=\"telegram:4242\""), "{found}");
    assert!(
        !found.contains(&format!("/console/runs/{run}\"")),
        "{found}"
    );
    assert_eq!(
        found.matches("<td class=\"completed\">").count()
            + found.matches("<td class=\"failed\">").count(),
        15,
        "{found}"
    );
    for page in [
        "parked",
        "approvals",
        "conversations",
        "agents",
        "jobs",
        "users",
        "killswitch",
    ] {
        browser
            .click(&format!("nav a[href=\"/console/{page}\"]"))
            .await;
        browser.wait_for_url(&format!("/console/{page}")).await;
        shoot(page).await;
    }
    browser.click("header form button[type=submit]").await;
    browser.wait_for_url("/console/login").await;
    browser.goto(&fleet.url("/console/runs")).await;
    assert!(
        browser.url().await.ends_with("/console/login"),
        "logged out"
    );
    browser.quit().await;
    fleet.stop().await.unwrap();
}

/// An approval answered from the console: the waiting call is listed with its tool and
/// arguments; an answer without the page's token is refused and decides nothing; allowed with
/// it, the tool runs once and the run finishes; the answer names the console's operator.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_approval_is_allowed_from_the_console_and_the_run_finishes() {
    let gated = crate::approvals::Gated::start(&[("HERMES_CONSOLE", "true")]).await;
    let call = crate::approvals::waiting_call(&gated.db, gated.run).await;
    let cookie = logged_in(&gated.fleet).await;
    let page = get(&gated.fleet, "/console/approvals", &cookie)
        .await
        .text()
        .await
        .unwrap();
    assert!(
        page.contains("current_time") && page.contains("Asia/Tokyo"),
        "{page}"
    );
    let answer = |csrf: &str| {
        client()
            .post(gated.fleet.url(&format!("/console/approvals/{}", call.id)))
            .header(COOKIE, &cookie)
            .header("content-type", "application/x-www-form-urlencoded")
            .body(format!("csrf={csrf}&decision=allow&reason=looks+fine"))
            .send()
    };
    assert_eq!(answer("forged").await.unwrap().status(), 403);
    assert_eq!(
        gated.tool_ran().await,
        None,
        "nothing ran on a forged answer"
    );
    let resp = answer(&csrf_of(&page)).await.unwrap();
    assert_eq!(resp.status(), 303);
    crate::approvals::completed(&gated.db, gated.run).await;
    assert_eq!(gated.tool_ran().await, Some(1.0));
    // The run's page shows each model call with its own usage, in the run's history, and
    // the run's totals as their sum (the fake model: 30 and 9 tokens, then 40 and 3).
    let run = get(
        &gated.fleet,
        &format!("/console/runs/{}", gated.run),
        &cookie,
    )
    .await
    .text()
    .await
    .unwrap();
    let first = run.find("model call, round 0").expect(&run);
    let second = run.find("model call, round 1").expect(&run);
    assert!(first < second, "{run}");
    // The tier's model is priced at $0.80 and $4 a million tokens (in, out).
    assert!(
        run[first..second].contains("30 tokens in, 9 out, 0.000060 USD, tool_calls")
            && run[second..].contains("40 tokens in, 3 out, 0.000044 USD, stop"),
        "{run}"
    );
    assert!(
        run.contains("<dd>70 in, 12 out</dd>") && run.contains("<dd>0.000104</dd>"),
        "{run}"
    );
    // Its tool call, with the arguments the model gave and what the tool returned.
    let tools = &run[run.find("<caption>Tool calls</caption>").expect(&run)..];
    assert!(
        tools.contains("<td>current_time</td>") && tools.contains("Asia/Tokyo"),
        "{run}"
    );
    let decided = hermes_db::approvals::get(&gated.db.get().await.unwrap(), call.id)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(decided.decided_by.as_deref(), Some("operator"));
    assert_eq!(
        answer(&csrf_of(&page)).await.unwrap().status(),
        409,
        "decided once"
    );
    gated.stop().await;
}

/// The killswitch from the console: a change without the confirmation ticked is refused;
/// turned on, a model call is refused as paused; turned off, calls go through again; each
/// change is in the activity log with who made it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_killswitch_is_turned_on_and_off_from_the_console_with_a_confirmation() {
    let mut env = TestEnv::new().await;
    env.set("HERMES_CONSOLE", "true");
    let fleet = env.start(&Service::ALL).await;
    let cookie = logged_in(&fleet).await;
    let page = get(&fleet, "/console/killswitch", &cookie)
        .await
        .text()
        .await
        .unwrap();
    assert!(page.contains("<strong>Off</strong>"), "{page}");
    let csrf = csrf_of(&page);
    let toggle = |form: String| {
        client()
            .post(fleet.url("/console/killswitch"))
            .header(COOKIE, &cookie)
            .header("content-type", "application/x-www-form-urlencoded")
            .body(form)
            .send()
    };
    let unconfirmed = toggle(format!("csrf={csrf}&action=on&reason=drill"))
        .await
        .unwrap();
    assert_eq!(unconfirmed.status(), 400);
    let on = toggle(format!("csrf={csrf}&action=on&reason=drill&confirm=yes"))
        .await
        .unwrap();
    assert_eq!(on.status(), 303);
    let page = get(&fleet, "/console/killswitch", &cookie)
        .await
        .text()
        .await
        .unwrap();
    assert!(
        page.contains("<strong>On</strong>") && page.contains("drill"),
        "{page}"
    );
    let paused = fleet.chat("are you there?").await;
    assert_eq!(
        paused.status(),
        503,
        "a model call while the killswitch is on"
    );
    let off = toggle(format!("csrf={csrf}&action=off&confirm=yes"))
        .await
        .unwrap();
    assert_eq!(off.status(), 303);
    assert_eq!(fleet.chat("and now?").await.status(), 200);
    let logged: Vec<(String, String)> = env
        .db()
        .get()
        .await
        .unwrap()
        .query(
            "SELECT kind, data->>'by' FROM activity_events WHERE kind LIKE 'killswitch_%' ORDER BY id",
            &[],
        )
        .await
        .unwrap()
        .iter()
        .map(|r| (r.get(0), r.get(1)))
        .collect();
    assert_eq!(
        logged,
        [
            ("killswitch_on".to_string(), "operator".to_string()),
            ("killswitch_off".to_string(), "operator".to_string())
        ]
    );
    fleet.stop().await.unwrap();
}
