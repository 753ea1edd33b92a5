//! Where Slack keeps a file (<https://api.slack.com/types/file#auth>): its `url_private`
//! (or `url_private_download`), fetched with the bot token as a Bearer header. The URL comes
//! from the event, so the token is attached only to a URL under the configured files host
//! (`SLACK_FILES_BASE_URL`, `https://files.slack.com`): a URL anywhere else is refused, never
//! sent the token. The download itself goes through the SSRF guard of `hermes-media`.

use hermes_config::SlackSender;
use hermes_types::model::Media;
use reqwest::header::{AUTHORIZATION, HeaderValue};
use secrecy::ExposeSecret;
use url::Url;

use crate::media::{LocateError, Located};

const PLATFORM: &str = "slack";

/// Where the file `media` is and the bot token's header that fetches it.
pub(crate) fn locate(slack: &SlackSender, media: &Media) -> Result<Located, LocateError> {
    let refused = |why: &str| LocateError::Refused {
        platform: PLATFORM,
        why: why.to_string(),
    };
    let url = media
        .url
        .as_deref()
        .ok_or_else(|| refused("the message names no file URL"))?;
    let url = Url::parse(url).map_err(|e| refused(&format!("the file URL is not valid: {e}")))?;
    if !under(&url, &slack.files_base_url) {
        return Err(refused("the file URL is not on Slack's files host"));
    }
    let mut auth = HeaderValue::from_str(&format!("Bearer {}", slack.bot_token.expose_secret()))
        .map_err(|_| LocateError::NoCredentials { platform: PLATFORM })?;
    auth.set_sensitive(true);
    Ok(Located {
        url,
        auth: Some((AUTHORIZATION, auth)),
        size: None,
    })
}

/// Whether `url` is on `base`'s origin and under its path.
fn under(url: &Url, base: &Url) -> bool {
    url.scheme() == base.scheme()
        && url.host_str() == base.host_str()
        && url.port_or_known_default() == base.port_or_known_default()
        && url.path().starts_with(base.path().trim_end_matches('/'))
        && url.username().is_empty()
}

#[cfg(test)]
mod tests {
    use hermes_types::model::MediaKind;
    use secrecy::SecretString;

    use super::*;

    fn slack() -> SlackSender {
        SlackSender {
            bot_token: SecretString::from("xoxb-1".to_string()),
            base_url: "https://slack.com/api".parse().unwrap(),
            files_base_url: "https://files.slack.com".parse().unwrap(),
        }
    }

    fn media(url: &str) -> Media {
        Media {
            kind: MediaKind::Image,
            platform_id: Some("F1".into()),
            url: Some(url.into()),
            mime_type: Some("image/png".into()),
        }
    }

    #[test]
    fn a_file_on_slacks_host_is_fetched_with_the_bot_token() {
        let at = "https://files.slack.com/files-pri/T1-F1/download/a.png";
        let located = locate(&slack(), &media(at)).unwrap();
        assert_eq!(located.url.as_str(), at);
        let (name, value) = located.auth.unwrap();
        assert_eq!(
            (name, value.to_str().unwrap()),
            (AUTHORIZATION, "Bearer xoxb-1")
        );
        assert!(value.is_sensitive());
    }

    #[test]
    fn the_token_never_goes_anywhere_else() {
        for elsewhere in [
            "https://evil.example/files-pri/a.png",
            "http://files.slack.com/files-pri/a.png",
            "https://files.slack.com.evil.example/a.png",
            "https://files.slack.com:8443/a.png",
            "https://user@files.slack.com/a.png",
            "not a url",
        ] {
            assert!(
                matches!(
                    locate(&slack(), &media(elsewhere)),
                    Err(LocateError::Refused { .. })
                ),
                "{elsewhere}"
            );
        }
        let mut none = media("x");
        none.url = None;
        assert!(locate(&slack(), &none).is_err());
    }
}
