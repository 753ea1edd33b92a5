//! The console in a real headless Chromium, for what needs a browser's own behaviour: a run
//! in flight (waiting for an approval) followed live over its event stream until the page
//! reloads itself on the run's end, with no navigation by the test; and the killswitch turned
//! on and off through its form, the confirmation ticked by a click (docs/console.md).

use hermes_testkit::eventually;
use reqwest::header::COOKIE;
use std::time::Duration;

use crate::approvals::{Gated, completed, waiting_call};
use crate::console::{browser, browser_logged_in, client, csrf_of, get, logged_in};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn in_a_real_browser_a_run_in_flight_updates_live_until_it_ends() {
    let Some(browser) = browser().await else {
        return;
    };
    let gated = Gated::start(&[("HERMES_CONSOLE", "true")]).await;
    let call = waiting_call(&gated.db, gated.run).await;
    let run_page = format!("/console/runs/{}", gated.run);

    browser_logged_in(&browser, &gated.fleet, &run_page).await;
    browser.goto(&gated.fleet.url(&run_page)).await;
    browser.wait_for_url(&run_page).await;
    let page = browser.source().await;
    assert!(page.contains("data-live-events"), "{page}");
    assert!(page.contains("awaiting_approval"), "{page}");

    // The approval is answered elsewhere (another operator's login); the open page follows
    // the run's stream and reloads itself when the run ends.
    let cookie = logged_in(&gated.fleet).await;
    let approvals = get(&gated.fleet, "/console/approvals", &cookie)
        .await
        .text()
        .await
        .unwrap();
    let allowed = client()
        .post(gated.fleet.url(&format!("/console/approvals/{}", call.id)))
        .header(COOKIE, &cookie)
        .header("content-type", "application/x-www-form-urlencoded")
        .body(format!("csrf={}&decision=allow", csrf_of(&approvals)))
        .send()
        .await
        .unwrap();
    assert_eq!(allowed.status(), 303);
    completed(&gated.db, gated.run).await;
    let reloaded = eventually(
        Duration::from_secs(30),
        "the run's page shows it completed",
        || async {
            let page = browser.source().await;
            (page.contains("<dd class=\"completed\">completed</dd>")
                && !page.contains("data-live-events"))
            .then_some(page)
        },
    )
    .await;
    assert!(browser.url().await.ends_with(&run_page), "{reloaded}");
    assert_eq!(browser.alert().await, None);

    // The killswitch through its form: the confirmation is a box to tick.
    browser.goto(&gated.fleet.url("/console/killswitch")).await;
    browser.fill("#reason", "provider incident").await;
    browser.click("#confirm").await;
    browser.click("main form button[type=submit]").await;
    eventually(Duration::from_secs(30), "the killswitch on", || async {
        browser
            .source()
            .await
            .contains("<strong>On</strong>")
            .then_some(())
    })
    .await;
    browser.click("#confirm").await;
    browser.click("main form button[type=submit]").await;
    eventually(Duration::from_secs(30), "the killswitch off", || async {
        browser
            .source()
            .await
            .contains("<strong>Off</strong>")
            .then_some(())
    })
    .await;
    browser.quit().await;
    gated.stop().await;
}
