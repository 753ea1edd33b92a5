//! Facebook Messenger (docs/channels.md, "Facebook Messenger"): the Meta app's webhook
//! secrets and the Page's access token.

use secrecy::SecretString;
use url::Url;

use super::Unset::{Means, Value};
use super::{kinds, settings};

settings! {
    /// Meta's Messenger Platform.
    SETTINGS = [
        MESSENGER_APP_SECRET: SecretString {
            kind: kinds::SECRET,
            unset: Means("(none: route off)"),
            secret: true,
            help: "app secret that signs `X-Hub-Signature-256`; enables `POST /webhooks/messenger`",
        },
        MESSENGER_VERIFY_TOKEN: SecretString {
            kind: kinds::SECRET,
            unset: Means("(none: route off)"),
            secret: true,
            help: "token of Meta's subscription handshake; enables `GET /webhooks/messenger`",
        },
        MESSENGER_PAGE_ACCESS_TOKEN: SecretString {
            kind: kinds::SECRET,
            unset: Means("(none: Messenger replies parked)"),
            secret: true,
            help: "the Page's access token of the Send API (`access_token` parameter); enables Messenger replies",
        },
        MESSENGER_API_BASE_URL: Url {
            kind: kinds::HTTP_URL,
            unset: Value("https://graph.facebook.com/v21.0"),
            secret: false,
            help: "base URL of the Graph API (`/me/messages` is appended)",
        },
    ]
}
