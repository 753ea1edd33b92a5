//! SMS through Twilio (docs/channels.md, "SMS through Twilio"): the account that sends, the
//! number or messaging service it sends from, the public URL Twilio signs its webhooks with,
//! and the per-number pace of sends.

use secrecy::SecretString;
use url::Url;

use super::Unset::{Means, Value};
use super::{kinds, settings};

settings! {
    /// Twilio's Programmable Messaging.
    SETTINGS = [
        TWILIO_ACCOUNT_SID: String {
            kind: kinds::TEXT,
            unset: Means("(none: SMS replies parked)"),
            secret: false,
            help: "Twilio account SID (`AC…`); with `TWILIO_AUTH_TOKEN` and a sender enables SMS replies",
        },
        TWILIO_AUTH_TOKEN: SecretString {
            kind: kinds::SECRET,
            unset: Means("(none: route off)"),
            secret: true,
            help: "Twilio auth token: signs `X-Twilio-Signature` (with `TWILIO_WEBHOOK_URL` enables `POST /webhooks/twilio`) and authenticates sends and media downloads",
        },
        TWILIO_WEBHOOK_URL: Url {
            kind: kinds::HTTP_URL,
            unset: Means("(none: route off)"),
            secret: false,
            help: "the public URL of `POST /webhooks/twilio` exactly as configured at Twilio (the signature covers it); also sent as each message's `StatusCallback`",
        },
        TWILIO_FROM_NUMBER: String {
            kind: kinds::TEXT,
            unset: Means("(none)"),
            secret: false,
            help: "the Twilio number SMS replies are sent from (E.164, `+1…`); or set `TWILIO_MESSAGING_SERVICE_SID`",
        },
        TWILIO_MESSAGING_SERVICE_SID: String {
            kind: kinds::TEXT,
            unset: Means("(none)"),
            secret: false,
            help: "a Messaging Service (`MG…`) SMS replies are sent through, in place of `TWILIO_FROM_NUMBER`",
        },
        TWILIO_API_BASE_URL: Url {
            kind: kinds::HTTP_URL,
            unset: Value("https://api.twilio.com"),
            secret: false,
            help: "base URL of Twilio's REST API (`/2010-04-01/Accounts/{sid}/Messages.json` is appended); media URLs are fetched only from its host",
        },
        HERMES_SMS_PER_SEC: f64 {
            kind: kinds::POSITIVE_RATE,
            unset: Value("1"),
            secret: false,
            help: "SMS segments per second sent from one number (Twilio's long-code limit is 1; raise it for a toll-free number, short code or messaging service)",
        },
    ]
}
