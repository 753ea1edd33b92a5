//! WhatsApp's customer-service window
//! (<https://developers.facebook.com/docs/whatsapp/cloud-api/guides/send-messages#customer-service-windows>,
//! docs/channels.md, "WhatsApp's window and templates"): Meta accepts free text to a user
//! only within 24 hours of that user's last message; later, only an approved template
//! ([`super::templates`]). The chat's last message is kept by the database
//! (`whatsapp_windows`); the delivery stage reads it and asks [`is_open`].

use chrono::{DateTime, TimeDelta, Utc};

/// How long after a user's message free text may be sent to them (Meta's rule).
pub const LENGTH: TimeDelta = TimeDelta::hours(24);

/// Whether free text sent at `now` to a user who last wrote at `last_inbound_at` is inside
/// the window, with `margin` to spare (a send that starts just before the close may wait
/// and retry before it reaches Meta).
pub fn is_open(last_inbound_at: DateTime<Utc>, now: DateTime<Utc>, margin: TimeDelta) -> bool {
    now + margin < last_inbound_at + LENGTH
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_window_closes_24_hours_after_the_users_message_less_the_margin() {
        let at = DateTime::parse_from_rfc3339("2026-01-01T10:00:00Z")
            .unwrap()
            .to_utc();
        let margin = TimeDelta::minutes(2);
        let open = |later: TimeDelta, margin| is_open(at, at + later, margin);
        assert!(open(TimeDelta::zero(), margin));
        assert!(open(TimeDelta::hours(23), margin));
        assert!(!open(TimeDelta::minutes(24 * 60 - 2), margin));
        assert!(!open(TimeDelta::hours(25), margin));
        assert!(open(TimeDelta::minutes(24 * 60 - 2), TimeDelta::zero()));
    }
}
