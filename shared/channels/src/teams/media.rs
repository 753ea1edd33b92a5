//! Where a Teams file is: a file sent to the bot comes with a pre-authorized `downloadUrl`
//! (fetched as it is); an image pasted into the message comes as a `contentUrl` on the
//! Connector service, fetched with the bot's token
//! (<https://learn.microsoft.com/en-us/microsoftteams/platform/bots/how-to/bots-filesv4#receive-files-in-personal-chat>,
//! "inline images"). The token goes only to a host of `TEAMS_SERVICE_HOSTS`.

use hermes_config::TeamsSender;
use hermes_types::model::Media;
use reqwest::header::{AUTHORIZATION, HeaderValue};
use secrecy::ExposeSecret;
use url::Url;

use super::token::Token;
use crate::RetryPolicy;
use crate::media::{LocateError, Located};

const PLATFORM: &str = "teams";

/// The download of `media`: with the bot's token (`token`, when the sender is configured)
/// on a Connector host, as it is anywhere else.
pub async fn locate(
    sender: Option<(&TeamsSender, &Token)>,
    media: &Media,
) -> Result<Located, LocateError> {
    let refused = |why: &str| LocateError::Refused {
        platform: PLATFORM,
        why: why.into(),
    };
    let url = media
        .url
        .as_deref()
        .ok_or_else(|| refused("the message names no file"))?;
    let url = Url::parse(url).map_err(|e| LocateError::bad_url(PLATFORM, e))?;
    let Some((_, token)) = sender.filter(|(s, _)| s.serves(&url)) else {
        return Ok(Located {
            url,
            auth: None,
            size: None,
        });
    };
    let token = token
        .get(&RetryPolicy::default())
        .await
        .map_err(|f| LocateError::Unavailable {
            platform: PLATFORM,
            why: f.reason.to_string(),
        })?;
    let mut value = HeaderValue::from_str(&format!("Bearer {}", token.expose_secret()))
        .map_err(|_| refused("the bot's token is not a header value"))?;
    value.set_sensitive(true);
    Ok(Located {
        url,
        auth: Some((AUTHORIZATION, value)),
        size: None,
    })
}
