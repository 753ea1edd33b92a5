//! A per-server circuit breaker: after repeated failed calls (transport errors and
//! timeouts, not a tool saying "error") the server's calls are refused at once for a
//! cool-down, then one call is let through as a probe; its success closes the breaker.

use std::time::{Duration, Instant};

/// Consecutive failures that open the breaker.
pub const TRIP_AFTER: u32 = 5;
/// How long an open breaker refuses calls before admitting a probe.
pub const COOL_DOWN: Duration = Duration::from_secs(30);

#[derive(Debug, Default)]
pub struct Breaker {
    failures: u32,
    open_until: Option<Instant>,
}

impl Breaker {
    /// Whether a call may go out at `now`. After the cool-down one call (the probe) is
    /// admitted and the window re-armed, so a burst does not all hit a dead server.
    pub fn admit(&mut self, now: Instant) -> bool {
        match self.open_until {
            Some(until) if now < until => false,
            Some(_) => {
                self.open_until = Some(now + COOL_DOWN);
                true
            }
            None => true,
        }
    }

    /// Record the end of an admitted call.
    pub fn record(&mut self, ok: bool, now: Instant) {
        if ok {
            *self = Self::default();
        } else {
            self.failures += 1;
            if self.failures >= TRIP_AFTER {
                self.open_until = Some(now + COOL_DOWN);
            }
        }
    }

    /// A fresh session: whatever failed belonged to the previous one.
    pub fn reset(&mut self) {
        *self = Self::default();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn opens_after_repeated_failures_and_probes_after_the_cool_down() {
        let t0 = Instant::now();
        let mut b = Breaker::default();
        for _ in 0..TRIP_AFTER - 1 {
            assert!(b.admit(t0));
            b.record(false, t0);
        }
        assert!(b.admit(t0), "still closed below the threshold");
        b.record(false, t0);
        assert!(!b.admit(t0 + Duration::from_secs(1)), "open");
        let later = t0 + COOL_DOWN + Duration::from_millis(1);
        assert!(b.admit(later), "the probe");
        assert!(!b.admit(later), "only one probe at a time");
        b.record(true, later);
        assert!(b.admit(later), "closed again after a good probe");
    }
}
