//! Discord's rate limits (<https://discord.com/developers/docs/topics/rate-limits>), as one
//! delivery process sees them. Every answer names the bucket of its route
//! (`X-RateLimit-Bucket`), how many requests the bucket has left (`X-RateLimit-Remaining`)
//! and when it refills (`X-RateLimit-Reset-After`, seconds); a route whose bucket is spent
//! waits for the refill before its next request instead of drawing a 429. A 429 with
//! `X-RateLimit-Global: true` holds every route for its `Retry-After`. The 429 itself is
//! waited out by the in-call retry ([`crate::retry`]); a wait longer than the policy's bound
//! is not taken here either: the send goes to the queued retry as `rate_limited`.
//!
//! A route is its method and its top-level resource (a channel, or an interaction's webhook),
//! as Discord keys buckets; the bot's other replicas keep their own view, and the 429s they
//! draw are honoured the same way. The table is bounded: past [`MAX_ROUTES`] routes, those
//! whose bucket has refilled are forgotten, and if none has, the table starts afresh (a
//! forgotten bucket costs at most one 429).

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use reqwest::StatusCode;
use reqwest::header::{HeaderMap, RETRY_AFTER};

/// The most routes whose buckets are remembered.
pub const MAX_ROUTES: usize = 10_000;

/// The longest refill or global wait read from a header: anything longer is read as this.
const MAX_WAIT: Duration = Duration::from_secs(3600);

/// One bucket's state as its last answer told it.
#[derive(Clone, Copy, Debug)]
struct Window {
    remaining: u64,
    reset_at: Instant,
}

#[derive(Default)]
struct State {
    /// Route → the bucket Discord named for it.
    routes: HashMap<String, String>,
    /// Bucket → its window.
    buckets: HashMap<String, Window>,
    /// Until when every route waits (a global 429).
    global_until: Option<Instant>,
}

/// What the process knows of Discord's buckets.
#[derive(Default)]
pub struct Buckets {
    state: Mutex<State>,
}

impl Buckets {
    /// No bucket known yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// How long a request on `route` should wait at `now` before it goes: until a global
    /// limit ends, or until its spent bucket refills; zero when it may go now.
    pub fn wait(&self, route: &str, now: Instant) -> Duration {
        let state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        let global = state
            .global_until
            .map_or(Duration::ZERO, |t| t - now.min(t));
        let bucket = (state.routes.get(route))
            .and_then(|b| state.buckets.get(b))
            .filter(|w| w.remaining == 0)
            .map_or(Duration::ZERO, |w| w.reset_at - now.min(w.reset_at));
        global.max(bucket)
    }

    /// Take in what an answer on `route` at `now` says of its bucket.
    pub fn observe(&self, route: &str, status: StatusCode, headers: &HeaderMap, now: Instant) {
        let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        if status == StatusCode::TOO_MANY_REQUESTS
            && header(headers, "x-ratelimit-global") == Some("true")
        {
            let wait = header(headers, RETRY_AFTER.as_str()).and_then(seconds);
            state.global_until = wait.map(|w| now + w);
        }
        let Some(bucket) = header(headers, "x-ratelimit-bucket") else {
            return;
        };
        let remaining = header(headers, "x-ratelimit-remaining").and_then(|r| r.parse().ok());
        let reset_after = header(headers, "x-ratelimit-reset-after").and_then(seconds);
        let (Some(remaining), Some(reset_after)) = (remaining, reset_after) else {
            return;
        };
        let full = state.routes.len() >= MAX_ROUTES && !state.routes.contains_key(route);
        if full || state.buckets.len() >= MAX_ROUTES {
            forget_refilled(&mut state, now);
        }
        let bucket = bucket.chars().take(64).collect::<String>();
        state.routes.insert(route.to_owned(), bucket.clone());
        state.buckets.insert(
            bucket,
            Window {
                remaining,
                reset_at: now + reset_after,
            },
        );
    }
}

