//! Telegram's webhook secret: the `secret_token` given to `setWebhook`
//! (<https://core.telegram.org/bots/api#setwebhook>), which Telegram sends back in
//! `X-Telegram-Bot-Api-Secret-Token` with every update. It is checked, in constant time,
//! before the body is read.

use http::HeaderMap;
use secrecy::SecretString;

use crate::inbound::Refusal;
use crate::token::{check_token, header};

/// The header Telegram sends the secret token in.
pub const SECRET_HEADER: &str = "x-telegram-bot-api-secret-token";

/// Whether the request carries `expected` (`TELEGRAM_WEBHOOK_SECRET`); off without one.
pub fn check(expected: Option<&SecretString>, headers: &HeaderMap) -> Result<(), Refusal> {
    check_token(expected, header(headers, SECRET_HEADER))
}

#[cfg(test)]
mod tests {
    use http::HeaderValue;

    use super::*;

    #[test]
    fn the_secret_header_is_checked() {
        let secret = SecretString::from("s3cret");
        let mut headers = HeaderMap::new();
        assert_eq!(check(Some(&secret), &headers), Err(Refusal::BadSignature));
        headers.insert(SECRET_HEADER, HeaderValue::from_static("s3cret"));
        assert_eq!(check(Some(&secret), &headers), Ok(()));
        assert_eq!(check(None, &headers), Err(Refusal::Off));
        headers.insert(SECRET_HEADER, HeaderValue::from_static("other"));
        assert_eq!(check(Some(&secret), &headers), Err(Refusal::BadSignature));
    }
}
