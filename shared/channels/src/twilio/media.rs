//! Where an MMS's file is (<https://www.twilio.com/docs/messaging/api/media-resource>): the
//! webhook's `MediaUrl{N}` on Twilio's API host, fetched with the account's basic auth. Twilio
//! answers that URL with a redirect to a short-lived signed URL on its CDN; the fetcher follows
//! no redirect (each hop must pass the SSRF guard), so the look-up is made here and its
//! `Location` fetched without the credentials, which never leave Twilio's host. A URL on any
//! other host is refused: the credentials go only where they belong.

use base64::Engine;
use base64::engine::general_purpose::STANDARD as BASE64;
use hermes_config::SmsSender;
use reqwest::header::{AUTHORIZATION, HeaderName, HeaderValue, LOCATION};
use secrecy::ExposeSecret;
use url::Url;

use crate::media::{LocateError, Located, Lookup};

const PLATFORM: &str = "sms";

/// Where the MMS file `media_url` of `sender`'s account is, asked through `lookup`.
pub(crate) async fn locate<L: Lookup>(
    sender: &SmsSender,
    media_url: &str,
    lookup: &L,
) -> Result<Located, L::Error> {
    let refused = |why: String| LocateError::Refused {
        platform: PLATFORM,
        why,
    };
    let url =
        Url::parse(media_url).map_err(|e| refused(format!("the media URL is not valid: {e}")))?;
    if url.host_str() != sender.base_url.host_str() || url.scheme() != sender.base_url.scheme() {
        return Err(refused("the media URL is not on Twilio's API host".into()).into());
    }
    let auth = basic(&sender.account_sid, sender.auth_token.expose_secret())
        .ok_or_else(|| refused("the account's credentials cannot be sent in a header".into()))?;
    let resp = lookup
        .get(PLATFORM, url.clone(), Some(auth.clone()))
        .await?;
    let status = resp.status();
    if status.is_redirection()
        && let Some(target) = resp.headers().get(LOCATION).and_then(|v| v.to_str().ok())
    {
        let target = url
            .join(target)
            .map_err(|e| refused(format!("the media redirect is not a URL: {e}")))?;
        return Ok(Located {
            url: target,
            auth: None,
            size: None,
        });
    }
    LocateError::check_status(PLATFORM, "the media URL", status)?;
    Ok(Located {
        url,
        auth: Some(auth),
        size: resp.content_length(),
    })
}

/// The basic `Authorization` header of `user` and `password`, marked sensitive.
fn basic(user: &str, password: &str) -> Option<(HeaderName, HeaderValue)> {
    let token = BASE64.encode(format!("{user}:{password}"));
    let mut value = HeaderValue::from_str(&format!("Basic {token}")).ok()?;
    value.set_sensitive(true);
    Some((AUTHORIZATION, value))
}