/// Make room in a full table: drop the buckets that have refilled and the routes naming
/// them; when none has, start afresh.
fn forget_refilled(state: &mut State, now: Instant) {
    state.buckets.retain(|_, w| w.reset_at > now);
    let State {
        routes, buckets, ..
    } = state;
    routes.retain(|_, b| buckets.contains_key(b));
    if routes.len() >= MAX_ROUTES || buckets.len() >= MAX_ROUTES {
        routes.clear();
        buckets.clear();
    }
}

fn header<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers.get(name)?.to_str().ok().map(str::trim)
}

/// Seconds with a fraction (`1.337`), bounded.
fn seconds(s: &str) -> Option<Duration> {
    let secs: f64 = s.parse().ok()?;
    (secs >= 0.0 && secs.is_finite()).then(|| Duration::from_secs_f64(secs).min(MAX_WAIT))
}

#[cfg(test)]
mod tests {
    use reqwest::header::HeaderValue;

    use super::*;

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.insert(*k, HeaderValue::from_str(v).unwrap());
        }
        h
    }

    #[test]
    fn a_spent_bucket_holds_its_routes_until_it_refills() {
        let b = Buckets::new();
        let now = Instant::now();
        let spent = headers(&[
            ("x-ratelimit-bucket", "abcd1234"),
            ("x-ratelimit-remaining", "0"),
            ("x-ratelimit-reset-after", "1.5"),
        ]);
        assert_eq!(b.wait("POST channels/1", now), Duration::ZERO);
        b.observe("POST channels/1", StatusCode::OK, &spent, now);
        assert_eq!(b.wait("POST channels/1", now), Duration::from_millis(1500));
        assert_eq!(
            b.wait("POST channels/1", now + Duration::from_secs(1)),
            Duration::from_millis(500)
        );
        assert_eq!(
            b.wait("POST channels/1", now + Duration::from_secs(2)),
            Duration::ZERO
        );
        assert_eq!(b.wait("POST channels/2", now), Duration::ZERO);
        let left = headers(&[
            ("x-ratelimit-bucket", "abcd1234"),
            ("x-ratelimit-remaining", "4"),
            ("x-ratelimit-reset-after", "5"),
        ]);
        b.observe("POST channels/1", StatusCode::OK, &left, now);
        assert_eq!(b.wait("POST channels/1", now), Duration::ZERO);
    }

    #[test]
    fn a_global_limit_holds_every_route() {
        let b = Buckets::new();
        let now = Instant::now();
        let global = headers(&[("x-ratelimit-global", "true"), ("retry-after", "2")]);
        b.observe(
            "PATCH webhooks/1",
            StatusCode::TOO_MANY_REQUESTS,
            &global,
            now,
        );
        assert_eq!(b.wait("POST channels/9", now), Duration::from_secs(2));
        let junk = headers(&[
            ("x-ratelimit-bucket", "x"),
            ("x-ratelimit-remaining", "-1"),
            ("x-ratelimit-reset-after", "NaN"),
        ]);
        b.observe("POST channels/9", StatusCode::OK, &junk, now);
        assert_eq!(
            b.wait("POST channels/9", now + Duration::from_secs(3)),
            Duration::ZERO
        );
    }

    #[test]
    fn the_table_stays_bounded() {
        let b = Buckets::new();
        let now = Instant::now();
        for i in 0..MAX_ROUTES + 10 {
            let h = headers(&[
                ("x-ratelimit-bucket", &format!("b{i}")),
                ("x-ratelimit-remaining", "0"),
                ("x-ratelimit-reset-after", "60"),
            ]);
            b.observe(&format!("POST channels/{i}"), StatusCode::OK, &h, now);
        }
        let state = b.state.lock().unwrap();
        assert!(state.routes.len() <= MAX_ROUTES && state.buckets.len() <= MAX_ROUTES);
    }
}
