//! Waiting on a condition instead of for a fixed time: a test that sleeps a guessed time
//! fails at random on a loaded machine, or waits longer than it needs.

use std::future::Future;
use std::time::{Duration, Instant};

/// How often a condition is looked at again.
const POLL: Duration = Duration::from_millis(50);

/// Poll `f` until it returns `Some`, or panic naming `what` after `timeout`.
pub async fn eventually<T, F, Fut>(timeout: Duration, what: &str, mut f: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let started = Instant::now();
    loop {
        if let Some(v) = f().await {
            return v;
        }
        assert!(
            started.elapsed() < timeout,
            "timed out after {timeout:?} waiting for {what}"
        );
        tokio::time::sleep(POLL).await;
    }
}

/// [`eventually`] for a condition that needs no `.await`.
pub async fn eventually_sync(timeout: Duration, what: &str, mut check: impl FnMut() -> bool) {
    eventually(timeout, what, || {
        let done = check();
        async move { done.then_some(()) }
    })
    .await
}
